"""Property-based tests of `inspect`'s parsers: config.json, the index, safetensors headers.

Random bytes and mutations of valid files never give an internal error (exit 1),
never take longer than a time bound, never open a file outside the checkpoint
directory, and a safetensors file is accepted exactly when the safetensors
library accepts it. Examples are bounded (max_examples, deadline) so the suite
stays fast and the same on every run; `PLE4PATCH_FUZZ_EXAMPLES=3000` runs more, and
`PLE4PATCH_FUZZ_RANDOM=1` draws new examples each time.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckpt_factory as cf
from ckpt_oracle import HEADER_CODES, Opens, library_opens, we_accept
from ple4patch.ckpt import inspect as ckpt_inspect
from ple4patch.ckpt.layout import DTYPE_BITS
from ple4patch.errors import EXIT_CHECKPOINT, EXIT_OK, Ple4Error

EXAMPLES = int(os.environ.get("PLE4PATCH_FUZZ_EXAMPLES", "60"))
TIME_BOUND_S = 5.0  # one whole inspect of a tiny checkpoint, scan included, on a loaded 2-core box
FUZZ = settings(max_examples=EXAMPLES, deadline=timedelta(seconds=TIME_BOUND_S),
                derandomize="PLE4PATCH_FUZZ_RANDOM" not in os.environ,
                database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
INDEX = "model.safetensors.index.json"

json_scalars = (
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False) | st.text(max_size=12)
    | st.sampled_from([1e12, 1e9, 1e30, 10**30, -1, 0, 2**63, 2**64, 1e308, 0.5, "../x", "/etc/passwd"])
)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A small valid checkpoint (3 files + index), copied for each example."""
    return cf.make(tmp_path_factory.mktemp("fuzz") / "base", "nvfp4_split", files=3)


@pytest.fixture(scope="module")
def meminfo(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("mem") / "meminfo"
    path.write_text("MemTotal: 134217728 kB\nMemAvailable: 67108864 kB\n")
    return str(path)


def run_inspect(root: Path, meminfo: str) -> int:
    """Exit code of `inspect --scan`, as the CLI would give it; asserts the properties every run keeps."""
    with Opens() as opened:
        started = time.monotonic()
        try:
            result = ckpt_inspect.run(root, meminfo_path=meminfo, scan=True, progress=False, tp=2)
        except Ple4Error as err:  # the documented codes; anything else would be exit 1
            code, text = err.exit_code, str(err)
        else:
            code, text = result.exit_code, result.output + result.message
            json.dumps(result.to_json())  # what --json prints
        elapsed = time.monotonic() - started
    text.encode("utf-8")  # what the text output prints
    assert code in (EXIT_OK, EXIT_CHECKPOINT), (code, text)
    assert elapsed < TIME_BOUND_S
    real_root = os.path.realpath(root)
    inside = (real_root, os.path.realpath(meminfo))
    outside = [p for p in opened if p not in inside and not p.startswith(real_root + os.sep)]
    assert not outside, outside
    return code


def copy_of(base: Path, scratch: str) -> Path:
    root = Path(scratch) / "c"
    shutil.copytree(base, root)
    return root


def mutate_json(value, path: list, new):
    """``value`` with the item at ``path`` (keys/indices, as deep as they go) replaced by ``new``."""
    if not path or not isinstance(value, (dict, list)) or not value:
        return new
    key = path[0]
    if isinstance(value, dict):
        key = sorted(value)[key % len(value)] if isinstance(key, int) else key
        out = dict(value)
    else:
        key = key % len(value) if isinstance(key, int) else 0
        out = list(value)
    out[key] = mutate_json(value.get(key) if isinstance(value, dict) else value[key], path[1:], new)
    return out


paths = st.lists(st.integers(min_value=0, max_value=50) | st.sampled_from(
    ["text_config", "split_ngram_parts", "heads_per_ngram", "ngram_size", "ple_layer_ids",
     "ngram_vocab_size_base", "ple_embed_dim", "make_ngram_vocab_size_divisible_by", "gguf_ple_constants",
     "quantization_config", "weight_map"]), max_size=4)


# -- config.json ----------------------------------------------------------------------------------------


@FUZZ
@given(data=st.binary(max_size=512))
def test_config_random_bytes(base, meminfo, data) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = copy_of(base, scratch)
        (root / "config.json").write_bytes(data)
        assert run_inspect(root, meminfo) == EXIT_CHECKPOINT


@FUZZ
@given(path=paths, new=json_values)
def test_config_mutations(base, meminfo, path, new) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = copy_of(base, scratch)
        cfg = json.loads((root / "config.json").read_text())
        (root / "config.json").write_text(json.dumps(mutate_json(cfg, path, new)))
        run_inspect(root, meminfo)


@FUZZ
@given(depth=st.integers(min_value=1, max_value=20_000), opener=st.sampled_from(["[", '{"a":']))
def test_config_deep_nesting(base, meminfo, depth, opener) -> None:
    closer = "]" if opener == "[" else "}"
    with tempfile.TemporaryDirectory() as scratch:
        root = copy_of(base, scratch)
        cfg = json.loads((root / "config.json").read_text())
        cfg["text_config"]["extra"] = "@"
        text = json.dumps(cfg).replace('"@"', opener * depth + "1" + closer * depth)
        (root / "config.json").write_text(text)
        code = run_inspect(root, meminfo)
        assert code == (EXIT_OK if depth + 2 <= 64 else EXIT_CHECKPOINT)  # config.json: 64 levels at most


# -- the index --------------------------------------------------------------------------------------------


@FUZZ
@given(data=st.binary(max_size=512))
def test_index_random_bytes(base, meminfo, data) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = copy_of(base, scratch)
        (root / INDEX).write_bytes(data)
        assert run_inspect(root, meminfo) == EXIT_CHECKPOINT


file_names = st.sampled_from(["../c/model-00001-of-00003.safetensors", "/etc/hostname", "..", ".", "",
                              "sub/../../x", "model-00001-of-00003.safetensors", "config.json", INDEX,
                              "a\x00b", "link-out", "\udcff"]) | st.text(max_size=10)


@FUZZ
@given(path=paths, new=json_values | file_names, entry=st.integers(min_value=0, max_value=500),
       name=file_names)
def test_index_mutations(base, meminfo, path, new, entry, name) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = copy_of(base, scratch)
        (Path(scratch) / "secret.safetensors").write_bytes((root / "model-00001-of-00003.safetensors").read_bytes())
        (root / "link-out").symlink_to(Path(scratch) / "secret.safetensors")
        index = json.loads((root / INDEX).read_text())
        index = mutate_json(index, path, new)
        if isinstance(index, dict) and isinstance(index.get("weight_map"), dict) and index["weight_map"]:
            keys = sorted(index["weight_map"])
            index["weight_map"][keys[entry % len(keys)]] = name
        (root / INDEX).write_text(json.dumps(index))
        run_inspect(root, meminfo)


# -- safetensors headers: ours and the library's verdict agree ----------------------------------------------

dtypes = st.sampled_from(sorted(DTYPE_BITS)) | st.sampled_from(["X8", "u8", "F8", ""]) | st.text(max_size=4)
dims = st.integers(min_value=0, max_value=6) | st.sampled_from([True, False, 1.0, -1, 2**63, 2**64, 0])
offsets = st.integers(min_value=0, max_value=64) | st.sampled_from([True, 1.5, -1, 2**64])


@st.composite
def headers(draw):
    """A header dict of a few tensors, mostly plausible (contiguous offsets), sometimes not."""
    header: dict = {}
    cursor = 0
    for i in range(draw(st.integers(min_value=0, max_value=4))):
        dtype = draw(dtypes)
        shape = draw(st.lists(dims, max_size=3))
        if draw(st.booleans()) and dtype in DTYPE_BITS and all(type(d) is int and 0 <= d < 8 for d in shape):
            n = 1
            for d in shape:
                n *= d
            size = n * DTYPE_BITS[dtype] // 8
            offs = [cursor, cursor + size]
        else:
            offs = draw(st.lists(offsets, min_size=0, max_size=3))
        if len(offs) == 2 and all(type(o) is int for o in offs) and offs[1] <= 1 << 12:
            cursor = max(cursor, offs[1])
        entry = {"dtype": dtype, "shape": shape, "data_offsets": offs}
        if draw(st.integers(min_value=0, max_value=9)) == 0:
            entry = draw(json_values)
        header[draw(st.sampled_from([f"t{i}", "t0", "__metadata__"]))
               if draw(st.integers(min_value=0, max_value=9)) == 0 else f"t{i}"] = entry
    if draw(st.booleans()):
        header["__metadata__"] = draw(st.dictionaries(st.text(max_size=4), st.text(max_size=4) | json_scalars,
                                                     max_size=2))
    return header, cursor


@FUZZ
@given(spec=headers(), slack=st.integers(min_value=-3, max_value=3), pad=st.sampled_from(["", " ", "\n", "  x"]))
def test_header_verdict_matches_the_library(spec, slack, pad) -> None:
    header, cursor = spec
    raw = (json.dumps(header) + pad).encode()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "t.safetensors"
        path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * max(0, cursor + slack))
        assert we_accept(path) == library_opens(path), raw


@FUZZ
@given(data=st.data())
def test_header_byte_mutations_match_the_library(base, data) -> None:
    """Flip, cut or add bytes of a real shard file: the verdicts still agree."""
    src = base / "model-00001-of-00003.safetensors"
    blob = bytearray(src.read_bytes())
    (length,) = struct.unpack("<Q", blob[:8])
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        kind = data.draw(st.sampled_from(["flip", "cut", "add", "length"]))
        if kind == "flip" and blob:
            at = data.draw(st.integers(min_value=0, max_value=min(len(blob), 8 + length) - 1))
            blob[at] = data.draw(st.integers(min_value=0, max_value=255))
        elif kind == "cut":
            del blob[data.draw(st.integers(min_value=0, max_value=len(blob))):]
        elif kind == "add":
            blob += data.draw(st.binary(min_size=1, max_size=8))
        elif kind == "length" and len(blob) >= 8:
            blob[:8] = struct.pack("<Q", data.draw(st.integers(min_value=0, max_value=2**64 - 1)))
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "t.safetensors"
        path.write_bytes(bytes(blob))
        assert we_accept(path) == library_opens(path)


@FUZZ
@given(spec=headers(), slack=st.integers(min_value=-2, max_value=2))
def test_generated_shard_file_in_a_checkpoint(base, meminfo, spec, slack) -> None:
    """A generated header in place of a shard file: the whole inspect keeps its properties, and a file
    the library refuses is never part of a checkpoint that "will load"."""
    header, cursor = spec
    raw = json.dumps(header).encode()
    with tempfile.TemporaryDirectory() as scratch:
        root = copy_of(base, scratch)
        path = root / "model-00002-of-00003.safetensors"
        path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * max(0, cursor + slack))
        code = run_inspect(root, meminfo)
        if not library_opens(path):
            assert code == EXIT_CHECKPOINT


def test_header_codes_are_what_the_report_uses() -> None:
    """The parity checks above judge by these problem codes: the header reader must use them."""
    import inspect as pyinspect

    from ple4patch.ckpt import header

    source = pyinspect.getsource(header)
    assert all(f'Problem("{code}"' in source for code in HEADER_CODES)
