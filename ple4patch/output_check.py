"""The one check of a transform's output before anything is written or pinned.

`check_output` is called by `apply` (and its dry run) and by `tools/pin_manifest.py`:
the output is text, carries the sentinel line exactly once with the current patch id,
compiles, and (given a pin) has the sha256 the manifest pins. Any failure is a
`Ple4Error` naming the file, and nothing is written.
"""

from __future__ import annotations

from .errors import Ple4Error, UsageError
from .hashing import sha256_hex
from .manifest import EXTRA_ENV, Pin
from .sentinel import PATCH_ID, find_patch_id, sentinel_line


def check_output(out: object, path: str, pin: Pin | None = None) -> bytes:
    """The bytes to write for transform output `out` of `path`, or a Ple4Error."""
    if not isinstance(out, str):
        raise Ple4Error(f"the transform returned {type(out).__name__}, not text; nothing written")
    if out.count(sentinel_line()) != 1 or find_patch_id(out) != PATCH_ID:
        raise Ple4Error(
            f"the transform output for {path} does not carry the sentinel {sentinel_line()!r} "
            f"exactly once; nothing written"
        )
    data = out.encode("utf-8")
    try:
        compile(data, path, "exec")  # as the interpreter reads the file (a UTF-8 BOM included)
    except (SyntaxError, ValueError) as exc:
        where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        raise Ple4Error(
            f"the transform output for {path} does not compile{where}: {exc}; nothing written"
        ) from None
    if pin is not None:
        sha = sha256_hex(data)
        if (pin.patch_id != PATCH_ID or pin.patched_sha256 != sha) and pin.from_extra:  # the user's file
            raise UsageError(
                f"the pin of {path} in {pin.source} ({pin.shown_label}), a manifest named in ${EXTRA_ENV} "
                f"or passed by the caller, does not match this ple4patch's output: it pins {pin.patch_id} "
                f"{pin.patched_sha256[:16]}…, this build makes {PATCH_ID} {sha[:16]}…; nothing written: "
                f"fix or drop it"
            )
        if pin.patch_id != PATCH_ID or pin.patched_sha256 != sha:
            raise Ple4Error(
                f"the transform output for {path} ({pin.shown_label}) has sha256 {sha[:16]}… but the "
                f"manifest pins {pin.patch_id} {pin.patched_sha256[:16]}… (this build is "
                f"{PATCH_ID}): nothing written; this ple4patch build is inconsistent "
                f"(developers: `make pin`)"
            )
    return data
