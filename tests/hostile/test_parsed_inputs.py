"""Every input ple4patch parses in a venv x what can be wrong with it: the documented outcome.

Inputs: RECORD, METADATA, direct_url.json, the local pins, an extra manifest, pyvenv.cfg, a
pyc's header. Faults: empty, truncated, non-UTF-8, wrong types, deep nesting (or an oversized
field), absurd numbers. `apply` (fake transform, the file pinned) gives the exit code in
`EXPECTED`, never 1, within the time bound; `status` never gives 1 either, and an unusable
local pins file counts as none (a note says why).
"""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

import kit
from kit.fakepatch import PRISTINE_A, fake_manifest
from ple4patch.errors import EXIT_ENGINE_NOT_FOUND as E3
from ple4patch.errors import EXIT_OK as OK
from ple4patch.errors import EXIT_USAGE as E2
from ple4patch.paths import LOCAL_PINS_NAME

FAULTS = ("empty", "truncated", "non_utf8", "wrong_types", "deep_nesting", "absurd_numbers")

EXPECTED = {
    "record": {"empty": OK, "truncated": OK, "non_utf8": E3, "wrong_types": OK, "deep_nesting": E3,
               "absurd_numbers": OK},
    "metadata": {f: OK for f in FAULTS},
    "direct_url": {f: OK for f in FAULTS},
    "local_pins": {f: OK for f in FAULTS},
    "extra_manifest": {f: E2 for f in FAULTS},
    "pyvenv_cfg": {f: OK for f in FAULTS},
    "pyc": {f: OK for f in FAULTS},
}

DEEP = b"[" * 100_000 + b"]" * 100_000


def _manifest_faults(valid: bytes) -> dict[str, bytes]:
    d = json.loads(valid)
    sha = next(iter(d["pins"]))
    wrong = json.loads(valid)
    wrong["pins"][sha]["engine_versions"] = ["1.5"]
    wrong["pins"][sha]["older"] = [1, 2]
    absurd = json.loads(valid)
    absurd["pins"][sha]["size"] = 10 ** 40
    absurd["schema_version"] = 1e308
    return {
        "empty": b"", "truncated": valid[: len(valid) // 2], "non_utf8": valid.replace(b'"label"', b'"l\xffabel"'),
        "wrong_types": json.dumps(wrong).encode(), "deep_nesting": b'{"pins": ' + DEEP + b"}",
        "absurd_numbers": json.dumps(absurd).encode(),
    }


def faulty(role: str, fault: str, valid: bytes) -> bytes:
    if role in ("local_pins", "extra_manifest", "direct_url"):
        if role == "direct_url":
            valid = b'{"url": "file:///w/x.whl", "archive_info": {"hashes": {"sha256": "ab"}}}'
            return {"empty": b"", "truncated": valid[:20], "non_utf8": valid.replace(b"url", b"u\xffrl"),
                    "wrong_types": b'{"url": 5, "dir_info": "editable"}', "deep_nesting": DEEP,
                    "absurd_numbers": b'{"url": 1e999999, "dir_info": {"editable": 9' + b"9" * 5000 + b"}}"}[fault]
        return _manifest_faults(valid)[fault]
    if role == "record":
        row = next(line for line in valid.splitlines(keepends=True) if b"ple_layer.py" in line)
        return {"empty": b"", "truncated": valid[: valid.index(row) + len(row) // 2],
                "non_utf8": valid + b"vllm/\xff\xfe.py,,\n",
                "wrong_types": valid.replace(row, row.split(b",")[0] + b",md5=zz,abc,extra,columns\n"),
                "deep_nesting": valid + b'"' + b"x" * 200_000 + b'",,\n',
                "absurd_numbers": valid.replace(row, row.rsplit(b",", 1)[0] + b"," + b"9" * 5000 + b"\n")}[fault]
    if role == "metadata":
        return {"empty": b"", "truncated": valid[:9], "non_utf8": b"Metadata-Version: 2.1\nName: 1cat\xff\nVersion: 1.5.0\n",
                "wrong_types": b"Version: [1, 2]\n", "deep_nesting": b"Version: " + b"(" * 100_000 + b"\n",
                "absurd_numbers": b"Version: " + b"9" * 100_000 + b"\n"}[fault]
    if role == "pyvenv_cfg":
        return {"empty": b"", "truncated": b"home = /us", "non_utf8": b"version = 3.\xff\n",
                "wrong_types": b"version = [3, 11]\n", "deep_nesting": b"version = " + b"[" * 100_000 + b"\n",
                "absurd_numbers": b"version = 3." + b"9" * 5000 + b"\n"}[fault]
    if role == "pyc":
        return {"empty": b"", "truncated": valid[:7], "non_utf8": b"\xff" * 64,
                "wrong_types": valid[:4] + (3).to_bytes(4, "little") + b"notahash" + valid[16:],
                "deep_nesting": valid[:16] + b"(" * 100_000,
                "absurd_numbers": valid[:4] + (2 ** 32 - 1).to_bytes(4, "little") + b"\xff" * 8}[fault]
    raise AssertionError(role)


def _path(role, venv, root):
    site = kit.site_packages(venv)
    (dist,) = site.glob("1cat_vllm-*.dist-info")
    return {"record": dist / "RECORD", "metadata": dist / "METADATA", "direct_url": dist / "direct_url.json",
            "local_pins": site / LOCAL_PINS_NAME, "extra_manifest": root / "extra.json",
            "pyvenv_cfg": venv / "pyvenv.cfg",
            "pyc": __import__("pathlib").Path(importlib.util.cache_from_source(str(kit.target_of(venv))))}[role]


CASES = [(r, f) for r in EXPECTED for f in FAULTS]


@pytest.mark.parametrize(("role", "fault"), CASES, ids=[f"{r}-{f}" for r, f in CASES])
def test_parsed_input(role, fault, hvenv, hroot, hman, cli_in):
    path = _path(role, hvenv, hroot)
    if role == "extra_manifest":
        valid = hman.read_bytes()
    elif role == "local_pins":
        valid = fake_manifest(b"another file\n").dumps().encode()
    elif role == "pyc":
        path.parent.mkdir(exist_ok=True)
        valid = kit.compile_unchecked(kit.target_of(hvenv)).read_bytes()
    else:
        valid = path.read_bytes() if path.exists() else b""
    path.write_bytes(faulty(role, fault, valid))
    manifests = [path] if role == "extra_manifest" else None
    code, out, err = cli_in("status", hvenv, manifests=manifests)
    assert code != 1, (out, err)
    if role == "local_pins":
        assert "local pins are unusable and count as none" in out, out
    code, out, err = cli_in("apply", hvenv, manifests=manifests)
    assert code == EXPECTED[role][fault], (code, out, err)
    if code != OK:
        err = kit.one_message(err, "ple4patch apply: error: ")
        assert any(n in err for n in kit.names_of(path, hvenv)), err
    else:
        assert kit.target_of(hvenv).read_bytes() != PRISTINE_A
    if role == "local_pins":
        assert path.read_bytes() == faulty(role, fault, valid), "an unusable pins file was written over"


def test_unusable_local_pins_are_never_written_over(hvenv, hroot, cli_in):
    """`apply --allow-unknown` must record a pin, but the file there is not a usable pins file:
    refused (exit 5), nothing written; moving it away, as the message says, lets it through."""
    pins = kit.site_packages(hvenv) / LOCAL_PINS_NAME
    pins.write_bytes(b'{"schema_version": 1, "pins": []}')
    before = kit.tree_hash(hvenv)
    code, out, err = cli_in("apply", "--allow-unknown", hvenv, manifests=[])
    assert code == 5 and kit.mentions(err, pins, hvenv) and "move it away" in kit.one_message(err), err
    assert kit.tree_hash(hvenv) == before
    shutil.move(str(pins), hroot / "mine.json")
    assert cli_in("apply", "--allow-unknown", hvenv, manifests=[])[0] == OK
    assert cli_in("verify", hvenv, manifests=[])[0] == OK
