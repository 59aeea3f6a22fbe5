"""Minimal stand-in `vllm` package for ple4patch's end-to-end tests (tests only, not vLLM).

It provides every name the real 1Cat-vLLM ple_layer.py files import, with just enough
behaviour to build Qwen4ExpNGramEmbedding, load weights and look rows up. Test knobs live in
`vllm._standin` (tensor-parallel rank, pinned memory, offload-process flag, ...).
"""
