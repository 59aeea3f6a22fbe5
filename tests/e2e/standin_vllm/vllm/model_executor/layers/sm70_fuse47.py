"""Stand-in of the SM70 small-kernel fusion switches an areslp ple_layer.py consults.

Mirrors vllm/model_executor/layers/sm70_fuse47.py of areslp/1Cat-vLLM (a fork of
1CatAI/1Cat-vLLM) at 1af83d8143de5286c13a60ecbdd3024f9f07fa42: ``ONECAT_FUSE47`` (read once, at
import) selects units from ``h1,p1,p2,u3z,s1,h2`` or ``all``, and an unknown unit raises
ValueError; ``unit_enabled(unit)`` answers from that selection (or the test override);
``p1_supported`` / ``p2_supported`` admit a fused kernel only for CUDA tensors on an SM70 device
(with shape checks), so on any other device the engine keeps its production path. The Triton
kernels themselves (``ple_ngram_ids``, ``ple_short_conv_spec``) are not reproduced: they are
reached only on SM70.
"""

import collections
import os

import torch

UNITS = ("h1", "p1", "p2", "u3z", "s1", "h2")
_OFF = {"none", "0", "off"}
ROUTE_COUNTS: collections.Counter = collections.Counter()


def parse_units(raw):
    """The selected units of an ONECAT_FUSE47 value (None or empty: none)."""
    named = {part.strip().lower() for part in (raw or "").split(",")} - {""}
    if "all" in named:
        return frozenset(UNITS)
    bad = sorted(named - _OFF - set(UNITS))
    if bad:
        raise ValueError(f"ONECAT_FUSE47: unknown units {bad}")
    return frozenset(named & set(UNITS))


_SELECTED = parse_units(os.getenv("ONECAT_FUSE47"))
_override = None


def enabled_units():
    return _SELECTED if _override is None else _override


def unit_enabled(unit):
    return unit in enabled_units()


def set_units_override(units):
    global _override
    _override = units


def note_route(unit, route):
    ROUTE_COUNTS[(unit, route)] += 1


def _on_sm70(tensor):
    return tensor.is_cuda and torch.cuda.get_device_capability(tensor.device) == (7, 0)


def p1_supported(emb, input_ids, query_start_loc, ngram_context, out):
    return out is not None and _on_sm70(input_ids)


def p2_supported(layer, x_spec, conv_state, conv_weights, spec_query_len):
    return _on_sm70(x_spec)


def _sm70_only(*args, **kwargs):
    raise NotImplementedError("the stand-in has no SM70 fused PLE kernels")


ple_ngram_ids = _sm70_only
ple_short_conv_spec = _sm70_only
