"""Finding the engine in a venv, and every refusal (engines installed by pip from built wheels)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

import kit
from kit.fakepatch import PRISTINE_A, fake_manifest
from ple4patch import commands
from ple4patch.engine import find_engine, record_hash_to_hex
from ple4patch.errors import EXIT_ENGINE_NOT_FOUND, EngineNotFound


def refusal(venv) -> EngineNotFound:
    with pytest.raises(EngineNotFound) as info:
        find_engine(venv)
    msg = str(info.value)
    assert "\n" not in msg and len(msg) > 20
    return info.value


def test_finds_engine_version_and_record_hash(wheelhouse, engine_venv):
    venv = engine_venv(wheelhouse.engine(PRISTINE_A, version="1.5.1.dev945+gfe67339dd"))
    eng = find_engine(venv)
    assert eng.version == "1.5.1.dev945+gfe67339dd"
    assert str(eng.parsed_version) == "1.5.1.dev945+gfe67339dd"
    assert eng.dist_info.name == "1cat_vllm-1.5.1.dev945+gfe67339dd.dist-info"
    assert eng.target == kit.target_of(venv)
    assert eng.record_sha256 == kit.sha256_hex(PRISTINE_A)
    assert eng.record_size == len(PRISTINE_A)


def test_record_hash_format():
    # RECORD: urlsafe base64 without padding
    assert record_hash_to_hex("sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU") == kit.sha256_hex(b"")
    assert record_hash_to_hex("md5=abc") is None
    assert record_hash_to_hex("sha256=!!") is None


def test_default_venv_is_virtual_env_then_prefix(wheelhouse, engine_venv, monkeypatch):
    venv = engine_venv(wheelhouse.engine(PRISTINE_A))
    monkeypatch.setenv("VIRTUAL_ENV", str(venv))
    assert find_engine().venv == venv
    monkeypatch.delenv("VIRTUAL_ENV")
    import sys

    # the test interpreter's prefix has no 1cat-vllm
    assert str(sys.prefix) in str(refusal(None))


def test_a_venv_without_an_engine_says_how_it_was_chosen_and_what_to_pass(wheelhouse, engine_venv, new_venv,
                                                                         tmp_path, monkeypatch):
    bare = new_venv("bare")
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    given = str(refusal(bare))
    assert "pass the engine's venv" in given and "`ple4patch status /path/to/engine-venv`" in given
    assert "activate" not in given  # it was given: activating another venv would not change that
    with pytest.raises(EngineNotFound) as info:
        find_engine(bare, command="apply")
    assert "`ple4patch apply /path/to/engine-venv`" in str(info.value)
    import sys

    own = str(refusal(None))  # nothing given, nothing active: the prefix of the Python running ple4patch
    assert f"not installed in {sys.prefix} (no VENV given and no venv active" in own
    assert "activate it (`. /path/to/engine-venv/bin/activate` sets $VIRTUAL_ENV" in own
    monkeypatch.setenv("VIRTUAL_ENV", str(bare))
    active = str(refusal(None))
    assert f"not installed in {bare} (the active venv, $VIRTUAL_ENV;" in active and "activate it" in active
    missing = tmp_path / "gone"
    monkeypatch.setenv("VIRTUAL_ENV", str(missing))
    gone = str(refusal(None))
    assert gone.startswith(f"no such venv: {missing} ($VIRTUAL_ENV) is not a directory; pass the engine's venv")
    # the advice holds: activating the engine's venv, as a shell does, makes ple4patch find it
    venv = engine_venv(wheelhouse.engine(PRISTINE_A), name="engine")
    env = {**kit.cli_env(), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(["bash", "-c", f'. "{venv}/bin/activate" && exec "{sys.executable}" -m ple4patch status --json'],
                          capture_output=True, text=True, env=env, cwd=kit.REPO)
    assert json.loads(proc.stdout)["engine"]["venv"] == str(venv), proc.stderr


def test_no_such_venv_says_what_to_pass(tmp_path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    msg = str(refusal(tmp_path / "nonexistent"))
    assert msg == (f"no such venv: {tmp_path / 'nonexistent'} is not a directory; pass the engine's venv, the "
                   f"directory holding the bin/python that `vllm serve` runs from "
                   f"(`ple4patch status /path/to/engine-venv`)")


def test_pinned_hash_recognised_whatever_the_version(wheelhouse, engine_venv):
    venv = engine_venv(wheelhouse.engine(PRISTINE_A, version="2.0.0"))
    r = commands.status.run(venv, manifest=fake_manifest(PRISTINE_A))
    assert r.data["state"] == "pristine"
    assert any("outside the pin's range" in n for n in r.data["notes"])


def test_no_such_venv(tmp_path):
    assert refusal(tmp_path / "nope").reason == "no_venv"


def test_not_a_venv(tmp_path):
    assert refusal(tmp_path).reason == "no_site_packages"


def test_a_path_inside_a_venv_names_the_venv_root(wheelhouse, engine_venv):
    """`VENV/bin/python` or `VENV/lib/python3.X/site-packages` given for VENV: refused as before
    (exit 3), the message naming VENV and the command to run with it."""
    venv = engine_venv(wheelhouse.engine(PRISTINE_A), name="my engine")
    for inside, reason in [(venv / "bin" / "python", "no_venv"), (kit.site_packages(venv), "no_site_packages"),
                           (venv / "lib", "no_site_packages")]:
        err = refusal(inside)
        assert err.reason == reason and err.exit_code == EXIT_ENGINE_NOT_FOUND
        assert f"did you mean {venv}?" in str(err) and f"`ple4patch status '{venv}'`" in str(err), str(err)
    assert "did you mean" not in str(refusal(venv.parent / "nope"))
    assert f"{venv / 'bin' / 'python'} is a file in the venv {venv}, not a venv" in str(refusal(venv / "bin" / "python"))
    typo = refusal(venv / "bin" / "typo")  # not there: said so, the venv still named
    assert f"{venv / 'bin' / 'typo'} does not exist; it would lie in the venv {venv}" in str(typo), str(typo)
    assert f"did you mean {venv}?" in str(typo)
    deep = refusal(kit.target_of(venv))  # the engine's file itself, eight levels down
    assert f"is a file in the venv {venv}" in str(deep) and f"did you mean {venv}?" in str(deep), str(deep)


def test_engine_not_installed(new_venv):
    err = refusal(new_venv())
    assert err.reason == "not_installed"
    assert "1cat-vllm is not installed" in str(err)


def test_upstream_vllm(wheelhouse, engine_venv):
    venv = engine_venv(wheelhouse.engine(PRISTINE_A, name="vllm", version="0.11.0"))
    err = refusal(venv)
    assert err.reason == "upstream_vllm" and "upstream vllm" in str(err)


def test_both_installed(wheelhouse, engine_venv):
    venv = engine_venv(
        wheelhouse.engine(PRISTINE_A), wheelhouse.wheel({"vllm/other.py": b"Y = 1\n"}, name="vllm", version="0.11.0")
    )
    assert refusal(venv).reason == "both_installed"


def test_editable_pep660_pth_finder(wheelhouse, engine_venv):
    venv = engine_venv(wheelhouse.editable(PRISTINE_A))
    site = kit.site_packages(venv)
    assert list(site.glob("__editable__*1cat_vllm*"))
    err = refusal(venv)
    assert err.reason == "editable"


def test_editable_pth_only_without_dist_info(wheelhouse, engine_venv):
    venv = engine_venv(wheelhouse.editable(PRISTINE_A))
    site = kit.site_packages(venv)
    for d in site.glob("1cat_vllm-*.dist-info"):
        shutil.rmtree(d)
    assert refusal(venv).reason == "editable"


def test_editable_direct_url(wheelhouse, engine_venv):
    venv = engine_venv(wheelhouse.engine(PRISTINE_A))
    (dist,) = kit.site_packages(venv).glob("1cat_vllm-*.dist-info")
    # what pip writes for `pip install -e /src/1Cat-vLLM`
    (dist / "direct_url.json").write_text(json.dumps({"url": "file:///src/1Cat-vLLM", "dir_info": {"editable": True}}))
    err = refusal(venv)
    assert err.reason == "editable" and "editable" in str(err)


def test_target_not_in_this_engine(wheelhouse, engine_venv):
    venv = engine_venv(wheelhouse.wheel({"vllm/models/other.py": b"Z = 0\n"}))
    eng = find_engine(venv)
    with pytest.raises(EngineNotFound) as info:
        eng.require_target()
    assert info.value.reason == "target_missing" and "does not list it" in str(info.value)


def test_target_deleted(wheelhouse, engine_venv):
    venv = engine_venv(wheelhouse.engine(PRISTINE_A))
    kit.target_of(venv).unlink()
    r = commands.status.run(venv, manifest=fake_manifest(PRISTINE_A))
    assert r.exit_code == EXIT_ENGINE_NOT_FOUND
    assert r.data["state"] == "missing" and r.data["reason"] == "target_missing"
    with pytest.raises(EngineNotFound, match="reinstall"):
        commands.apply.run(venv, manifest=fake_manifest(PRISTINE_A))


def test_ambiguous_site_packages(wheelhouse, engine_venv):
    venv = engine_venv(wheelhouse.engine(PRISTINE_A))
    site = kit.site_packages(venv)
    other = venv / "lib" / "python3.99" / "site-packages"
    other.parent.mkdir()
    shutil.copytree(site, other)
    (venv / "pyvenv.cfg").unlink()  # with it, its version decides (tests/hostile/test_venv_resolution.py)
    err = refusal(venv)
    assert err.reason == "ambiguous_site_packages"
    assert "python3.99" in str(err)


def test_second_empty_site_packages_is_not_ambiguous(wheelhouse, engine_venv):
    venv = engine_venv(wheelhouse.engine(PRISTINE_A))
    (venv / "lib" / "python3.99" / "site-packages").mkdir(parents=True)
    assert find_engine(venv).version == "1.5.1"


def reinstall(venv, wheel) -> None:
    """What the advice's `pip install --force-reinstall --no-deps` does (from the local wheel)."""
    subprocess.run([kit.PY, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--force-reinstall", "--no-deps", "--no-index", str(wheel)], check=True)


def follow_the_advice(venv, wheel, message: str) -> None:
    import re
    import shlex

    removes = re.findall(r"`rm -r ([^`]+)`", message)
    assert removes, message
    for arg in removes:
        for path in shlex.split(arg):
            shutil.rmtree(path)
    reinstall(venv, wheel)


@pytest.mark.parametrize("how", ["copied", "left-by-an-upgrade"])
def test_two_dist_infos_name_the_stale_one(how, wheelhouse, engine_venv, tmp_path):
    """pip sees one of the dist-infos: a `--force-reinstall` (the old advice) leaves the other, so
    the message names the stale one (its RECORD does not fit the files) and says to remove it."""
    from kit.fakepatch import PRISTINE_B

    site_of = kit.site_packages
    if how == "copied":
        wheel = wheelhouse.engine(PRISTINE_A)
        venv = engine_venv(wheel)
        (dist,) = site_of(venv).glob("1cat_vllm-*.dist-info")
        stale = dist.with_name("1cat_vllm-1.5.0.dist-info")
        shutil.copytree(dist, stale)
    else:  # 1.5.0 was installed, then 1.5.1 over it, and the old dist-info came back (an image layer)
        venv = engine_venv(wheelhouse.engine(PRISTINE_A, version="1.5.0"))
        (old,) = site_of(venv).glob("1cat_vllm-*.dist-info")
        shutil.copytree(old, tmp_path / old.name)
        wheel = wheelhouse.engine(PRISTINE_B + b"# 1.5.1 is longer\n", version="1.5.1")
        kit.install(venv, wheel)
        stale = old
        shutil.copytree(tmp_path / old.name, stale)
    err = refusal(venv)
    assert err.reason == "several_dist_infos"
    msg = str(err)
    assert f"{stale.name} is stale" in msg and f"`rm -r {stale}`" in msg and "1cat-vllm==1.5.1" in msg, msg
    reinstall(venv, wheel)  # the old advice alone: pip leaves the stale dist-info
    assert stale.exists() and refusal(venv).reason == "several_dist_infos"
    follow_the_advice(venv, wheel, msg)
    assert find_engine(venv).version == "1.5.1"


def test_two_dist_infos_that_fit_alike_leave_the_choice(wheelhouse, engine_venv):
    venv = engine_venv(wheelhouse.engine(PRISTINE_A))
    (dist,) = kit.site_packages(venv).glob("1cat_vllm-*.dist-info")
    twin = dist.with_name("1Cat_vLLM-1.5.1.dist-info")  # by letter case; its RECORD names its own files
    shutil.copytree(dist, twin)
    record = twin / "RECORD"
    record.write_text(record.read_text().replace(dist.name, twin.name))
    msg = str(refusal(venv))
    assert "cannot be told" in msg and f"`rm -r {dist}`" in msg and f"`rm -r {twin}`" in msg, msg


def test_unreadable_record(wheelhouse, engine_venv):
    venv = engine_venv(wheelhouse.engine(PRISTINE_A))
    (dist,) = kit.site_packages(venv).glob("1cat_vllm-*.dist-info")
    (dist / "RECORD").unlink()
    assert refusal(venv).reason == "bad_record"
