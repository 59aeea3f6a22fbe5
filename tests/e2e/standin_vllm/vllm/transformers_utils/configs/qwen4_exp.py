"""Stand-in Qwen4Exp text config: keyword arguments become attributes.

Mirrors vllm/transformers_utils/configs/qwen4_exp.py of 1CatAI/1Cat-vLLM: no real source of it is available here (added after
ae13773a0deebf583022613c4508e5072cedef91); it only provides the names the real ple_layer.py files import.
"""


class Qwen4ExpTextConfig:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)
