"""The README's table of which files each pinned engine version needs is the one the shipped
manifests make (`tools/set_table.py`), and that table follows the manifests it is given."""

from __future__ import annotations

import json

import kit
from ple4patch import manifest as m
from ple4patch.paths import POLICY_REL
from tools import set_table


def test_the_readme_table_is_the_manifests():
    readme = (kit.REPO / "README.md").read_text(encoding="utf-8")
    assert set_table.table() in readme, "README's set table is out of date: run python tools/set_table.py"


def test_every_shipped_pin_has_its_row():
    rows = {r[0]: r for r in set_table.rows()}
    for path in m.shipped_files():
        for pin in m.load_file(path).pins.values():
            row = rows[set_table._engine(pin.label)]
            assert f"sha256 {pin.pristine_sha256[:12]}" in row[2 + set_table.FILES.index(pin.target)]
            assert (pin.engine_versions or set_table.NOT_RECORDED) in row[1]


def test_a_policy_pin_makes_its_commit_a_two_file_set(tmp_path):
    """A pin of runtime_defaults.py labelled with a layer pin's commit moves that row to the
    two-file set; without it the set is not recorded (the table does not guess)."""
    layer = next(p for p in m.shipped_files() if m.load_file(p).targets() != {POLICY_REL})
    label = next(iter(m.load_file(layer).pins.values())).label
    before = {r[0]: r for r in set_table.rows([layer])}[label]
    assert before[3] == "no pin names it" and set_table.NOT_RECORDED in before[5]
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"schema_version": 1, "target": POLICY_REL, "pins": {"ab" * 32: {
        "label": f"{label} (start-up policy)", "engine_versions": "", "size": 1, "patch_id": "nvfp4-rowpacked-2",
        "patched_sha256": "cd" * 32}}}))
    after = {r[0]: r for r in set_table.rows([layer, policy])}[label]
    assert after[3] == "pinned, sha256 " + "ab" * 6 and after[5] == "`ple_layer.py` + `runtime_defaults.py`"
