"""The marker a patched target carries, readable without libcst.

`status` must stay fast, so it detects a patched file by this plain-text line
instead of parsing the file.
"""

from __future__ import annotations

import re

# The id of the patch this version of ple4patch writes. Bump it whenever the
# injected code or the transforms change what is written.
PATCH_ID = "nvfp4-rowpacked-6"

SENTINEL_PREFIX = "# ple4patch: patch-id="
_SENTINEL_RE = re.compile(r"^# ple4patch: patch-id=([A-Za-z0-9._-]+)\s*$", re.MULTILINE)


def sentinel_line(patch_id: str = PATCH_ID) -> str:
    return f"{SENTINEL_PREFIX}{patch_id}"


def find_patch_id(text: str) -> str | None:
    """The patch id a target was patched with, or None for an unpatched file."""
    match = _SENTINEL_RE.search(text)
    return match.group(1) if match else None


# Every block ple4patch injects opens and closes with these prefixes (transform/_common.py and
# transform/policy.py spell out the whole lines).
BLOCK_BEGIN_PREFIX = "# >>> ple4patch: "
BLOCK_END_PREFIX = "# <<< ple4patch: "
_BLOCK_RE = re.compile(
    r"^" + re.escape(BLOCK_BEGIN_PREFIX) + r".*?^" + re.escape(BLOCK_END_PREFIX) + r"[^\n]*$",
    re.MULTILINE | re.DOTALL,
)


def strip_injected(text: str) -> str:
    """`text` without the blocks ple4patch injected: what the engine release itself defines."""
    return _BLOCK_RE.sub("", text)
