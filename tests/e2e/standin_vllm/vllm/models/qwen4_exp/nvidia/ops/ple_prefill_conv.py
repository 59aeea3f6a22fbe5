"""Stand-in of the direct dilated PLE prefill convolution (SM70).

Mirrors vllm/models/qwen4_exp/nvidia/ops/ple_prefill_conv.py of 1CatAI/1Cat-vLLM at
22ab8e0743c277d1418aa62de274cfac27252d04 (``prefill_conv(..., dilation, output=None)``, which
that commit's and 6d7071b64dc557be0c18982c4f480e8f147c31a1's ple_layer.py call with an eighth
argument, ``output``; the module at 732e6477b2abe3074f03672d7503cac94801a9d6 has no ``output``
and its ple_layer.py passes seven). ple_layer.py imports it lazily in the PLE short-conv
prefill, when ``get_forward_kernel_config_or_none()`` is None or its
``prefill_ple_short_conv`` is on.

Reproduced: ``prefill_conv_reason(x, state, weight, requests, dilation)`` returns
``"requires_sm70"`` for a tensor not on a CUDA device of capability 7.0, which is every tensor
these tests make; on an SM70 device it applies the real admission rules in the real order
(FP16 input and weight, FP16/FP32 state, 2-D/2-D/3-D ranks, at least 512 query rows, 1..16
requests and dilation 1..8, 2..8 taps, matching channels, a non-empty state of at least
``(taps - 1) * dilation`` history on one device). Not reproduced: ``prefill_conv`` runs two
Triton kernels (the convolution with SiLU and the state commit); here it raises
NotImplementedError (no test runs it).
"""

import torch


def prefill_conv_reason(x, state, weight, requests, dilation):
    if not (x.is_cuda and torch.cuda.get_device_capability(x.device) == (7, 0)):
        return "requires_sm70"
    if x.dtype != torch.float16 or weight.dtype != torch.float16:
        return "requires_fp16_operands"
    if state.dtype not in (torch.float16, torch.float32):
        return "unsupported_state_dtype"
    if (x.ndim, weight.ndim, state.ndim) != (2, 2, 3):
        return "invalid_tensor_rank"
    if x.shape[0] < 512:
        return "query_rows_below_prefill_band"
    if not (1 <= requests <= 16 and 1 <= dilation <= 8):
        return "unqualified_request_count_or_dilation"
    taps = weight.shape[1]
    if not 2 <= taps <= 8:
        return "unqualified_kernel_width"
    channels = x.shape[1]
    layout_ok = (
        weight.shape[0] == channels
        and state.shape[1] == channels
        and state.shape[0] > 0
        and state.shape[2] >= (taps - 1) * dilation
        and x.device == state.device == weight.device
    )
    return None if layout_ok else "invalid_channel_state_or_device_layout"


def prefill_conv(x, state, weight, starts, states, has_initial, dilation, output=None):
    raise NotImplementedError(
        "stand-in vllm: the SM70 direct PLE prefill convolution kernels are not reproduced; "
        "prefill_conv_reason admits them only on an SM70 CUDA device"
    )
