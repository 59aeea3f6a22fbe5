"""A package or an extension module of the target's name beside it: Python imports that instead.

`shadow.shadowing` is checked against Python's own path finder (`importlib.machinery.FileFinder`
with the standard loaders) on the same directories; then status notes it, verify fails and apply
refuses (writing nothing), for the layer alone and for each file of a set.
"""

from __future__ import annotations

import importlib.machinery
import sys

import pytest

import kit
from kit.fakepatch import PRISTINE_A, fake_manifest, fake_patch
from ple4patch import commands, shadow
from ple4patch.errors import ModifiedFile, VerifyFailed
from ple4patch.paths import POLICY_REL, TARGET_REL

MAN = fake_manifest(PRISTINE_A)
EXT = importlib.machinery.EXTENSION_SUFFIXES


def layouts() -> dict[str, list[str]]:
    """Beside ple_layer.py: name -> the paths (relative to the directory) to create there."""
    out = {f"extension{s}": [f"ple_layer{s}"] for s in EXT}
    out["package"] = ["ple_layer/__init__.py"]
    out["package-sourceless"] = ["ple_layer/__init__.pyc"]
    out["namespace-dir"] = ["ple_layer/helpers.py"]  # no __init__: a namespace portion, the module wins
    out["sourceless-pyc"] = ["ple_layer.pyc"]  # after .py in the finder's order
    out["other-name"] = ["ple_layer_extra" + EXT[0]]
    out["nothing"] = []
    return out


def finder_origin(directory) -> str:
    """What Python's own path finder imports for `ple_layer` in `directory`."""
    loaders = [(importlib.machinery.ExtensionFileLoader, EXT),
               (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES),
               (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES)]
    spec = importlib.machinery.FileFinder(str(directory), *loaders).find_spec("ple_layer")
    return spec.origin


@pytest.mark.parametrize("layout", list(layouts()))
def test_shadowing_agrees_with_the_path_finder(layout, tmp_path):
    d = tmp_path / "nvidia"
    d.mkdir()
    target = d / "ple_layer.py"
    target.write_text("X = 1\n")
    for rel in layouts()[layout]:
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(b"")
    found = shadow.shadowing(target)
    imported = finder_origin(d)
    assert (imported != str(target)) is bool(found), (imported, found)
    if found:
        assert str(found[0]) in (imported, imported.removesuffix("/__init__.py"),
                                 imported.removesuffix("/__init__.pyc"))


def test_suffixes_follow_the_venv_python_version(tmp_path):
    site = tmp_path / "lib" / "python3.99" / "site-packages"
    theirs = shadow.extension_suffixes(site)
    ours = sys.implementation.cache_tag
    assert len(theirs) == len(EXT)
    assert all(ours not in s for s in theirs)
    assert [s.replace(f"{sys.implementation.name}-399", ours) for s in theirs] == EXT
    assert shadow.extension_suffixes(tmp_path / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
                                     / "site-packages") == EXT


@pytest.fixture
def venv_a(wheelhouse, engine_venv):
    return engine_venv(wheelhouse.engine(PRISTINE_A, version="1.5.0"))


def make_shadow(target, kind: str):
    if kind == "package":
        (target.parent / "ple_layer").mkdir()
        p = target.parent / "ple_layer" / "__init__.py"
        p.write_bytes(b"")
        return target.parent / "ple_layer"
    p = target.with_name(target.stem + shadow.extension_suffixes(target.parents[4])[0])
    p.write_bytes(b"\x7fELF")
    return p


@pytest.mark.parametrize("kind", ["extension", "package"])
def test_status_notes_verify_fails_apply_refuses(kind, venv_a):
    target = kit.target_of(venv_a)
    assert commands.apply.run(venv_a, manifest=MAN, patch_source=fake_patch).data["changed"]
    assert commands.verify.run(venv_a, manifest=MAN).exit_code == 0
    p = make_shadow(target, kind)
    r = commands.status.run(venv_a, manifest=MAN)
    assert any(str(p) in n and "Python imports it instead" in n for n in r.data["notes"]), r.data["notes"]
    assert "move it away" in r.message and "ple4patch verify" not in r.message.split("next:")[-1]
    with pytest.raises(VerifyFailed, match="Python imports it instead"):
        commands.verify.run(venv_a, manifest=MAN)
    commands.revert.run(venv_a, manifest=MAN)  # restoring the pristine file is harmless
    before = kit.tree_hash(venv_a)
    for dry_run in (True, False):
        with pytest.raises(ModifiedFile, match="RECORD does not list it .*move it away.*nothing written"):
            commands.apply.run(venv_a, manifest=MAN, patch_source=fake_patch, dry_run=dry_run)
    assert kit.tree_hash(venv_a) == before


@pytest.fixture(scope="session")
def set_pins(tmp_path_factory):
    return kit.standin_set_manifests(tmp_path_factory.getbasetemp())


def test_a_shadowed_policy_file_refuses_the_set(wheelhouse, engine_venv, set_pins):
    from ple4patch import manifest as m

    venv = engine_venv(wheelhouse.engine_set(kit.standin_bytes(), kit.standin_policy_bytes()))
    site = kit.site_packages(venv)
    policy = site / POLICY_REL
    p = policy.with_name(policy.stem + shadow.extension_suffixes(site)[0])
    p.write_bytes(b"\x7fELF")
    before = kit.tree_hash(venv)
    with pytest.raises(ModifiedFile, match="runtime_defaults"):
        commands.apply.run(venv, manifest=m.load(set_pins[0], use_env=False))
    assert kit.tree_hash(venv) == before
    r = commands.status.run(venv, manifest=m.load(set_pins[0], use_env=False))
    assert [any(str(p) in n for n in f["notes"]) for f in r.data["files"]] == [False, True]
    assert r.data["files"][0]["path"] == TARGET_REL
