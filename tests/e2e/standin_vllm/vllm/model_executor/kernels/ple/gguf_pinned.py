"""Stand-in of the GGUF pinned-decode admission.

Mirrors ``pinned_decode_active`` of vllm/model_executor/kernels/ple/gguf_pinned.py in
1CatAI/1Cat-vLLM (the public index's versions of 4514 and 6492 characters agree on it; commit
69e0780a82cb19f71237d818ba5ad8ae491af5ff holds the path): it reads the resolved config's
``kernel_config.ple_pinned_decode_active`` (the current config when none is given).
"""

from vllm.config import get_current_vllm_config_or_none


def pinned_decode_active(config=None) -> bool:
    if config is None:
        config = get_current_vllm_config_or_none()
    return bool(getattr(getattr(config, "kernel_config", None), "ple_pinned_decode_active", False))
