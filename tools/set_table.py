"""The README's table of which engine versions patch which files, made from the shipped manifests.

`python tools/set_table.py` prints it; `tests/test_set_table.py` fails when the README's copy
differs. One row per engine commit that a pin's label names (`1Cat-vLLM main 036318a0`; a
label's trailing `(start-up policy)` names the file, not the engine), with the pin's
`engine_versions` (the version range it plausibly belongs to) and, per file of the set, its
pinned sha256. The patch set follows from the pins where they say it: a commit with a pin for
`runtime_defaults.py` (or for `vllm/config/vllm.py`) has that file. Where they do not, the row
says "not recorded": a pin says that a file with these bytes exists, never that a file does not.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ple4patch import manifest as m  # noqa: E402
from ple4patch.paths import CONFIG_REL, POLICY_REL, TARGET_REL  # noqa: E402

FILES = (TARGET_REL, POLICY_REL, CONFIG_REL)
NOT_RECORDED = "not recorded"


def _engine(label: str) -> str:
    return re.sub(r"\s*\([^)]*\)$", "", label)


def _lowest(versions: str) -> tuple:
    """Sort key: the range's lower bound (ranges the manifest does not record last)."""
    found = re.search(r">=\s*([0-9][^,]*)", versions)
    if not found:
        return (1,)
    from packaging.version import Version

    return (0, Version(found.group(1)))


def rows(manifests: list[Path] | None = None) -> list[list[str]]:
    """[engine, engine versions, ple_layer.py, runtime_defaults.py, vllm/config/vllm.py, patch set]
    per engine commit."""
    by_engine: dict[str, dict] = {}
    for path in manifests if manifests is not None else m.shipped_files():
        for pin in m.load_file(path).pins.values():
            row = by_engine.setdefault(_engine(pin.label), {"versions": set(), "files": {}})
            if pin.engine_versions:
                row["versions"].add(pin.engine_versions)
            row["files"][pin.target] = pin.pristine_sha256[:12]
    out = []
    for engine, row in by_engine.items():
        versions = " or ".join(f"`{v}`" for v in sorted(row["versions"])) or NOT_RECORDED
        cells = [f"pinned, sha256 {row['files'][f]}" if f in row["files"] else "no pin names it" for f in FILES]
        if POLICY_REL in row["files"]:
            files = "`ple_layer.py` + `runtime_defaults.py`"
        elif CONFIG_REL in row["files"]:
            files = "`ple_layer.py` + `vllm/config/vllm.py`"
        else:
            files = f"`ple_layer.py` (+ `runtime_defaults.py` or `vllm/config/vllm.py`? {NOT_RECORDED})"
        out.append([engine, versions, *cells, files, min(map(_lowest, row["versions"]), default=(1,))])
    out.sort(key=lambda r: (r[-1], r[0]))
    return [r[:-1] for r in out]


HEADER = ["engine (the pins' label)", "engine versions (the pin's range)", "`ple_layer.py`", "`runtime_defaults.py`",
          "`vllm/config/vllm.py`", "patch set"]


def table(manifests: list[Path] | None = None) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r) + " |" for r in rows(manifests)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(table())
