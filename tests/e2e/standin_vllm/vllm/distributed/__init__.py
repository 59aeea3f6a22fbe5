"""Stand-in vllm.distributed: one process simulates one tensor-parallel rank."""

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
