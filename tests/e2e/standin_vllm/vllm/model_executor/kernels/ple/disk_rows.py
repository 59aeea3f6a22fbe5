"""Stand-in: the mapped-row disk reader is not part of these tests.

Mirrors vllm/model_executor/kernels/ple/disk_rows.py of 1CatAI/1Cat-vLLM: no real source of it is available here (added after
ae13773a0deebf583022613c4508e5072cedef91); it only provides the names the real ple_layer.py files import.
"""


class MappedRowGatherKernel:
    pass


def prepare_mapped_row_gather(**kwargs):
    raise NotImplementedError("the stand-in engine has no disk row reader")
