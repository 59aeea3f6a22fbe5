"""Stand-in of the compact PLE prefill gate (SM70).

Mirrors vllm/models/qwen4_exp/nvidia/ops/ple_prefill_gate.py of 1CatAI/1Cat-vLLM at
22ab8e0743c277d1418aa62de274cfac27252d04, whose ple_layer.py imports the four functions below;
the module at 6d7071b64dc557be0c18982c4f480e8f147c31a1 has the same three others and no
``report_prefill_gate_fallback`` (that commit's ple_layer.py does not import it).

The layer takes this route only while ``torch.compiler.is_compiling()`` and the decode-graph
semantics are off, after ``prefill_gate_reason`` returns None. Reproduced:
``prefill_gate_reason(key, query, value, norms, groups)`` returns ``"requires_sm70"`` for a
tensor not on a CUDA device of capability 7.0, which is every tensor these tests make; on an
SM70 device it applies the real admission rules (2-D FP16 operands, rows present, 4 groups of
2560 over a 10240-wide key, unit last stride, three contiguous 10240-element FP16/FP32 norm
weights on the key's device). ``report_prefill_gate_fallback(reason)`` logs the reason at debug
level, once. Not reproduced: ``prepare_prefill_gate`` and ``finish_prefill_gate`` run Triton
kernels the real module registers as the custom ops ``qwen4_exp_ple_prefill_gate`` and
``qwen4_exp_ple_prefill_finish``; here they raise NotImplementedError (no test runs them).
"""

import torch

from vllm.logger import init_logger

logger = init_logger(__name__)

_GROUPS, _HIDDEN = 4, 2560
_WIDTH = _GROUPS * _HIDDEN


def _on_sm70(t: torch.Tensor) -> bool:
    return t.is_cuda and torch.cuda.get_device_capability(t.device) == (7, 0)


def report_prefill_gate_fallback(reason):
    logger.debug_once("PLE compact prefill gate fallback: %s.", reason)


def prefill_gate_reason(key, query, value, norms, groups):
    if not _on_sm70(key):
        return "requires_sm70"
    if key.ndim != 2 or value.ndim != 2 or query.shape != key.shape:
        return "invalid_tensor_shapes"
    rows = key.shape[0]
    if rows == 0:
        return "empty_query_rows"
    if any(t.dtype != torch.float16 for t in (key, query, value)):
        return "requires_fp16_operands"
    if groups != _GROUPS or key.shape[1] != _WIDTH or tuple(value.shape) != (rows, _HIDDEN):
        return "unqualified_hc_geometry"
    for t in (query, value):
        if t.device != key.device or t.stride(-1) != 1:
            return "unsupported_operand_layout"
    norms_ok = len(norms) == 3 and all(
        w.device == key.device and w.numel() == _WIDTH and w.is_contiguous()
        and w.dtype in (torch.float16, torch.float32)
        for w in norms
    )
    if not norms_ok or key.stride(-1) != 1 or key.stride(0) < key.shape[1]:
        return "unsupported_norm_layout"
    return None


def prepare_prefill_gate(key, query, value, norms, groups, eps):
    raise NotImplementedError(
        "stand-in vllm: the SM70 compact PLE prefill gate kernel (qwen4_exp_ple_prefill_gate) "
        "is not reproduced; prefill_gate_reason admits it only on an SM70 CUDA device"
    )


def finish_prefill_gate(output, value, gates, residual=None):
    raise NotImplementedError(
        "stand-in vllm: the SM70 compact PLE prefill epilogue (qwen4_exp_ple_prefill_finish) "
        "is not reproduced; prefill_gate_reason admits it only on an SM70 CUDA device"
    )
