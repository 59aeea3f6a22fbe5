"""libcst transforms that patch the engine's ``ple_layer.py`` (one transformer per change).

``patch_source(source) -> str`` is the whole patch: pure, deterministic, all or nothing (and
``patch_policy_source``, ``patch_config_source`` the same for the other files a set may hold:
``vllm/platforms/runtime_defaults.py``, ``vllm/config/vllm.py``). Each
transformer (a libcst codemod) asserts that its anchor matched exactly once and otherwise raises
``ple4patch.errors.TransformError(anchor, detail)``. libcst is imported only when a patch is
actually made, so ``status`` never pays for it.
"""

from __future__ import annotations


def patch_source(source: str) -> str:
    """The fully patched text of ``ple_layer.py``, or a TransformError; never partial."""
    from .pipeline import patch_source as _patch_source

    return _patch_source(source)


__all__ = ["patch_source"]


def patch_policy_source(source: str) -> str:
    """The patched text of the engine's ``vllm/platforms/runtime_defaults.py`` (see ``policy``)."""
    from .policy import patch_policy_source as _patch_policy_source

    return _patch_policy_source(source)


__all__ += ["patch_policy_source"]


def patch_config_source(source: str) -> str:
    """The patched text of the engine's ``vllm/config/vllm.py`` (see ``config``)."""
    from .config import patch_config_source as _patch_config_source

    return _patch_config_source(source)


__all__ += ["patch_config_source"]
