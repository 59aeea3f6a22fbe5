"""Text and encodings: paths the output encoding cannot represent, a closed or broken stdout,
and targets with a UTF-8 BOM or CRLF line endings (the real transform).

- A venv path with non-UTF-8 bytes, under `PYTHONIOENCODING=utf-8` and `LANG=C`: every
  command works and prints the path's own bytes; `--json` is valid Unicode (a strict decoder
  reads it), each such byte escaped as documented (`\\xHH`) where `escaped_strings` says, and
  read back to the path's bytes.
- stdout closed, a broken pipe, a full disk under stdout: the command's own exit code (the
  write happened), no traceback.
- BOM / CRLF variants of the stand-in, all pinned at once: apply -> verify -> revert
  round-trips byte-exact, and the patched output is attributed to its own pristine file.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

import kit
from kit.fakepatch import PRISTINE_A, fake_patch
from kit.pins import pin_for
from ple4patch import json_text
from ple4patch import manifest as m
from ple4patch.errors import EXIT_OK

PATCHED_A = fake_patch(PRISTINE_A.decode()).encode()


def _bytes_cmd(*args) -> list[bytes]:
    return [os.fsencode(a) for a in kit.fake_cmd(*args)]


@pytest.fixture
def odd_venv(htpl, hroot):
    dest = os.path.join(os.fsencode(hroot), b"v\xff\xfe-\xe9")
    shutil.copytree(htpl, os.fsdecode(dest), symlinks=True)
    return dest


@pytest.mark.parametrize("env_extra", [dict(PYTHONIOENCODING="utf-8", LANG="C", LC_ALL="C"),
                                       dict(LANG="C", LC_ALL="C", PYTHONIOENCODING="ascii")],
                         ids=["utf8-io", "ascii-io"])
def test_non_utf8_venv_path(odd_venv, hman, env_extra):
    env = kit.env_with([hman], **env_extra)
    for command in ("status", "apply", "verify", "status", "revert"):
        proc = subprocess.run(_bytes_cmd(command, "X")[:-1] + [odd_venv], capture_output=True, env=env, timeout=60)
        assert proc.returncode == EXIT_OK, (command, proc.stdout, proc.stderr)
        assert b"Traceback" not in proc.stderr
        if env_extra["PYTHONIOENCODING"] == "utf-8" and command != "revert":
            assert odd_venv in proc.stdout, proc.stdout  # the path's own bytes


def _strict_json(stdout: bytes) -> dict:
    """The JSON object as a strict reader sees it: UTF-8, no lone surrogate in any string."""
    text = stdout.decode("utf-8")  # strict
    data = json.loads(text)
    json.dumps(data, ensure_ascii=False).encode("utf-8")  # strict: a lone surrogate raises
    return kit.validate(data)


def _at(data, pointer: str):
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        data = data[int(token)] if isinstance(data, list) else data[token]
    return data


@pytest.mark.parametrize("dirty", [False, True], ids=["pristine", "patched"])
def test_non_utf8_venv_path_in_json(odd_venv, hman, hroot, dirty):
    """Every command's --json with a venv whose path is not UTF-8 (its bytes b"\\xff\\xfe" and
    a backslash of its own): valid Unicode, the escaped strings listed, each read back exactly;
    a checkpoint under such a directory likewise (inspect, alone and with the venv)."""
    import ckpt_factory

    env = kit.env_with([hman], PYTHONIOENCODING="utf-8", LANG="C", LC_ALL="C")
    odd = odd_venv + b"\\x"  # a backslash of the path's own: escaped too, never ambiguous
    os.rename(odd_venv, odd)
    ckpt = os.path.join(os.fsencode(hroot), b"ck\xff")
    ckpt_factory.make(Path(os.fsdecode(ckpt)))

    def run(*args) -> tuple[int, dict]:
        cmd = [os.fsencode(a) if isinstance(a, str) else a for a in kit.fake_cmd()] + list(args) + [b"--json"]
        proc = subprocess.run(cmd, capture_output=True, env=env, timeout=60)
        assert b"Traceback" not in proc.stderr, proc.stderr
        data = _strict_json(proc.stdout)
        assert data["exit_code"] == proc.returncode
        return proc.returncode, data

    runs = [(b"status", odd), (b"apply", b"--dry-run", odd), (b"apply", odd), (b"verify", odd), (b"apply", odd),
            (b"status", odd), (b"revert", odd), (b"verify", odd), (b"inspect", ckpt), (b"inspect", ckpt, odd)]
    if dirty:  # a refusal: the error envelope too
        kit.target_of(Path(os.fsdecode(odd))).write_bytes(PRISTINE_A + b"# edited\n")
    for args in runs:
        rc, data = run(*args)
        escaped = data.get("escaped_strings")
        assert escaped, (args, data)
        if rc != EXIT_OK and args[0] != b"inspect":  # a refusal names the file
            assert {"/message", "/error/message"} <= set(escaped), (args, escaped)
        for pointer in escaped:
            value = _at(data, pointer)
            assert "\\x" in value and not json_text.needs_escape(value), (args, pointer, value)
            back = os.fsencode(json_text.unescape(value))
            assert odd in back or ckpt in back, (args, pointer, back)
        if args[0] != b"inspect" and "engine" in data:
            assert "/engine/venv" in escaped and os.fsencode(json_text.unescape(data["engine"]["venv"])) == odd


@pytest.mark.parametrize("redirect", [">&-", "| true", ">/dev/full", ">&- 2>&-"],
                         ids=["closed", "broken-pipe", "full", "both-closed"])
def test_output_gone_keeps_the_exit_code(redirect, hvenv, hman, hroot):
    env = kit.env_with([hman])
    rc = hroot / "rc"

    def run(*args) -> tuple[str, str]:
        cmd = " ".join(shlex.quote(str(c)) for c in kit.fake_cmd(*args))
        proc = subprocess.run(["bash", "-c", f"{cmd} {redirect}; echo ${{PIPESTATUS[0]}} > {rc}"],
                              capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
        assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
        return rc.read_text().strip(), proc.stderr

    assert run("apply", hvenv, "--json")[0] == "0"
    assert kit.target_of(hvenv).read_bytes() == PATCHED_A  # the write happened
    assert run("status", hvenv)[0] == "0"
    kit.target_of(hvenv).write_bytes(PRISTINE_A + b"# edited\n")
    assert run("apply", hvenv)[0] == "5"  # a refusal keeps its own code too


# -- BOM and CRLF (the real transform) --------------------------------------------------


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    from ple4patch.transform import patch_source

    lf = kit.standin_bytes()
    out = {"lf": lf, "crlf": lf.replace(b"\n", b"\r\n"), "bom": b"\xef\xbb\xbf" + lf,
           "bom-crlf": b"\xef\xbb\xbf" + lf.replace(b"\n", b"\r\n")}
    man = m.Manifest(sources=["text-tests"])
    for name, data in out.items():
        man.add(pin_for(data, patch_source, label=f"stand-in {name}", source="text-tests"))
    path = tmp_path_factory.mktemp("text") / "variants.json"
    path.write_text(man.dumps())
    return out, path, man


@pytest.fixture(scope="module")
def standin_tpl_text(wheelhouse, tmp_path_factory):
    return kit.template(tmp_path_factory.getbasetemp(), wheelhouse, "crash-standin",
                        wheelhouse.engine(kit.standin_bytes(), version="1.5.1"))


@pytest.mark.parametrize("name", ["crlf", "bom", "bom-crlf"])
def test_bom_and_crlf_round_trip_byte_exact(name, variants, standin_tpl_text, tmp_path):
    data, man_path, man = variants
    outputs = {man.by_pristine(kit.sha256_hex(d)).patched_sha256 for d in data.values()}
    assert len(outputs) == len(data), "two pristine files would share one patched output"
    venv = kit.clone(standin_tpl_text, tmp_path / "venv")
    target = kit.target_of(venv)
    target.write_bytes(data[name])
    env = kit.env_with([man_path])
    proc = kit.run_real("apply", venv, env=env)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert f"stand-in {name})" in proc.stdout or f"stand-in {name};" in proc.stdout, proc.stdout
    d = kit.json_of(kit.run_real("status", venv, "--json", env=env))
    assert d["state"] == "patched" and d["pin"]["label"] == f"stand-in {name}"
    assert d["pin"]["pristine_sha256"] == kit.sha256_hex(data[name]) == d["hashes"]["backup"]
    assert kit.run_real("verify", venv, env=env).returncode == EXIT_OK
    kit.assert_imports_current_source(venv)
    proc = kit.run_real("revert", venv, env=env)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert target.read_bytes() == data[name]


def test_lone_cr_line_endings_are_refused_naming_them(wheelhouse, tmp_path_factory, tmp_path):
    """A file with classic Mac OS line endings (a lone CR ends each line; Python reads it) as its
    wheel shipped it: `apply --allow-unknown` refuses it naming the line endings, nothing written
    (the patch's LF lines would otherwise mix endings, and its sentinel check would be what
    failed). A CRLF file is patched (above)."""
    cr = kit.standin_bytes().replace(b"\n", b"\r")
    tpl = kit.template(tmp_path_factory.getbasetemp(), wheelhouse, "lone-cr",
                       wheelhouse.engine(cr, version="1.5.1"))
    venv = kit.clone(tpl, tmp_path / "venv")
    target = kit.target_of(venv)
    before = sorted(os.listdir(target.parent))
    proc = kit.run_real("apply", "--allow-unknown", venv, env=kit.env_with([]))
    words = " ".join(proc.stderr.split())
    assert proc.returncode != EXIT_OK and "line 1 ends in a lone CR (classic Mac OS line endings)" in words, proc.stderr
    assert "nothing written" in words
    assert target.read_bytes() == cr and sorted(os.listdir(target.parent)) == before


def test_a_latin1_file_is_refused_saying_why(wheelhouse, tmp_path_factory, tmp_path):
    """A file in Latin-1 with its coding declaration (Python imports it) as its wheel shipped it:
    `apply --allow-unknown` refuses it naming the encoding rule, exit 5, nothing written."""
    latin = b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + kit.standin_bytes()
    tpl = kit.template(tmp_path_factory.getbasetemp(), wheelhouse, "latin1",
                       wheelhouse.engine(latin, version="1.5.1"))
    venv = kit.clone(tpl, tmp_path / "venv")
    target = kit.target_of(venv)
    before = sorted(os.listdir(target.parent))
    proc = kit.run_real("apply", "--allow-unknown", venv, env=kit.env_with([]))
    words = " ".join(proc.stderr.split())
    assert proc.returncode == 5 and "is not UTF-8 text" in words, proc.stderr
    assert "ple4patch patches UTF-8 sources only" in words and "nothing written" in words
    assert target.read_bytes() == latin and sorted(os.listdir(target.parent)) == before
