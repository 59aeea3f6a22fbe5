"""Row arithmetic: how many rows the engine builds for a PLE table, and how they split into shards."""

from __future__ import annotations

from functools import lru_cache

from .config import PleConfig
from .layout import ple_layer_id

_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin for every n < 3.3e24."""
    if n < 2:
        return False
    for p in _MR_BASES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def primes_after(start: int, count: int) -> list[int]:
    """The first ``count`` primes greater than ``start``."""
    found: list[int] = []
    candidate = start
    while len(found) < count:
        candidate += 1
        if is_prime(candidate):
            found.append(candidate)
    return found


@lru_cache(maxsize=4)
def _head_primes(base: int, count: int) -> tuple[int, ...]:
    """The first ``count`` primes at or above ``base``: one per n-gram head, all PLE layers in order."""
    return tuple(primes_after(base - 1, count))


def engine_table_rows(config: PleConfig, layer: int) -> int | None:
    """Rows of the table the engine builds for decoder layer ``layer`` (0-based).

    Each of the layer's n-gram heads gets a prime-sized slice (the k-th prime at
    or above ``ngram_vocab_size_base``, k counted over all PLE layers' heads),
    the sum padded to ``make_ngram_vocab_size_divisible_by``. None when the
    config lacks what that takes (or holds numbers no real model has) or the
    layer is not a PLE layer.
    """
    ids = config.layer_ids
    ngram, heads = config.number("ngram_size"), config.number("heads_per_ngram")
    divisor = config.number("make_ngram_vocab_size_divisible_by")
    if ids is None or ngram is None or heads is None or divisor is None or not config.rows_computable:
        return None
    if ple_layer_id(layer) not in ids:
        return None
    dense = ids.index(ple_layer_id(layer))
    n_heads = (ngram - 1) * heads
    if config.head_sizes is not None:
        total = sum(config.head_sizes)
    else:
        base = config.number("ngram_vocab_size_base")
        if base is None:
            return None
        primes = _head_primes(base, (dense + 1) * n_heads)
        total = sum(primes[dense * n_heads : (dense + 1) * n_heads])
    return -(-total // divisor) * divisor


def shard_rows(total: int, parts: int, index: int) -> int:
    """Rows of checkpoint shard ``index``: ceil(total/parts), the last ones shorter."""
    size = -(-total // parts)
    return max(0, min(size, total - index * size))
