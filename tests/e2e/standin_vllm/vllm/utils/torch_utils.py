"""Stand-in custom-op registration and UVA view.

direct_register_custom_op defines `torch.ops.vllm.<op_name>` once per process; registering the
same name again (several patched modules in one test session) re-points it to the newest
function, and `activate(module)` points every op a module registered back to that module.
"""

import torch

_LIB = torch.library.Library("vllm", "FRAGMENT")
_IMPLS: dict = {}
_FAKES: dict = {}
_BY_MODULE: dict = {}


def direct_register_custom_op(op_name, op_func, mutates_args=None, fake_impl=None,
                              target_lib=None, dispatch_key=None, tags=()):
    first = op_name not in _IMPLS
    _IMPLS[op_name] = op_func
    _FAKES[op_name] = fake_impl
    _BY_MODULE.setdefault(op_func.__module__, {})[op_name] = (op_func, fake_impl)
    if not first:
        return
    schema = torch.library.infer_schema(op_func, mutates_args=mutates_args or [])
    _LIB.define(op_name + schema)

    def impl(*args, **kwargs):
        return _IMPLS[op_name](*args, **kwargs)

    def fake(*args, **kwargs):
        return _FAKES[op_name](*args, **kwargs)

    _LIB.impl(op_name, impl, "CompositeExplicitAutograd")
    if fake_impl is not None:
        _LIB._register_fake(op_name, fake)


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
