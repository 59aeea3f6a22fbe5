"""`ple4patch inspect` on hostile checkpoints: what is at a path, and what is in a file.

Index entries that point outside, FIFOs/devices/sockets/directories where a file
belongs, config numbers no real model has, and safetensors headers judged by
the safetensors library itself. Each case runs the real CLI in a subprocess with
a timeout where a hang is what could go wrong.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ckpt_factory as cf
from ckpt_oracle import Opens, library_opens, we_accept
from ple4patch.ckpt import inspect as ckpt_inspect
from ple4patch.ckpt.header import HeaderError, read_safetensors_header
from ple4patch.errors import EXIT_CHECKPOINT, CheckpointProblem, Ple4Error

INDEX = "model.safetensors.index.json"


@pytest.fixture
def meminfo(tmp_path: Path) -> str:
    path = tmp_path / "meminfo"
    path.write_text("MemTotal: 134217728 kB\nMemAvailable: 67108864 kB\n")
    return str(path)


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """`ple4patch inspect ...` in a subprocess: a hang fails the test instead of stalling the suite."""
    code = "from ple4patch.cli import main; main(prog_name='ple4patch')"
    return subprocess.run([sys.executable, "-c", code, "inspect", *args], capture_output=True, text=True,
                          timeout=timeout)


def outcome(root: Path, meminfo: str, **kw):
    """(exit code, report or error) the way the CLI gets them."""
    try:
        result = ckpt_inspect.run(root, meminfo_path=meminfo, progress=False, **kw)
    except Ple4Error as err:
        return err.exit_code, err
    return result.exit_code, result


def problems_of(result) -> list[dict]:
    return result.data["problems"]


def index_of(root: Path) -> dict:
    return json.loads((root / INDEX).read_text())


def write_index(root: Path, index: dict) -> None:
    (root / INDEX).write_text(json.dumps(index))


# -- stay inside: index entries that point outside ---------------------------------------------------


def _point_outside(root: Path, outside: Path, how: str) -> str:
    """Re-point the index entry of one shard file at a copy outside the checkpoint; the entry's name."""
    index = index_of(root)
    victim = sorted(set(index["weight_map"].values()))[0]
    (root / victim).rename(outside / victim)
    if how == "absolute":
        entry = str(outside / victim)
    elif how == "dotdot":
        entry = f"../{outside.name}/{victim}"
    elif how == "dotdot-inside-first":
        (root / "sub").mkdir()
        entry = f"sub/../../{outside.name}/{victim}"
    elif how == "symlink":
        (root / victim).symlink_to(outside / victim)
        entry = victim
    elif how == "symlinked-dir":
        (root / "shards").symlink_to(outside, target_is_directory=True)
        entry = f"shards/{victim}"
    else:
        raise ValueError(how)
    index["weight_map"] = {k: (entry if v == victim else v) for k, v in index["weight_map"].items()}
    write_index(root, index)
    return entry


@pytest.mark.parametrize("how", ["absolute", "dotdot", "dotdot-inside-first", "symlink", "symlinked-dir"])
def test_index_entry_outside_is_a_problem_never_an_open(tmp_path: Path, meminfo, how) -> None:
    root = cf.make(tmp_path / "c", files=3)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    entry = _point_outside(root, outside, how)
    with Opens() as opened:
        code, result = outcome(root, meminfo, scan=True)
    assert code == EXIT_CHECKPOINT
    found = [p for p in problems_of(result) if p["code"] == "outside"]
    assert [p["file"] for p in found] == [entry], problems_of(result)
    assert "inside" in found[0]["message"]
    assert not [p for p in opened if p.startswith(str(outside))], opened
    assert set(opened) <= {os.path.realpath(meminfo)} | {p for p in opened if p.startswith(os.path.realpath(root))}


def test_dotdot_that_stays_inside_is_fine(tmp_path: Path, meminfo) -> None:
    root = cf.make(tmp_path / "c", files=2)
    (root / "sub").mkdir()
    index = index_of(root)
    index["weight_map"] = {k: f"sub/../{v}" for k, v in index["weight_map"].items()}
    write_index(root, index)
    code, result = outcome(root, meminfo, scan=True)
    assert code == 0, problems_of(result)


def test_config_symlinked_outside_is_refused_unread(tmp_path: Path, meminfo) -> None:
    root = cf.make(tmp_path / "c")
    outside = tmp_path / "outside-config.json"
    (root / "config.json").rename(outside)
    (root / "config.json").symlink_to(outside)
    with Opens() as opened:
        code, err = outcome(root, meminfo)
    assert code == EXIT_CHECKPOINT and isinstance(err, CheckpointProblem)
    assert "outside the checkpoint directory" in str(err) and str(root / "config.json") in str(err)
    assert str(outside) not in opened


def test_symlinks_inside_and_the_hugging_face_cache_layout(tmp_path: Path, meminfo) -> None:
    """A symlink to another file inside is fine, and so is the HF cache: snapshots/<rev>/* -> ../../blobs/*."""
    repo = tmp_path / "models--org--name"
    real = cf.make(tmp_path / "download", files=2)
    (repo / "blobs").mkdir(parents=True)
    snap = repo / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    for i, f in enumerate(sorted(real.iterdir())):
        (repo / "blobs" / f"blob{i}").write_bytes(f.read_bytes())
        (snap / f.name).symlink_to(Path("..") / ".." / "blobs" / f"blob{i}")
    code, result = outcome(snap, meminfo, scan=True)
    assert code == 0, problems_of(result)
    # the same files beside a snapshot that is not in an HF cache count as outside
    other = tmp_path / "not-a-cache" / "snapshot"
    other.mkdir(parents=True)
    for f in sorted(snap.iterdir()):
        (other / f.name).symlink_to(repo / "blobs" / Path(os.readlink(f)).name)
    code, err = outcome(other, meminfo)
    assert code == EXIT_CHECKPOINT and "outside" in str(err)


# -- never block: what is at a path ------------------------------------------------------------------


def _make_special(path: Path, kind: str) -> str:
    """Put a FIFO, directory, socket or character device at ``path``; the words inspect uses for it."""
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
        return "a FIFO (named pipe)"
    if kind == "directory":
        path.mkdir()
        return "a directory"
    if kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))  # left bound until the test's process ends: nothing listens
        _make_special.sockets.append(sock)
        return "a socket"
    if kind == "chardev":
        try:
            os.mknod(path, 0o600 | 0o020000, os.makedev(1, 3))  # like /dev/null
        except (PermissionError, OSError) as exc:
            pytest.skip(f"cannot make a device node here: {exc}")
        return "a character device"
    raise ValueError(kind)


_make_special.sockets = []


@pytest.mark.parametrize("kind", ["fifo", "directory", "socket", "chardev"])
@pytest.mark.parametrize("where", ["config.json", INDEX, "shard"])
def test_not_a_regular_file_is_one_line_never_a_hang(tmp_path: Path, kind, where) -> None:
    root = cf.make(tmp_path / "c", files=2)
    name = sorted(set(index_of(root)["weight_map"].values()))[0] if where == "shard" else where
    if len(str(root / name)) > 100 and kind == "socket":
        pytest.skip("AF_UNIX path too long")
    found = _make_special(root / name, kind)
    started = time.monotonic()
    res = run_cli(str(root), "--json", timeout=60)
    assert time.monotonic() - started < 30
    assert res.returncode == EXIT_CHECKPOINT, res.stderr
    data = json.loads(res.stdout)
    if where == "config.json":
        message = data["error"]["message"]
        assert message.startswith(f"{root / name} is {found}, not a regular file"), message
        assert "\n" not in message
    else:
        lines = [p for p in data["problems"] if p["file"] == name and found in p["message"]]
        assert len(lines) == 1, data["problems"]
        assert lines[0]["code"] == ("index" if where == INDEX else "not_a_file")


def test_dangling_symlink_shard_and_config(tmp_path: Path, meminfo) -> None:
    root = cf.make(tmp_path / "c", files=2)
    victim = sorted(set(index_of(root)["weight_map"].values()))[0]
    (root / victim).unlink()
    (root / victim).symlink_to(root / "gone.safetensors")
    code, result = outcome(root, meminfo)
    assert code == EXIT_CHECKPOINT
    missing = [p for p in problems_of(result) if p["code"] == "missing_file"]
    assert missing and "dangling symlink" in missing[0]["message"] and missing[0]["file"] == victim
    (root / "config.json").unlink()
    (root / "config.json").symlink_to(root / "nowhere.json")
    code, err = outcome(root, meminfo)
    assert code == EXIT_CHECKPOINT and "dangling symlink" in str(err)


def test_symlink_loop_and_overlong_names(tmp_path: Path, meminfo) -> None:
    root = cf.make(tmp_path / "c", files=2)
    index = index_of(root)
    victim = sorted(set(index["weight_map"].values()))[0]
    (root / victim).unlink()
    (root / victim).symlink_to(victim)  # a link to itself
    name = "x" * 300 + ".safetensors"  # longer than a file name may be
    index["weight_map"]["extra"] = name
    write_index(root, index)
    started = time.monotonic()
    code, result = outcome(root, meminfo)
    assert time.monotonic() - started < 5 and code == EXIT_CHECKPOINT
    files = {p["file"] for p in problems_of(result) if p["code"] in ("header", "missing_file")}
    assert {victim, name} <= files, problems_of(result)


def test_unreadable_files(tmp_path: Path, meminfo) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads a file of mode 000")
    root = cf.make(tmp_path / "c", files=2)
    victim = sorted(set(index_of(root)["weight_map"].values()))[0]
    (root / victim).chmod(0)
    code, result = outcome(root, meminfo)
    assert code == EXIT_CHECKPOINT
    assert any(p["file"] == victim and "Permission denied" in p["message"] for p in problems_of(result))


# -- bounded work: absurd numbers, deep nesting, huge files -------------------------------------------


@pytest.mark.parametrize(
    "key,value",
    [
        ("split_ngram_parts", 1e12),
        ("heads_per_ngram", 1e9),
        ("ngram_size", 10**6),
        ("ngram_vocab_size_base", 1e30),
        ("make_ngram_vocab_size_divisible_by", 10**18),
        ("ple_embed_dim", 1e15),
        ("split_ngram_parts", True),
        ("ple_layer_ids", list(range(1, 100_000))),
        ("ple_layer_ids", [1e300]),
        ("gguf_ple_constants", {"ngram_heads_vocab_sizes": ["x", 10**40]}),
    ],
)
def test_absurd_config_numbers_are_refused_fast(tmp_path: Path, meminfo, key, value) -> None:
    cfg = cf.config()
    cfg["text_config"][key] = value
    root = cf.write(tmp_path / "c", cfg, cf.table_tensors(cf.config()))
    started = time.monotonic()
    code, result = outcome(root, meminfo, scan=True)
    assert time.monotonic() - started < 5
    assert code == EXIT_CHECKPOINT
    config_problems = [p["message"] for p in problems_of(result) if p["code"] == "config"]
    assert any(key in m or (key == "split_ngram_parts" and "split_ngram_parts" in m) for m in config_problems), \
        config_problems


def test_too_many_ngram_heads_is_refused_fast(tmp_path: Path, meminfo) -> None:
    """Each number in range, their product (one prime each) beyond any real model."""
    cfg = cf.config(ple_layer_ids=list(range(1, 200)))
    cfg["text_config"].update(ngram_size=64, heads_per_ngram=1024, ngram_vocab_size_base=1 << 36)
    root = cf.write(tmp_path / "c", cfg, cf.table_tensors(cf.config()))
    started = time.monotonic()
    code, result = outcome(root, meminfo)
    assert time.monotonic() - started < 5
    assert code == EXIT_CHECKPOINT
    assert any("n-gram heads" in p["message"] for p in problems_of(result))


def test_deep_nesting_and_huge_files(tmp_path: Path, meminfo) -> None:
    root = cf.make(tmp_path / "c", files=2)
    good_config = (root / "config.json").read_bytes()
    (root / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    code, err = outcome(root, meminfo)
    assert code == EXIT_CHECKPOINT and "nested deeper" in str(err)
    with open(root / "config.json", "wb") as f:  # a sparse 65 MiB "config"
        f.truncate(65 * 1024 * 1024)
    code, err = outcome(root, meminfo)
    assert code == EXIT_CHECKPOINT and "far more than any real one" in str(err)
    (root / "config.json").write_bytes(good_config)

    good_index = (root / INDEX).read_bytes()
    (root / INDEX).write_text('{"weight_map": ' + "[" * 50_000 + "]" * 50_000 + "}")
    code, result = outcome(root, meminfo)
    assert code == EXIT_CHECKPOINT
    assert any(p["code"] == "index" and "nested deeper" in p["message"] for p in problems_of(result))
    (root / INDEX).write_text(json.dumps({"weight_map": {"t": {"not": "a name"}}}))
    code, result = outcome(root, meminfo)
    assert any(p["code"] == "index" and p["tensor"] == "t" for p in problems_of(result))
    (root / INDEX).write_bytes(good_index)

    shard = sorted(set(index_of(root)["weight_map"].values()))[0]
    with open(root / shard, "r+b") as f:  # a header length just over the format's limit
        f.write(struct.pack("<Q", 100_000_001))
        f.truncate(100_000_001 + 8)
    with pytest.raises(HeaderError, match="does not fit"):
        read_safetensors_header(root / shard)


# -- safetensors headers: the library's own verdict ---------------------------------------------------


def _entry(dtype: str, shape, offsets) -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": offsets}


def write_raw(path: Path, header: bytes, data: bytes = b"") -> Path:
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


HEADER_CASES = {
    "empty": (b"{}", b""),
    "one tensor": (json.dumps({"a": _entry("U8", [2], [0, 2])}).encode(), b"xx"),
    "leading and trailing whitespace": (b' {"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}  ', b"x"),
    "bytes after the data": (json.dumps({"a": _entry("U8", [2], [0, 2])}).encode(), b"xxx"),
    "a gap before the data": (json.dumps({"a": _entry("U8", [2], [1, 3])}).encode(), b"xxx"),
    "overlapping tensors": (json.dumps({"a": _entry("U8", [2], [0, 2]), "b": _entry("U8", [2], [1, 3])}).encode(),
                            b"xxx"),
    "same offsets twice": (json.dumps({"a": _entry("U8", [2], [0, 2]), "b": _entry("U8", [2], [0, 2])}).encode(),
                           b"xx"),
    "empty tensors share an offset": (json.dumps({"a": _entry("U8", [0], [0, 0]), "b": _entry("U8", [0], [0, 0])})
                                      .encode(), b""),
    "boolean shape": (json.dumps({"a": _entry("U8", [True], [0, 1])}).encode(), b"x"),
    "float shape": (b'{"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}', b"x"),
    "exponent shape": (b'{"a":{"dtype":"U8","shape":[1e0],"data_offsets":[0,1]}}', b"x"),
    "minus zero shape": (b'{"a":{"dtype":"U8","shape":[-0],"data_offsets":[0,0]}}', b""),
    "boolean offsets": (json.dumps({"a": _entry("U8", [1], [False, True])}).encode(), b"x"),
    "three offsets": (json.dumps({"a": _entry("U8", [1], [0, 1, 2])}).encode(), b"x"),
    "offsets backwards": (json.dumps({"a": _entry("U8", [0], [1, 0])}).encode(), b"x"),
    "unknown dtype": (json.dumps({"a": _entry("X8", [1], [0, 1])}).encode(), b"x"),
    "size does not match the dtype": (json.dumps({"a": _entry("F32", [1], [0, 2])}).encode(), b"xx"),
    "F4, whole bytes": (json.dumps({"a": _entry("F4", [4], [0, 2])}).encode(), b"xx"),
    "F4, half a byte": (json.dumps({"a": _entry("F4", [3], [0, 2])}).encode(), b"xx"),
    "F8_E4M3FNUZ": (json.dumps({"a": _entry("F8_E4M3FNUZ", [1], [0, 1])}).encode(), b"x"),
    "shape overflows 64 bits": (json.dumps({"a": _entry("U8", [2**63, 2], [0, 1])}).encode(), b"x"),
    "offset of 2**64": (json.dumps({"a": _entry("U8", [0], [2**64, 2**64])}).encode(), b""),
    "metadata of strings": (json.dumps({"__metadata__": {"format": "pt"}}).encode(), b""),
    "metadata with a number": (json.dumps({"__metadata__": {"a": 1}}).encode(), b""),
    "metadata twice": (b'{"__metadata__":{"k":"1"},"__metadata__":{"k":"2"}}', b""),
    "a tensor name twice, the last one right": (
        b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}',
        b"xx"),
    "a tensor name twice, the first one malformed": (
        b'{"a":5,"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"),
    "a field twice": (b'{"a":{"dtype":"F32","dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"),
    "an unknown field (ignored)": (b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":[1,{"y":2}]}}', b"x"),
    "NaN": (b'{"__metadata__":{"a":NaN}}', b""),
    "a lone surrogate": (b'{"\\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"),
    "a surrogate pair": (b'{"__metadata__":{"k":"\\ud83d\\ude00"}}', b""),
    "a byte-order mark": (b'\xef\xbb\xbf{}', b""),
    "not UTF-8": (b'{"\xff":1}', b""),
    "an array": (b"[]", b""),
    "nested 127 levels (serde's limit)": (
        b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":' + b"[" * 125 + b"]" * 125 + b"}}", b"x"),
    "nested 128 levels": (
        b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":' + b"[" * 126 + b"]" * 126 + b"}}", b"x"),
}


@pytest.mark.parametrize("case", sorted(HEADER_CASES))
def test_header_rules_match_the_safetensors_library(tmp_path: Path, case) -> None:
    header, data = HEADER_CASES[case]
    path = write_raw(tmp_path / "t.safetensors", header, data)
    assert we_accept(path) == library_opens(path)


def test_a_checkpoint_the_library_refuses_never_will_load(tmp_path: Path, meminfo) -> None:
    """Trailing bytes after a shard's data: every tensor in place, yet safetensors refuses the file."""
    root = cf.make(tmp_path / "c", files=2)
    victim = root / sorted(set(index_of(root)["weight_map"].values()))[0]
    assert library_opens(victim)
    with open(victim, "ab") as f:
        f.write(b"\0" * 3)
    assert not library_opens(victim)
    code, result = outcome(root, meminfo)
    assert code == EXIT_CHECKPOINT
    assert any(p["file"] == victim.name and "after the last tensor" in p["message"] for p in problems_of(result))


def test_file_replaced_before_the_scan(tmp_path: Path) -> None:
    """Headers read, then a weight file becomes a FIFO: --scan reports it and does not wait on it."""
    from ple4patch.ckpt.config import load_config
    from ple4patch.ckpt.files import load_checkpoint
    from ple4patch.ckpt.scan import scan_tables
    from ple4patch.ckpt.tables import check_tables

    root = cf.make(tmp_path / "c", files=2)
    ckpt = load_checkpoint(root, load_config(root))
    tables = check_tables(ckpt)
    victim = sorted(ckpt.files)[0]
    (root / victim).unlink()
    os.mkfifo(root / victim)
    started = time.monotonic()
    result = scan_tables(ckpt, tables)
    assert time.monotonic() - started < 5
    assert {p.code for p in result.problems} == {"scan"}
    assert all(p.file == victim and "FIFO" in p.message for p in result.problems)
