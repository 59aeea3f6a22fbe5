"""Property-based tests (hypothesis) of the venv-side parsers: RECORD, METADATA, direct_url.json,
local pins, extra manifests, pyc headers.

Random bytes and mutations of valid files never raise anything but the documented error
(exit 2 for an extra manifest, exit 3 `bad_record` for RECORD; an unusable local pins file
counts as none), stay within a time bound, and never open a file outside the venv and the
manifest named (an audit hook records every open). Bounded example counts keep CI fast.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kit
from kit.fakepatch import PRISTINE_A, fake_manifest
from ple4patch import bytecode, engine, manifest
from ple4patch.errors import EngineNotFound, UsageError
from ple4patch.paths import LOCAL_PINS_NAME

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
BOUND_S = 2.0

_opened: list[str] | None = None


def _audit(event, args):
    if _opened is not None and event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        _opened.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


class Watch:
    """Time and opens of one call: `with Watch(allowed) as w: ...`."""

    def __init__(self, *allowed: Path):
        self.allowed = [os.path.realpath(a) for a in allowed]

    def __enter__(self):
        global _opened
        _opened = []
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc):
        global _opened
        opened, _opened = _opened, None
        assert time.monotonic() - self.t0 < BOUND_S, "took too long"
        for p in opened:
            real = os.path.realpath(p)
            assert any(real == a or real.startswith(a + os.sep) for a in self.allowed), f"opened {p}"
        return False


@pytest.fixture(scope="module")
def fvenv(wheelhouse, tmp_path_factory):
    tpl = kit.template(tmp_path_factory.getbasetemp(), wheelhouse, "hostile-a",
                       wheelhouse.engine(PRISTINE_A, version="1.5.0"))
    return kit.clone(tpl, tmp_path_factory.mktemp("fuzz") / "venv")


def _dist(venv: Path) -> Path:
    (dist,) = kit.site_packages(venv).glob("1cat_vllm-*.dist-info")
    return dist


def mutations(valid: bytes):
    """Random bytes, and a valid file with bytes flipped, cut, repeated or spliced in."""
    def mutate(args):
        data, pos, cut, insert, repeat = args
        data = bytearray(valid)
        pos = pos % (len(data) + 1)
        return bytes(data[:pos]) + insert * repeat + bytes(data[pos + cut:])

    return st.one_of(
        st.binary(max_size=4096),
        st.tuples(st.just(b""), st.integers(0, 1 << 16), st.integers(0, 64), st.binary(max_size=64),
                  st.integers(1, 50)).map(mutate),
    )


_RECORD = None


@given(data=st.data())
@FUZZ
def test_record(fvenv, data):
    global _RECORD
    record = _dist(fvenv) / "RECORD"
    if _RECORD is None:
        _RECORD = record.read_bytes()
    record.write_bytes(data.draw(mutations(_RECORD)))
    with Watch(fvenv):
        try:
            engine.find_engine(fvenv)
        except EngineNotFound as err:
            assert err.reason == "bad_record", err
    record.write_bytes(_RECORD)


@given(blob=st.binary(max_size=4096) | st.text(max_size=2048).map(lambda t: ("Version: " + t).encode()))
@FUZZ
def test_metadata(fvenv, blob):
    meta = _dist(fvenv) / "METADATA"
    meta.write_bytes(blob)
    with Watch(fvenv):
        e = engine.find_engine(fvenv)
    assert isinstance(e.version, str)


def _json_values():
    return st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=70),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=70), inner, max_size=4),
        max_leaves=20,
    )


def _manifest_like():
    """Valid-looking manifests with any value swapped in at any field."""
    valid = fake_manifest(PRISTINE_A).to_json()
    sha = next(iter(valid["pins"]))

    def swap(args):
        field, value = args
        import copy

        d = copy.deepcopy(valid)
        if field in ("schema_version", "target", "pins"):
            d[field] = value
        else:
            d["pins"][sha][field] = value
        return d

    fields = ["schema_version", "target", "pins", "label", "patch_id", "patched_sha256", "engine_versions",
              "size", "older", "note"]
    import json

    return st.tuples(st.sampled_from(fields), _json_values()).map(swap).map(lambda d: json.dumps(d).encode())


@given(blob=st.one_of(_manifest_like(), mutations(fake_manifest(PRISTINE_A).dumps().encode())))
@FUZZ
def test_extra_manifest(tmp_path_factory, blob):
    path = tmp_path_factory.getbasetemp() / "fuzz-extra.json"
    path.write_bytes(blob)
    with Watch(path, Path(manifest.SHIPPED_MANIFESTS_DIR)):
        try:
            manifest.load([path], use_env=False)
        except UsageError:
            pass  # exit 2: the documented refusal of a bad extra manifest


@given(blob=st.one_of(_manifest_like(), mutations(fake_manifest(PRISTINE_A).dumps().encode())))
@FUZZ
def test_local_pins(fvenv, blob):
    pins = kit.site_packages(fvenv) / LOCAL_PINS_NAME
    pins.write_bytes(blob)
    with Watch(fvenv):
        m = manifest.load_local(kit.target_of(fvenv))  # never raises: unusable counts as none
    assert isinstance(m, manifest.Manifest)
    pins.unlink()


@given(blob=st.binary(max_size=64))
@FUZZ
def test_pyc_header(fvenv, blob):
    target = kit.target_of(fvenv)
    pyc = target.parent / "__pycache__" / f"{target.stem}.cpython-311.pyc"
    pyc.parent.mkdir(exist_ok=True)
    pyc.write_bytes(blob)
    with Watch(fvenv):
        stale = bytecode.unchecked_stale_pycache(target)
        assert isinstance(stale, list)
        bytecode.PycHeader.parse(blob)
    pyc.unlink()


@given(blob=mutations(b'{"url": "file:///w/x.whl", "dir_info": {"editable": false}}') | _json_values().map(
    lambda v: __import__("json").dumps(v).encode()))
@FUZZ
def test_direct_url(fvenv, blob):
    path = _dist(fvenv) / "direct_url.json"
    path.write_bytes(blob)
    with Watch(fvenv):
        try:
            engine.find_engine(fvenv)
        except EngineNotFound as err:
            assert err.reason == "editable", err
    path.unlink()


@given(which=st.sampled_from(["RECORD", "METADATA", "pins"]), blob=st.binary(max_size=2048))
@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
def test_cli_never_exits_1(fvenv, cli_in, which, blob):
    """The same random bytes through the real CLI (status and a dry run): never exit 1."""
    path = {"RECORD": _dist(fvenv) / "RECORD", "METADATA": _dist(fvenv) / "METADATA",
            "pins": kit.site_packages(fvenv) / LOCAL_PINS_NAME}[which]
    before = path.read_bytes() if path.exists() else None
    path.write_bytes(blob)
    try:
        for command in (("status",), ("apply", "--dry-run")):
            code, out, err = cli_in(*command, fvenv)
            assert code in (0, 3), (command, code, out, err)
    finally:
        if before is None:
            path.unlink()
        else:
            path.write_bytes(before)
