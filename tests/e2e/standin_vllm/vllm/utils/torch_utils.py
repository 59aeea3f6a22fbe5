"""Stand-in custom-op registration and UVA view.

Mirrors ``direct_register_custom_op`` of vllm/utils/torch_utils.py in 1CatAI/1Cat-vLLM at
ae13773a0deebf583022613c4508e5072cedef91 (2026-08-22): the op is defined in the ``vllm``
library (``my_lib.define``: defining a name twice raises RuntimeError) and its implementation is
registered for ``dispatch_key`` only, by default ``current_platform.dispatch_key`` ("CUDA" on the
V100 platform): a call whose tensors live on another backend raises NotImplementedError from the
dispatcher.

One test process imports several engine files, each a fresh engine process in the real world;
``new_process()`` starts such a simulated process (its registrations may repeat the names of the
previous one). Under torch each name is defined once per real process; the stand-in routes it to
the implementation of the active simulated process, and ``activate(module)`` points every op a
module registered back to that module.
"""

import torch

_LIB = torch.library.Library("vllm", "FRAGMENT")
_IMPLS: dict = {}
_FAKES: dict = {}
_KEYS: dict = {}  # op name -> dispatch keys it has an impl for (per real process)
_BY_MODULE: dict = {}
_REGISTERED: set = set()  # op names registered in the current simulated process


def new_process() -> None:
    """Start a new simulated engine process: its ops may be registered (once each) again."""
    _REGISTERED.clear()


def direct_register_custom_op(op_name, op_func, mutates_args=None, fake_impl=None,
                              target_lib=None, dispatch_key=None, tags=()):
    if op_name in _REGISTERED:
        raise RuntimeError(
            f"Tried to register an operator (vllm::{op_name}) with the same name and overload "
            "name multiple times."
        )
    if dispatch_key is None:
        from vllm.platforms import current_platform

        dispatch_key = current_platform.dispatch_key
    _REGISTERED.add(op_name)
    first = op_name not in _IMPLS
    _IMPLS[op_name] = op_func
    _FAKES[op_name] = fake_impl
    _BY_MODULE.setdefault(op_func.__module__, {})[op_name] = (op_func, fake_impl)
    if first:
        schema = torch.library.infer_schema(op_func, mutates_args=mutates_args or [])
        _LIB.define(op_name + schema, tags=tags)
        if fake_impl is not None:

            def fake(*args, **kwargs):
                return _FAKES[op_name](*args, **kwargs)

            _LIB._register_fake(op_name, fake)
    keys = _KEYS.setdefault(op_name, set())
    if dispatch_key not in keys:

        def impl(*args, **kwargs):
            return _IMPLS[op_name](*args, **kwargs)

        _LIB.impl(op_name, impl, dispatch_key)
        keys.add(dispatch_key)


def activate(module) -> None:
    for op_name, (op_func, fake_impl) in _BY_MODULE.get(module.__name__, {}).items():
        _IMPLS[op_name] = op_func
        _FAKES[op_name] = fake_impl


class _CudaArrayInterface:
    def __init__(self, base: torch.Tensor):
        self.base = base  # keeps the host memory alive as long as the view
        self.__cuda_array_interface__ = {
            "shape": tuple(base.shape),
            "strides": tuple(s * base.element_size() for s in base.stride()),
            "typestr": "|u1",
            "data": (base.data_ptr(), False),
            "version": 3,
        }


def get_accelerator_view_from_cpu_tensor(cpu_tensor: torch.Tensor) -> torch.Tensor:
    """A CUDA tensor over pinned host memory (UVA: the host pointer is valid on the device)."""
    if cpu_tensor.device.type != "cpu" or not cpu_tensor.is_pinned():
        raise ValueError("get_accelerator_view_from_cpu_tensor needs a pinned CPU tensor")
    if cpu_tensor.dtype != torch.uint8:
        raise ValueError("the stand-in UVA view supports uint8 tensors only")
    return torch.as_tensor(_CudaArrayInterface(cpu_tensor), device="cuda")
