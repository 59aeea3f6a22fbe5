"""Stand-in vllm.distributed: one process simulates one tensor-parallel rank.

Mirrors vllm/distributed/__init__.py (re-exported from vllm/distributed/parallel_state.py and communication_op.py) of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91.
"""

from vllm import _standin


def get_tensor_model_parallel_rank() -> int:
    return _standin.tp_rank


def get_tensor_model_parallel_world_size() -> int:
    return _standin.tp_size


def tensor_model_parallel_all_reduce(tensor):
    # One simulated rank: the other ranks' (masked) contributions are not here.
    return tensor


def divide(numerator: int, denominator: int) -> int:
    assert numerator % denominator == 0, (numerator, denominator)
    return numerator // denominator
