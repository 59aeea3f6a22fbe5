"""The README's `apply --dry-run --stat` example is this build's output on the real files it names.

1Cat-vLLM main 15a8d185's ple_layer.py (../shared/engines) with main 51c0f972's
runtime_defaults.py (tests/data/engines, or ../shared/engines: not committed), installed together
as 1cat-vllm 1.5.2 from a real wheel; the venv path is shown as /opt/engine. Skips where either
file is absent. A change of the injected code or the transforms changes the counts and hashes:
paste the new output into the README.
"""

from __future__ import annotations

import re
import sys

import pytest

import kit

sys.path.insert(0, str(kit.REPO))
from tools import engine_corpus  # noqa: E402

COMMAND = "$ ple4patch apply --dry-run --stat /opt/engine"


def readme_example() -> str:
    text = (kit.REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(re.escape(COMMAND) + r"\n(.*?)```", text, re.S)
    assert block, f"README.md has no example starting {COMMAND!r}"
    return block.group(1)


def test_the_dry_run_stat_example_is_current(wheelhouse, engine_venv):
    layer = next((r for r in kit.shared_engines() if r.folder == "1cat-vllm-main-15a8d185"), None)
    policy = engine_corpus.stored("main-51c0f972", "runtime_defaults.py")
    if layer is None or not policy.is_file():
        pytest.skip("the real files of the example (15a8d185's layer, 51c0f972's policy) are not here")
    venv = engine_venv(wheelhouse.engine_set(layer.data, policy.read_bytes(), version="1.5.2"))
    proc = kit.run_cli("apply", "--dry-run", "--stat", venv)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.replace(str(venv), "/opt/engine") == readme_example()
