"""A tiny deterministic transform for tests of the patch engine's own mechanics.

The real transform (libcst) is exercised by the engine matrix and the CLI tests;
these tests pass `patch_source=fake_patch` to the commands so they test locking,
backups, states and crash safety fast and independently of the injected code.
"""

from __future__ import annotations

from ple4patch import manifest as m
from ple4patch.sentinel import PATCH_ID, sentinel_line

OLD_PATCH_ID = "nvfp4-rowpacked-0"


def fake_patch(text: str, patch_id: str = PATCH_ID) -> str:
    return text + f"\n{sentinel_line(patch_id)}\nPLE4_FAKE_PATCH = {patch_id!r}\n"


def fake_patch_old(text: str) -> str:
    return fake_patch(text, OLD_PATCH_ID)


def fake_manifest(*pristine: bytes, older: bool = False, label: str = "test pin") -> m.Manifest:
    """Pins for `pristine` files under the fake transform (and, with older=True, its old id)."""
    from .pins import pin_for

    out = m.Manifest(sources=["test"])
    for data in pristine:
        old = {OLD_PATCH_ID: pin_for(data, fake_patch_old, label=label, source="test").patched_sha256}
        out.add(pin_for(data, fake_patch, label=label, source="test", engine_versions=">=1.5.0,<1.6",
                        older=old if older else None))
    return out


PRISTINE_A = b'"""stand-in ple_layer A"""\n\nX = 1\n'
PRISTINE_B = b'"""stand-in ple_layer B (another engine version)"""\n\nX = 2\n'
