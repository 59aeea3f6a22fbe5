"""Stand-in of the switchable compile-cache reuse of Qixiao02's fork.

Mirrors vllm/compilation/sx_compile_cache.py of Qixiao02/1Cat-vLLM at
7ee70bdc854c712eba2581a3dcbf4b1429fc6379 (a fork of 1CatAI/1Cat-vLLM; its ple_layer.py at that
commit does ``from vllm.compilation import sx_compile_cache`` and calls the two functions below).
``compile_cache_enabled(environ=None)`` is true when ``SX_OPT_COMPILE_CACHE`` is one of
``1``/``on``/``true``/``yes``/``subgraph``/``aot`` (case and blanks ignored); unset, empty,
``0``/``off``/``false``/``no``/``none`` and any unknown value are off (the real module warns about
an unknown one). ``register_baked_constant(name, value)`` records ``repr(value)`` under ``name``
for the compile cache key; ``baked_constants()`` returns them sorted. The build identity and the
cache policy the real module also computes are not reproduced (nothing here compiles a graph).
"""

import os

ENV_SWITCH = "SX_OPT_COMPILE_CACHE"
_ON_VALUES = frozenset({"1", "on", "true", "yes", "subgraph", "aot"})
_BAKED_CONSTANTS: dict = {}


def compile_cache_enabled(environ=None) -> bool:
    env = os.environ if environ is None else environ
    return (env.get(ENV_SWITCH) or "").strip().lower() in _ON_VALUES


def register_baked_constant(name: str, value: object) -> None:
    _BAKED_CONSTANTS[name] = repr(value)


def baked_constants() -> dict:
    return dict(sorted(_BAKED_CONSTANTS.items()))
