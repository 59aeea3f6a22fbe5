"""`ple4patch inspect`: header reading, layout checks, memory, --scan, --venv, CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import ckpt_factory as cf
from ple4patch.ckpt import layout as ple_layout
from ple4patch.ckpt.header import HeaderError, read_safetensors_header
from ple4patch.ckpt.scan import CHUNK_BYTES
from ple4patch.ckpt import inspect as ckpt_inspect
from ple4patch.ckpt import report as ckpt_report
from ple4patch.sentinel import PATCH_ID
from ple4patch.errors import EXIT_CHECKPOINT, EXIT_ENGINE_NOT_FOUND, EXIT_OK, EXIT_USAGE, UsageError

torch = cf.torch
REPO = Path(__file__).resolve().parents[1]
GIB = 1024**3

# The tiny default config: 4 heads, primes 17+19+23+29 = 88 rows, padded to 4 -> 88;
# split_ngram_parts 5 -> shards of ceil(88/5) = 18 rows, the last one 16.
ROWS = cf.table_rows(17, 4, 4)
PRE = cf.table_prefix(1)


@pytest.fixture
def meminfo(tmp_path: Path):
    def make(available_gib: float = 64, total_gib: float = 128) -> str:
        path = tmp_path / "meminfo"
        path.write_text(
            f"MemTotal:       {int(total_gib * 1024**2)} kB\n"
            f"MemFree:        1000 kB\n"
            f"MemAvailable:   {int(available_gib * 1024**2)} kB\n"
        )
        return str(path)

    return make


def inspect(path: Path, meminfo_path: str, **kw) -> ckpt_report.InspectReport:
    return ckpt_inspect.inspect_checkpoint(path, meminfo_path=meminfo_path, **kw)


def codes(report) -> list[tuple[str, str | None]]:
    return [(p.code, p.tensor) for p in report.problems]


# -- the header reader ----------------------------------------------------------------------


def test_header_matches_safetensors_own_reader(tmp_path: Path) -> None:
    root = cf.make(tmp_path / "c", "nvfp4_split", files=1)
    fname = "model-00001-of-00001.safetensors"
    sfile = read_safetensors_header(root / fname)
    from safetensors import safe_open

    with safe_open(str(root / fname), framework="pt") as f:
        assert sorted(f.keys()) == sorted(sfile.tensors)
        for name in f.keys():
            t = f.get_tensor(name)
            info = sfile.tensors[name]
            assert info.shape == tuple(t.shape)
            assert info.nbytes == t.numel() * t.element_size()
            # the absolute offset really points at the tensor's bytes
            with open(root / fname, "rb") as raw:
                raw.seek(info.start)
                assert raw.read(info.nbytes) == t.contiguous().view(torch.uint8).numpy().tobytes()
    dtypes = {n.rsplit(".", 1)[-1] if "shard" in n else n: i.dtype for n, i in sfile.tensors.items()}
    assert dtypes["weight_scale"] == "F8_E4M3" and dtypes["weight"] == "U8"
    assert sfile.problems == []


def test_header_garbage_and_truncation(tmp_path: Path, meminfo) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(HeaderError, match="does not fit"):
        read_safetensors_header(bad)
    bad.write_bytes(struct.pack("<Q", 4) + b"nope")
    with pytest.raises(HeaderError, match="not valid JSON"):
        read_safetensors_header(bad)

    root = cf.make(tmp_path / "c", "nvfp4_rowpacked", files=2)
    victim = root / "model-00002-of-00002.safetensors"
    os.truncate(victim, victim.stat().st_size - 5)
    report = inspect(root, meminfo())
    truncated = [p for p in report.problems if p.code == "truncated"]
    assert truncated and all(p.file == victim.name for p in truncated)
    assert "download is incomplete" in truncated[0].message


# -- loadable layouts -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "layout,global_scale,index,row_bytes",
    [
        ("nvfp4_rowpacked", "table", True, 18),
        ("nvfp4_rowpacked", "per_shard", False, 18),
        ("nvfp4_split", "table", True, 18),
        ("nvfp4_split", "per_shard", True, 18),
        ("fp8", "table", True, 32),
    ],
)
def test_loadable_layouts(tmp_path: Path, meminfo, layout, global_scale, index, row_bytes) -> None:
    root = cf.make(tmp_path / "c", layout, global_scale=global_scale, index=index)
    report = inspect(root, meminfo(), tp=4)
    assert report.problems == [], [p.line() for p in report.problems]
    assert report.ok and report.warnings == []
    (table,) = report.tables
    assert (table.layer, table.prefix, table.layout) == (1, PRE, layout)
    assert (table.rows, table.rows_source, table.checkpoint_rows) == (ROWS, "config", ROWS)
    assert table.global_scale == global_scale
    assert table.row_bytes == row_bytes
    per_rank_rows = -(-ROWS // 4)
    assert report.memory["rows_per_rank"] == per_rank_rows
    assert report.memory["bytes_per_rank"] == per_rank_rows * row_bytes
    assert report.memory["bytes_per_host"] == 4 * per_rank_rows * row_bytes
    assert report.memory["fp8_bytes_per_rank"] == per_rank_rows * 32
    assert report.memory["fits"] is True
    want = "stock or the patched" if layout == "fp8" else "once the engine is patched"
    assert want in report.verdict


def test_top_level_config_and_single_file(tmp_path: Path, meminfo) -> None:
    cfg = cf.config(text_config=False)
    tensors = cf.table_tensors(cfg)
    root = cf.write(tmp_path / "c", cfg, tensors, index=False)
    report = inspect(root, meminfo())
    assert report.ok, [p.line() for p in report.problems]
    assert report.ckpt.index_file is None and list(report.ckpt.files) == ["model.safetensors"]
    assert report.ckpt.config.dtype_source == "ple_embedding_dtype"


def sparse_rowpacked(path: Path, shards: int, shard_rows: int, width: int = 90) -> None:
    """A row-packed table with real names and shapes whose data are holes (a sparse file)."""
    header, offset = {}, 0
    for i in range(shards):
        n = shard_rows * width
        header[f"{PRE}.shard_{i}.weight"] = {"dtype": "U8", "shape": [shard_rows, width],
                                             "data_offsets": [offset, offset + n]}
        offset += n
    header[f"{PRE}.weight_scale_2"] = {"dtype": "F32", "shape": [1], "data_offsets": [offset, offset + 4]}
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
    os.truncate(path, 8 + len(raw) + offset + 4)


def test_real_model_sizes_from_sparse_headers(tmp_path: Path, meminfo) -> None:
    """Real names and shapes (128 x [2500012, 90]), data as holes: rows and GiB of the real model."""
    from safetensors import safe_open

    sparse_rowpacked(tmp_path / "small.safetensors", 2, 3)  # the writer makes valid safetensors
    with safe_open(str(tmp_path / "small.safetensors"), framework="pt") as f:
        assert f.get_tensor(f"{PRE}.shard_1.weight").shape == (3, 90)

    root = tmp_path / "real"
    root.mkdir()
    cfg = cf.config(head_dim=160, heads_per_ngram=8, base=20_000_000, divisor=128, parts=128)
    (root / "config.json").write_text(json.dumps(cfg))
    shard_rows = 2_500_012  # from the real checkpoint's model-00005-of-00131 header
    sparse_rowpacked(root / "model.safetensors", 128, shard_rows)  # ~28.8 GB of holes

    report = inspect(root, meminfo(available_gib=22, total_gib=31), tp=4)
    (table,) = report.tables
    assert table.rows == 320_001_536 == 128 * shard_rows  # the engine's own prime construction
    assert report.memory["rows_per_rank"] == 80_000_384
    assert report.memory["bytes_per_rank"] == 80_000_384 * 90  # 6.71 GiB
    assert report.memory["fp8_bytes_per_rank"] == 80_000_384 * 160  # 11.92 GiB
    text = ckpt_report.render_text(report)
    assert "6.71 GiB per rank (as FP8: 11.92 GiB)" in text and "26.82 GiB for 4 rank(s)" in text
    # four ranks on a host with 22 GiB available do not fit; two per host do
    assert [p.code for p in report.problems] == ["memory"] and report.memory["fits"] is False
    two = inspect(root, meminfo(available_gib=22, total_gib=64), tp=4, ranks_per_host=2)
    assert two.ok and two.memory["bytes_per_host"] == 2 * 80_000_384 * 90


def test_memory_tight_is_a_warning_and_unreadable_meminfo(tmp_path: Path, meminfo) -> None:
    root = cf.make(tmp_path / "c")
    tiny = -(-ROWS * 18 // 4096) * 4096  # bytes pinned on one rank at TP1: one 4 KiB page
    report = inspect(root, meminfo(available_gib=(tiny + 1000) / GIB, total_gib=1), tp=1)
    assert report.ok and [w.code for w in report.warnings] == ["memory"]
    report = inspect(root, str(tmp_path / "no-meminfo"))
    assert report.ok and report.memory["fits"] is None and "MemAvailable" in report.warnings[0].message


# -- broken checkpoints -----------------------------------------------------------------------


def broken(tmp_path: Path, mutate, layout: str = "nvfp4_rowpacked", cfg_kw=None, **write_kw) -> Path:
    cfg = cf.config(dtype=cf.LAYOUT_DTYPE[layout], **(cfg_kw or {}))
    tensors = cf.table_tensors(cfg, layout)
    tensors.update(cf.other_tensors())
    mutate(cfg, tensors)  # changes both in place
    return cf.write(tmp_path / "c", cfg, tensors, **write_kw)


def test_missing_shard(tmp_path: Path, meminfo) -> None:
    root = broken(tmp_path, lambda c, t: t.pop(f"{PRE}.shard_2.weight"))
    report = inspect(root, meminfo())
    assert codes(report) == [("missing_shard", f"{PRE}.shard_2.weight")]
    assert report.problems[0].expected.startswith("U8 [18, 18]")
    assert report.tables[0].shards_missing == [2]
    assert not report.ok and "WILL NOT LOAD" in report.verdict


def test_missing_last_shard_without_config_rows(tmp_path: Path, meminfo) -> None:
    """Without ngram_vocab_size_base the rows come from the checkpoint, estimated across the gap."""
    def mutate(c, t):
        del c["text_config"]["ngram_vocab_size_base"]
        t.pop(f"{PRE}.shard_1.weight")

    report = inspect(broken(tmp_path, mutate), meminfo())
    assert ("missing_shard", f"{PRE}.shard_1.weight") in codes(report)
    assert ("config", None) in codes(report)  # the engine needs the key
    assert report.tables[0].rows_source == "checkpoint" and report.tables[0].rows == ROWS


def test_wrong_dtype(tmp_path: Path, meminfo) -> None:
    def mutate(c, t):
        t[f"{PRE}.shard_1.weight"] = t[f"{PRE}.shard_1.weight"].to(torch.float16)

    report = inspect(broken(tmp_path, mutate), meminfo())
    assert codes(report) == [("dtype", f"{PRE}.shard_1.weight")]
    assert "F16 [18, 18]" in report.problems[0].message and report.problems[0].expected.startswith("U8")


def test_wrong_width(tmp_path: Path, meminfo) -> None:
    def mutate(c, t):
        t[f"{PRE}.shard_3.weight"] = t[f"{PRE}.shard_3.weight"][:, :17].contiguous()

    report = inspect(broken(tmp_path, mutate), meminfo())
    assert codes(report) == [("width", f"{PRE}.shard_3.weight")]
    assert "D/2 + D/16 for D = 32" in report.problems[0].expected


def test_missing_global_scale(tmp_path: Path, meminfo) -> None:
    report = inspect(broken(tmp_path, lambda c, t: t.pop(f"{PRE}.weight_scale_2")), meminfo())
    assert codes(report) == [("missing_global_scale", f"{PRE}.weight_scale_2")]
    assert "F32 [1]" in report.problems[0].expected
    assert report.tables[0].global_scale is None


def test_global_scale_wrong_dtype(tmp_path: Path, meminfo) -> None:
    def mutate(c, t):
        t[f"{PRE}.weight_scale_2"] = torch.tensor([3], dtype=torch.int64)

    report = inspect(broken(tmp_path, mutate), meminfo())
    assert codes(report) == [("global_scale", f"{PRE}.weight_scale_2")]


def test_fp8_missing_scale(tmp_path: Path, meminfo) -> None:
    report = inspect(broken(tmp_path, lambda c, t: t.pop(f"{PRE}.weight_scale"), "fp8"), meminfo())
    assert codes(report) == [("missing_global_scale", f"{PRE}.weight_scale")]


@pytest.mark.parametrize(
    "config_dtype,layout,want",
    [
        ("float8_e4m3fn", "nvfp4_rowpacked", "'nvfp4_rowpacked'"),
        ("nvfp4_rowpacked", "fp8", "'float8_e4m3fn'"),
        (None, "nvfp4_rowpacked", "'nvfp4_rowpacked'"),
        ("nvfp4", "nvfp4_split", "'nvfp4_rowpacked'"),
    ],
)
def test_config_dtype_disagrees_with_tensors(tmp_path: Path, meminfo, config_dtype, layout, want) -> None:
    cfg = cf.config(dtype=config_dtype)
    root = cf.write(tmp_path / "c", cfg, cf.table_tensors(cfg, layout))
    report = inspect(root, meminfo())
    assert [p.code for p in report.problems] == ["config_dtype"]
    assert report.problems[0].expected == f"text_config.ple_embedding_dtype = {want}"
    assert report.tables[0].layout == layout  # judged by the tensors, not the config


@pytest.mark.parametrize("layout", ["nvfp4_split", "nvfp4_rowpacked", "fp8"])
@pytest.mark.parametrize("text_config", [True, False], ids=["text_config", "top_level"])
def test_a_missing_dtype_names_the_layout_and_what_to_add(tmp_path: Path, meminfo, layout, text_config) -> None:
    """No ple_embedding_dtype: the message names the layout the tensors hold and the exact entry to
    add to config.json; the value is the one the engine keys on (the patched loader reads NVIDIA's
    split layout under "nvfp4_rowpacked": there is no "nvfp4_split" value). Adding it, as said,
    makes the checkpoint load."""
    cfg = cf.config(dtype=None, text_config=text_config)
    root = cf.write(tmp_path / "c", cfg, cf.table_tensors(cfg, layout))
    (problem,) = inspect(root, meminfo()).problems
    want = cf.LAYOUT_DTYPE[layout]
    where = "the text_config object" if text_config else "the top-level object"
    line = problem.line()
    assert f"the table is {ple_layout.LAYOUT_WORDS[layout]}" in line, line
    assert line.endswith(f'add `"ple_embedding_dtype": "{want}"` to {where} of config.json'), line
    assert "(expected" not in line  # said once, in the message
    assert problem.expected == f"{'text_config.' if text_config else ''}ple_embedding_dtype = {want!r}"
    written = json.loads((root / "config.json").read_text())
    (written["text_config"] if text_config else written)["ple_embedding_dtype"] = want
    (root / "config.json").write_text(json.dumps(written))
    report = inspect(root, meminfo())
    assert report.ok, [p.line() for p in report.problems]


def test_the_layer_is_named_as_ple_layer_ids_names_it(tmp_path: Path) -> None:
    """ple_layer_ids counts from 1, the tensor names from 0 (the engine's `(layer_idx + 1) in
    ple_layer_ids`, ple4patch.ckpt.layout.ple_layer_id): the text says "PLE layer 2" for
    ple_layer_ids [2], its tensors under layers.1; the JSON has both, `ple_layer_id` (as in
    ple_layer_ids) and `layer` (0-based)."""
    from click.testing import CliRunner

    from ple4patch.cli import main

    root = cf.make(tmp_path / "c", ple_layer_ids=[2, 5])
    res = CliRunner().invoke(main, ["inspect", str(root)])
    assert res.exit_code == EXIT_CHECKPOINT, res.output  # no table for PLE layer 5
    assert "table       PLE layer 2: nvfp4_rowpacked, " in res.output
    text = " ".join(res.output.split())
    assert f"{cf.table_prefix(1)}.* (ple_layer_ids counts layers from 1, tensor names from 0)" in text
    assert ("ple_layer_ids names PLE layer 5 but the checkpoint has no table for it (layers.4 in the "
            "tensor names; ple_layer_ids counts from 1)") in text
    d = json.loads(CliRunner().invoke(main, ["inspect", str(root), "--json"]).stdout)
    assert d["config"]["ple_layer_ids"] == [2, 5]
    assert [(t["ple_layer_id"], t["layer"]) for t in d["tables"]] == [(2, 1)]
    assert [(t["ple_layer_id"], t["layer"]) for t in d["memory"]["per_table"]] == [(2, 1)]
    assert d["tables"][0]["prefix"] == cf.table_prefix(1)


def test_dtype_at_top_level_with_text_config(tmp_path: Path, meminfo) -> None:
    def mutate(c, t):
        c["ple_embedding_dtype"] = c["text_config"].pop("ple_embedding_dtype")

    report = inspect(broken(tmp_path, mutate), meminfo())
    assert [p.code for p in report.problems] == ["config"]
    assert "move it into text_config" in report.problems[0].message


def test_modelopt_quant_config_selects_fp8(tmp_path: Path, meminfo) -> None:
    cfg = cf.config(dtype=None)
    cfg["quantization_config"] = {"quant_algo": "MIXED_PRECISION", "quantized_layers": {
        f"{PRE}": {"quant_algo": "FP8"}}}
    root = cf.write(tmp_path / "c", cfg, cf.table_tensors(cfg, "fp8"))
    report = inspect(root, meminfo())
    assert report.ok, [p.line() for p in report.problems]
    assert report.ckpt.config.dtype_source == "quantization_config.quantized_layers"
    assert [w.code for w in report.warnings] == ["config_dtype"]  # 1.5.0 needs the key

    # NVIDIA's NVFP4 entry does not select the patched loader: the key must be set
    cfg["quantization_config"]["quantized_layers"][PRE]["quant_algo"] = "NVFP4"
    root = cf.write(tmp_path / "n", cfg, cf.table_tensors(cfg, "nvfp4_split"))
    report = inspect(root, meminfo())
    assert [p.code for p in report.problems] == ["config_dtype"]
    assert "quantization_config lists the table as 'nvfp4'" in report.problems[0].message
    assert report.problems[0].expected == "text_config.ple_embedding_dtype = 'nvfp4_rowpacked'"


def test_duplicate_shard_across_files(tmp_path: Path, meminfo) -> None:
    name = f"{PRE}.shard_0.weight"
    root = broken(tmp_path, lambda c, t: None, duplicate=(name,), files=3)
    own = json.loads((root / "model.safetensors.index.json").read_text())["weight_map"][name]
    report = inspect(root, meminfo())
    assert codes(report) == [("duplicate", name)]
    files = report.problems[0].message.split(": ", 1)[1].split(";")[0].split(", ")
    assert own in files and len(set(files)) == 2


def test_overlapping_shard_rows(tmp_path: Path, meminfo) -> None:
    """Shard 0 one row too tall (overlaps shard 1's first row): its rows and the total are off."""
    def mutate(c, t):
        w = t[f"{PRE}.shard_0.weight"]
        t[f"{PRE}.shard_0.weight"] = torch.cat([w, t[f"{PRE}.shard_1.weight"][:1]])

    report = inspect(broken(tmp_path, mutate), meminfo())
    assert codes(report) == [("rows", PRE), ("rows", f"{PRE}.shard_0.weight")]
    assert f"{ROWS + 1} rows" in report.problems[0].message
    assert report.problems[1].expected.startswith("U8 [18, 18]")


def test_extra_shard_index(tmp_path: Path, meminfo) -> None:
    def mutate(c, t):
        t[f"{PRE}.shard_5.weight"] = t[f"{PRE}.shard_4.weight"].clone()

    report = inspect(broken(tmp_path, mutate), meminfo())
    assert ("extra_shard", f"{PRE}.shard_5.weight") in codes(report)


def test_missing_file_from_index(tmp_path: Path, meminfo) -> None:
    root = broken(tmp_path, lambda c, t: None, files=3)
    (root / "model-00002-of-00003.safetensors").unlink()
    report = inspect(root, meminfo())
    assert ("missing_file", None) in codes(report)
    assert any(p.file == "model-00002-of-00003.safetensors" for p in report.problems)
    assert any(p.code == "missing_shard" for p in report.problems)  # its shards are gone too


def test_split_missing_block_scale_and_mixed_shard(tmp_path: Path, meminfo) -> None:
    def mutate(c, t):
        t.pop(f"{PRE}.shard_1.weight_scale")
        # shard 3 row-packed while the rest is split: fine for the loader
        codes3 = t[f"{PRE}.shard_3.weight"]
        scales3 = t.pop(f"{PRE}.shard_3.weight_scale").view(torch.uint8)
        t[f"{PRE}.shard_3.weight"] = torch.cat([codes3, scales3], dim=1).contiguous()
        # shard 4 row-packed *and* a split scale: the loader refuses
        t[f"{PRE}.shard_4.weight"] = torch.cat(
            [t[f"{PRE}.shard_4.weight"], t[f"{PRE}.shard_4.weight_scale"].view(torch.uint8)], dim=1
        ).contiguous()

    report = inspect(broken(tmp_path, mutate, "nvfp4_split"), meminfo())
    assert codes(report) == [
        ("missing_block_scale", f"{PRE}.shard_1.weight_scale"),
        ("mixed_shard", f"{PRE}.shard_4.weight_scale"),
    ]
    assert report.tables[0].layout == "nvfp4_split"


def test_bf16_table_and_unexpected_tensor(tmp_path: Path, meminfo) -> None:
    report = inspect(broken(tmp_path, lambda c, t: None, "bf16"), meminfo())
    assert [p.code for p in report.problems] == ["layout"] and report.tables[0].layout == "other"
    assert "BF16" in report.problems[0].message

    def mutate2(c, t):
        t[f"{PRE}.input_scale"] = torch.tensor([1.0])
        t[f"{PRE}.weight_scale"] = torch.tensor([1.0])

    report = inspect(broken(tmp_path / "2", mutate2), meminfo())
    assert codes(report) == [("unexpected", f"{PRE}.weight_scale"), ("unexpected", f"{PRE}.input_scale")]


def test_no_table_and_wrong_layer(tmp_path: Path, meminfo) -> None:
    cfg = cf.config()
    root = cf.write(tmp_path / "none", cfg, cf.other_tensors())
    report = inspect(root, meminfo())
    assert [p.code for p in report.problems] == ["missing_table"]
    assert "layers.1.ple" in report.problems[0].tensor

    cfg = cf.config()
    tensors = cf.table_tensors(cfg)
    tensors.update(cf.table_tensors(cfg, layer=3))
    report = inspect(cf.write(tmp_path / "extra", cfg, tensors), meminfo())
    assert codes(report) == [("layer", cf.table_prefix(3))]


def llama_checkpoint(root: Path) -> Path:
    """A checkpoint of another model: a Llama-style config (no PLE key) and one safetensors file."""
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8, "head_dim": 4,
           "num_hidden_layers": 1, "vocab_size": 16}
    return cf.write(root, cfg, {"model.embed_tokens.weight": torch.zeros(16, 8, dtype=torch.bfloat16)}, index=False)


def test_a_checkpoint_of_another_model_is_not_a_problem(tmp_path: Path, meminfo) -> None:
    """README: ple4patch changes nothing for another model; inspect says so in one line, exit 0."""
    from click.testing import CliRunner

    from ple4patch.cli import main

    root = llama_checkpoint(tmp_path / "llama")
    report = inspect(root, meminfo())
    assert report.ok and not report.ple_table and report.problems == [] and report.tables == []
    assert report.verdict == "no PLE table: not a Qwen3.8-Flash-Next checkpoint; ple4patch changes nothing for it"
    res = CliRunner().invoke(main, ["inspect", str(root)])
    assert res.exit_code == EXIT_OK, res.output
    lines = res.output.splitlines()
    assert lines[-1] == report.verdict and "problems" not in res.output and "None" not in res.output
    assert "1 safetensors file(s), 1 tensor, " in lines[1]
    data = json.loads(CliRunner().invoke(main, ["inspect", str(root), "--json"]).stdout)
    assert (data["exit_code"], data["verdict"], data["message"]) == (EXIT_OK, report.verdict, report.verdict)
    # config keys of the PLE layer without a table: a Qwen3.8-Flash-Next checkpoint missing its table
    broken_root = cf.write(tmp_path / "no-table", cf.config(), cf.other_tensors())
    assert [p.code for p in inspect(broken_root, meminfo()).problems] == ["missing_table"]


def test_an_underived_head_dim_is_said_in_words(tmp_path: Path, meminfo) -> None:
    cfg = cf.config()
    del cfg["text_config"]["ple_embed_dim"]
    root = cf.write(tmp_path / "c", cfg, cf.table_tensors(cf.config()))
    text = ckpt_report.render_text(inspect(root, meminfo()))
    assert "head_dim unknown (needs ple_embed_dim, ngram_size, heads_per_ngram)" in " ".join(text.split())
    assert "None" not in text


def test_two_ple_layers_use_their_own_primes(tmp_path: Path, meminfo) -> None:
    cfg = cf.config(ple_layer_ids=[2, 5])
    tensors = cf.table_tensors(cfg, layer=1)
    tensors.update(cf.table_tensors(cfg, layer=4))
    report = inspect(cf.write(tmp_path / "c", cfg, tensors), meminfo(), tp=2)
    assert report.ok, [p.line() for p in report.problems]
    second = cf.table_rows(17, 4, 4, dense=1)
    assert [t.rows for t in report.tables] == [ROWS, second] and second != ROWS
    assert report.memory["rows_per_rank"] == -(-ROWS // 2) + -(-second // 2)


# -- usage errors ---------------------------------------------------------------------------------


def test_a_file_or_a_venv_for_checkpoint_dir_says_what_was_meant(tmp_path: Path, meminfo, new_venv) -> None:
    root = cf.make(tmp_path / "ckpt dir")
    with pytest.raises(UsageError, match=f"config.json is a file, not a checkpoint directory: pass its directory {root}$"):
        inspect(root / "config.json", meminfo())
    venv = new_venv("engine")
    with pytest.raises(UsageError, match=r"the arguments are swapped: .*engine is a venv and .*ckpt dir a checkpoint; "
                       r"CHECKPOINT_DIR comes first: `ple4patch inspect '.*ckpt dir' .*engine`"):
        inspect(venv, meminfo(), venv=root)
    with pytest.raises(UsageError, match=r"engine is a venv, not a checkpoint directory: CHECKPOINT_DIR comes first"):
        inspect(venv, meminfo())
    proc = subprocess.run([sys.executable, "-m", "ple4patch", "inspect", str(venv), str(root)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == EXIT_USAGE and "the arguments are swapped" in proc.stderr, proc


def test_usage_errors(tmp_path: Path, meminfo) -> None:
    with pytest.raises(UsageError, match="no such checkpoint directory"):
        inspect(tmp_path / "nope", meminfo())
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no config.json"):
        inspect(tmp_path / "empty", meminfo())
    root = cf.make(tmp_path / "c")
    with pytest.raises(UsageError, match="--ranks-per-host"):
        inspect(root, meminfo(), tp=2, ranks_per_host=3)
    (tmp_path / "nofiles").mkdir()
    (tmp_path / "nofiles" / "config.json").write_text(json.dumps(cf.config()))
    report = inspect(tmp_path / "nofiles", meminfo())
    assert [p.code for p in report.problems][:1] == ["no_weights"]


# -- --scan -----------------------------------------------------------------------------------------


def _plant_rowpacked(t: dict) -> None:
    w = t[f"{PRE}.shard_2.weight"]  # scale columns are 16 and 17
    w[3, 16] = 0x7F  # NaN
    w[5, 17] = 0xFF  # NaN
    w[4, 16] = 0x81  # negative
    w[7, 17] = 0x80  # -0: counted apart, not a problem
    w[0, 0:16] = 0x7F  # code bytes: not scales, never counted
    t[f"{PRE}.shard_4.weight"][15, 16] = 0xC0  # negative, last row of the last shard


@pytest.mark.parametrize("chunk_bytes", [CHUNK_BYTES, 18, 37])
def test_scan_rowpacked_counts_planted_scales(tmp_path: Path, meminfo, chunk_bytes) -> None:
    root = broken(tmp_path, lambda c, t: _plant_rowpacked(t))
    report = inspect(root, meminfo(), scan=False)
    assert report.ok  # headers alone cannot see bad bytes
    report = ckpt_inspect.inspect_checkpoint(root, meminfo_path=meminfo(), scan=True, chunk_bytes=chunk_bytes)
    s = report.scan
    assert s.block_scales == ROWS * 2 and s.bytes_read == ROWS * 18
    assert (s.nan_block_scales, s.negative_block_scales, s.negative_zero_block_scales) == (2, 2, 1)
    by_tensor = {c.tensor: c for c in s.per_tensor}
    c2 = by_tensor[f"{PRE}.shard_2.weight"]
    assert (c2.nan, c2.first_nan_row, c2.negative, c2.first_negative_row) == (2, 3, 1, 4)
    assert by_tensor[f"{PRE}.shard_4.weight"].first_negative_row == 15
    assert codes(report) == [
        ("nan_scales", f"{PRE}.shard_2.weight"),
        ("negative_scales", f"{PRE}.shard_2.weight"),
        ("negative_scales", f"{PRE}.shard_4.weight"),
    ]
    assert s.global_scales == [{"tensor": f"{PRE}.weight_scale_2", "dtype": "F32",
                                "value": pytest.approx(0.0125)}]


def test_scan_split_and_global_scales(tmp_path: Path, meminfo) -> None:
    def mutate(c, t):
        s = t[f"{PRE}.shard_1.weight_scale"].view(torch.uint8)
        s[6, 1] = 0x7F
        s[9, 0] = 0x90
        t[f"{PRE}.shard_0.weight_scale_2"] = torch.tensor([0.0125])
        t[f"{PRE}.shard_1.weight_scale_2"] = torch.tensor([0.5])

    report = inspect(broken(tmp_path, mutate, "nvfp4_split"), meminfo(), scan=True)
    s = report.scan
    assert (s.nan_block_scales, s.negative_block_scales) == (1, 1)
    (c,) = s.per_tensor
    assert (c.tensor, c.first_nan_row, c.first_negative_row) == (f"{PRE}.shard_1.weight_scale", 6, 9)
    assert ("global_scale_value", PRE) in codes(report)  # 0.0125 vs 0.5 in one table

    for value, n_bad in ((float("nan"), 1), (0.0, 1), (-1.0, 1), (float("inf"), 1)):
        def bad_scale(c, t, value=value):
            t[f"{PRE}.weight_scale_2"] = torch.tensor([value])

        rep = inspect(broken(tmp_path / repr(value), bad_scale), meminfo(), scan=True)
        assert rep.scan.bad_global_scales == n_bad
        assert codes(rep) == [("global_scale_value", f"{PRE}.weight_scale_2")]


def test_scan_fp8_nan_values(tmp_path: Path, meminfo) -> None:
    def mutate(c, t):
        w = t[f"{PRE}.shard_3.weight"].view(torch.uint8)
        w[2, 5] = 0xFF
        w[8, 0] = 0x7F

    report = inspect(broken(tmp_path, mutate, "fp8"), meminfo(), scan=True)
    s = report.scan
    assert (s.fp8_values, s.nan_fp8_values) == (ROWS * 32, 2)
    assert codes(report) == [("nan_values", f"{PRE}.shard_3.weight")]
    assert "first in row 2" in report.problems[0].message
    assert s.global_scales[0]["dtype"] == "BF16" and s.global_scales[0]["value"] == pytest.approx(0.02, rel=1e-2)


# -- --venv ------------------------------------------------------------------------------------------


def fake_engine_venv(root: Path, target_text: str, version: str = "1.5.1") -> Path:
    """A venv as pip leaves it: site-packages with the 1cat-vllm dist-info, RECORD and the target."""
    site = root / "lib" / "python3.12" / "site-packages"
    target = site / "vllm" / "models" / "qwen4_exp" / "nvidia" / "ple_layer.py"
    target.parent.mkdir(parents=True)
    target.write_text(target_text)
    dist = site / f"1cat_vllm-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: 1cat-vllm\nVersion: {version}\n\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(target_text.encode()).digest()).rstrip(b"=").decode()
    (dist / "RECORD").write_text(f"vllm/models/qwen4_exp/nvidia/ple_layer.py,sha256={digest},{len(target_text)}\n")
    (root / "bin").mkdir()
    (root / "pyvenv.cfg").write_text("version = 3.12.0\n")
    return root


def test_venv_stock_engine_cannot_read_nvfp4(tmp_path: Path, meminfo) -> None:
    from ple4patch.sentinel import sentinel_line

    stock = fake_engine_venv(tmp_path / "stock", "# stock ple_layer.py\n")
    patched = fake_engine_venv(tmp_path / "patched", f"# patched\n{sentinel_line()}\n")
    nvfp4 = cf.make(tmp_path / "nvfp4", "nvfp4_rowpacked")
    fp8 = cf.make(tmp_path / "fp8", "fp8")

    report = inspect(nvfp4, meminfo(), venv=stock)
    assert [p.code for p in report.problems] == ["engine"]
    assert f"ple4patch apply --allow-unknown {stock}" in report.problems[0].message  # unpinned: the opt-in
    assert report.engine["reads"] == ["fp8"] and report.engine["can_read"] is False
    assert report.engine["patch_id"] is None

    report = inspect(fp8, meminfo(), venv=stock)
    assert report.ok and report.engine["version"] == "1.5.1" and report.engine["state"] == "unpinned"

    # A sentinel alone is not a file ple4patch made (edited after patching, or its pins are gone):
    # what it reads is not known, whatever the layout, and the change is to reinstall the engine.
    for ckpt, then_apply in ((nvfp4, True), (fp8, False)):
        report = inspect(ckpt, meminfo(), venv=patched)
        assert report.engine["state"] == "modified" and report.engine["patch_id"] == PATCH_ID
        assert (report.engine["reads"], report.engine["can_read"]) == ([], False)
        (p,) = report.problems
        assert p.code == "engine" and "reinstall the engine" in p.message and "--force-reinstall" in p.message
        assert (f"then `ple4patch apply {patched}`" in p.message) is then_apply
        text = ckpt_report.render_text(report)
        assert "reads: not known" in text and "reads this layout" not in text


# The engine's patch set on a real installed wheel: the stand-in layer and the config-era
# VllmConfig module (tests/fixtures/config_era, after ChainZeaxion/1Cat-vLLM ebeb346a's
# vllm/config/vllm.py), pinned at session start (`kit.standin_config_set_manifests`). The engine
# line judges the set, and its next step is the one `ple4patch status` gives.


@pytest.fixture
def config_set(wheelhouse, engine_venv, tmp_path_factory, monkeypatch):
    """(venv, pin the layer only, pin both files): the config-era set installed by pip."""
    import kit

    paths, _pins = kit.standin_config_set_manifests(tmp_path_factory.getbasetemp())

    def pin(*which: Path) -> None:
        monkeypatch.setenv("PLE4PATCH_EXTRA_MANIFESTS", ":".join(map(str, which)))

    venv = engine_venv(wheelhouse.engine_set_of("config"))
    return venv, (lambda: pin(paths[0])), (lambda: pin(*paths))


def _status_next(venv: Path) -> str:
    from ple4patch import commands

    (line,) = [ln for ln in commands.status.run(venv).message.splitlines() if ln.startswith("next:")]
    return line.removeprefix("next:").strip()


def _undo(target: Path) -> None:
    """Put one file of an applied set back as the engine ships it (a half-applied set)."""
    from ple4patch.paths import backup_path

    backup_path(target).replace(target)


def test_the_engine_line_of_a_set_with_an_unpinned_member_needs_the_opt_in(config_set, tmp_path, meminfo):
    from ple4patch import commands
    from ple4patch.errors import UnpinnedFile

    venv, pin_layer, _pin_both = config_set
    pin_layer()  # the layer is pinned, vllm/config/vllm.py is not: apply refuses without the opt-in
    report = inspect(cf.make(tmp_path / "nvfp4", "nvfp4_rowpacked"), meminfo(), venv=venv)
    (p,) = report.problems
    assert p.code == "engine" and p.message.endswith(f"next: {_status_next(venv)}"), p.message
    assert f"`ple4patch apply --allow-unknown {venv}`" in p.message
    e = report.engine
    assert (e["state"], e["set_state"], e["next_step"]) == ("pristine", "unpinned", _status_next(venv))
    text = ckpt_report.render_text(report)
    assert "set unpinned" in " ".join(text.split()) and "--allow-unknown" in " ".join(text.split())
    with pytest.raises(UnpinnedFile):  # the plain apply the layer alone would suggest
        commands.apply.run(venv)
    fp8 = ckpt_report.render_text(inspect(cf.make(tmp_path / "fp8", "fp8"), meminfo(), venv=venv))
    assert "next:" not in fp8  # the engine reads an FP8 table as installed: nothing to do for it
    assert commands.apply.run(venv, allow_unknown=True).exit_code == 0
    report = inspect(cf.make(tmp_path / "nvfp4b", "nvfp4_rowpacked"), meminfo(), venv=venv)
    assert report.ok and (report.engine["state"], report.engine["set_state"]) == ("patched", "patched")


@pytest.mark.parametrize("undone, problem", [("layer", True), ("config", False)])
def test_the_engine_line_of_a_half_applied_set_gives_the_sets_next_step(config_set, tmp_path, meminfo,
                                                                         undone, problem):
    import kit
    from ple4patch import commands
    from ple4patch.paths import CONFIG_REL, TARGET_REL

    venv, _pin_layer, pin_both = config_set
    pin_both()
    assert commands.apply.run(venv).exit_code == 0
    _undo(kit.site_packages(venv) / (TARGET_REL if undone == "layer" else CONFIG_REL))
    report = inspect(cf.make(tmp_path / "nvfp4", "nvfp4_rowpacked"), meminfo(), venv=venv)
    step = _status_next(venv)
    assert step == f"ple4patch apply {venv}  (or revert): either makes the whole set one state"
    found = report.problems if problem else report.warnings
    assert [p.code for p in found] == ["engine"] and found[0].message.endswith(f"next: {step}"), found
    e = report.engine
    assert (e["state"], e["set_state"], e["next_step"]) == ("pristine" if problem else "patched", "mixed", step)
    assert report.ok is not problem  # the layer patched reads the table; the set is still half applied
    assert f"next: {step.replace('  ', ' ')}" in " ".join(ckpt_report.render_text(report).split())
    assert commands.apply.run(venv).data["set"]["state"] == "patched"  # the step does what it says


def test_venv_without_engine(tmp_path: Path, meminfo) -> None:
    from ple4patch.errors import EngineNotFound

    (tmp_path / "venv" / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    with pytest.raises(EngineNotFound):
        inspect(cf.make(tmp_path / "c"), meminfo(), venv=tmp_path / "venv")


# -- CLI and light imports ------------------------------------------------------------------------


def test_cli_text_json_and_exit_codes(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ple4patch.cli import main

    good = cf.make(tmp_path / "good", "nvfp4_rowpacked")
    bad = broken(tmp_path / "bad", lambda c, t: t.pop(f"{PRE}.shard_2.weight"))
    runner = CliRunner()

    res = runner.invoke(main, ["inspect", str(good), "--tp", "4"])
    assert res.exit_code == EXIT_OK, res.output
    assert "nvfp4_rowpacked, 88 rows x 18 B, 5/5 shards" in " ".join(res.output.split())
    assert res.output.rstrip().endswith(
        "OK: will load once the engine is patched (`ple4patch apply` on the engine's venv)")
    assert "VENV" not in res.output  # no placeholder in what it says

    res = runner.invoke(main, ["inspect", str(bad)])
    assert res.exit_code == EXIT_CHECKPOINT
    assert f"{PRE}.shard_2.weight: missing" in res.output and "WILL NOT LOAD: 1 problem" in res.output

    res = runner.invoke(main, ["inspect", str(bad), "--json", "--scan"])
    assert res.exit_code == EXIT_CHECKPOINT
    data = json.loads(res.stdout)
    assert data["schema_version"] == 1 and data["command"] == "inspect" and data["ok"] is False
    assert data["exit_code"] == EXIT_CHECKPOINT
    assert data["problems"] == [{"code": "missing_shard", "tensor": f"{PRE}.shard_2.weight", "file": None,
                                 "message": "missing: shard 2 of split_ngram_parts = 5",
                                 "expected": "U8 [18, 18] (D/2 + D/16 for D = 32)"}]
    assert data["tables"][0]["shards_missing"] == [2] and data["scan"]["block_scales"] == (ROWS - 18) * 2

    res = runner.invoke(main, ["inspect", str(tmp_path / "nope"), "--json"])
    assert res.exit_code == EXIT_USAGE and json.loads(res.stdout)["error"]["kind"] == "usage"
    res = runner.invoke(main, ["inspect", str(good), "--venv", str(tmp_path / "novenv")])
    assert res.exit_code == EXIT_ENGINE_NOT_FOUND


def test_tp_not_given_is_said_not_assumed_silently(tmp_path: Path) -> None:
    """Without --tp the figures are for one rank: the pinned line says so (not an error)."""
    from click.testing import CliRunner

    from ple4patch.cli import main

    root = cf.make(tmp_path / "c", "nvfp4_rowpacked")
    runner = CliRunner()
    res = runner.invoke(main, ["inspect", str(root)])
    assert res.exit_code == EXIT_OK
    assert "pinned      TP1 (--tp not given: pass --tp N for N GPUs): " in res.output
    res = runner.invoke(main, ["inspect", str(root), "--tp", "1"])
    assert "pinned      TP1: " in res.output and "--tp not given" not in res.output
    for args, given in (([], False), (["--tp", "1"], True)):
        data = json.loads(runner.invoke(main, ["inspect", str(root), "--json", *args]).stdout)
        assert (data["memory"]["tp"], data["memory"]["tp_given"]) == (1, given)


def test_inspect_imports_no_torch_numpy_libcst(tmp_path: Path) -> None:
    root = cf.make(tmp_path / "c")
    code = (
        "import sys\nfrom ple4patch.ckpt import inspect as ckpt_inspect\n"
        f"r = ckpt_inspect.run({str(root)!r}, tp=4, scan=True)\n"
        "assert r.exit_code == 0, r.output\n"
        "bad = [m for m in ('torch', 'numpy', 'libcst', 'triton') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_expectations_align_with_the_loader() -> None:
    """The names inspect expects are the names the injected loader reads."""
    loader = (REPO / "ple4patch" / "kernels" / "nvfp4_loader.py")
    if not loader.is_file():
        pytest.skip("the loader is not written yet")
    text = loader.read_text()
    assert f'"ngram_embedding.{ple_layout.TABLE_GLOBAL_SCALE}"' in text
    assert '"ngram_embedding.shard_"' in text
    assert f'_ple4_NVFP4_DTYPE = "{ple_layout.LAYOUT_CONFIG_DTYPE[ple_layout.LAYOUT_ROWPACKED]}"' in text
    for leaf in (ple_layout.SHARD_WEIGHT, ple_layout.SHARD_BLOCK_SCALE, ple_layout.SHARD_GLOBAL_SCALE):
        assert f'"{leaf}"' in text
    assert f'"ngram_embedding.{ple_layout.TABLE_FP8_SCALE}"' in text  # refused under nvfp4_rowpacked


def test_scan_progress_bar_on_a_terminal(tmp_path: Path, meminfo, monkeypatch) -> None:
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    report = inspect(cf.make(tmp_path / "c"), meminfo(), scan=True, progress=True)
    assert report.ok and report.scan.bytes_read == ROWS * 18
    assert "scanning PLE data" in err.getvalue() and "100%" in err.getvalue()
    monkeypatch.setattr(sys, "stderr", Terminal())
    inspect(cf.make(tmp_path / "d"), meminfo(), scan=True, progress=False)
    assert sys.stderr.getvalue() == ""


# -- what to do about each problem (the preflight's change:) ------------------------------------------

def test_each_problem_kind_names_an_action() -> None:
    from ple4patch.ckpt.problem import Problem
    from ple4patch.ckpt.remedy import change_of

    t = f"{PRE}.shard_3.weight"
    cases = [
        (Problem("missing_shard", "missing: shard 3", t, "U8 [18, 18]"),
         "re-download the checkpoint file that should hold ngram_embedding.shard_3.weight (expected U8 [18, 18])"),
        (Problem("dtype", "is BF16 [18, 32]", t, "U8 [18, 18]", "model-00002-of-00003.safetensors"),
         "re-download model-00002-of-00003.safetensors, or export the table again: ngram_embedding.shard_3.weight "
         "should be U8 [18, 18]"),
        (Problem("missing_file", "listed in the index but not on disk", file="model-00001-of-00003.safetensors"),
         "re-download model-00001-of-00003.safetensors"),
        (Problem("index", "cannot read weight_map", file="model.safetensors.index.json"),
         "re-download model.safetensors.index.json"),
        (Problem("config", "ple_embedding_dtype is set at the top level, but the engine reads text_config: "
                 "move it into text_config", file="config.json"), "config.json: move it into text_config"),
        (Problem("config", "lacks text_config.ngram_size, which the PLE layer reads", file="config.json",
                 expected="the value from the model's published config"),
         "take config.json from the model's published checkpoint (lacks text_config.ngram_size, which the PLE "
         "layer reads)"),
        (Problem("layout", "the table's shard weights are BF16", t, "U8 ..."), "use the model's NVFP4 or FP8 checkpoint"),
    ]
    for problem, change in cases:
        assert change_of(problem) == change
        assert problem.expected is None or change_of(problem) != problem.expected


def test_a_table_beside_a_config_without_ple_keys_reports_the_keys_not_default_shards(tmp_path: Path, meminfo) -> None:
    """A PLE table with another model's config.json: the missing keys are the problems; the shards
    are not judged against the default split_ngram_parts (512), which such a config does not speak
    of. A PLE config that only leaves split_ngram_parts out gets the engine's default, and its
    missing shards are real."""
    tensors = dict(cf.table_tensors(cf.config(), "nvfp4_rowpacked"), **cf.other_tensors())
    half = cf.write(tmp_path / "half", {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, tensors)
    report = inspect(half, meminfo())
    assert {p.code for p in report.problems} == {"config", "config_dtype"}, codes(report)
    assert report.problems[0].message.startswith("lacks ple_layer_ids")
    (t,) = report.tables
    held = sum(v.shape[0] for k, v in tensors.items() if ".ngram_embedding.shard_" in k and k.endswith(".weight"))
    assert (t.shards_missing, t.rows) == ([], held)  # the rows it holds, none estimated for default shards
    cfg = cf.config()
    del cfg["text_config"]["split_ngram_parts"]
    report = inspect(cf.write(tmp_path / "no-parts", cfg, tensors), meminfo())
    assert report.ckpt.config.split_ngram_parts == ple_layout.DEFAULT_SPLIT_NGRAM_PARTS
    assert "missing_shard" in {p.code for p in report.problems}, codes(report)
