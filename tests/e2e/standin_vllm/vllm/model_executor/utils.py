"""Stand-in set_weight_attrs.

Mirrors vllm/model_executor/utils.py of 1CatAI/1Cat-vLLM at
ae13773a0deebf583022613c4508e5072cedef91 (vllm-project/vllm, whose ple_layer.py at
020a97c768b88cb61049abc3961ad9d7793ca10e imports it, has the same function at
04aadb3b2f4304b74bf55b1f2180ef08e503f01c): ``set_weight_attrs(weight, weight_attrs)`` does nothing
for None, else sets each attribute on the tensor and refuses (AssertionError) to overwrite one the
tensor already has. The platform's synced weight loader (TPU only) is not reproduced.
"""


def set_weight_attrs(weight, weight_attrs):
    if weight_attrs is None:
        return
    for key, value in weight_attrs.items():
        assert not hasattr(weight, key), f"Overwriting existing tensor attribute: {key}"
        setattr(weight, key, value)
