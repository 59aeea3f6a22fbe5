"""Stand-in: the SM70 n-gram id kernel is not part of these tests.

Mirrors vllm/model_executor/kernels/ple/ngram.py of 1CatAI/1Cat-vLLM: no real source of it is available here (added after
ae13773a0deebf583022613c4508e5072cedef91); it only provides the names the real ple_layer.py files import.
"""

SM70_PLE_NGRAM = None


def sm70_ple_ngram_ids(*args, **kwargs):
    raise NotImplementedError("the stand-in engine has no SM70 n-gram kernel")
