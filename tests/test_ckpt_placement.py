"""`inspect --tp N`: exact pinned bytes per rank and host, and the host/VRAM split under a host budget.

The arithmetic (ple4patch.ckpt.placement) is checked on its own, against the
real engine's budget code where ../shared/engines has it, and through inspect
on a header with the real model's shapes.
"""

from __future__ import annotations

import ast
import json
import math
import os
import struct
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

import ckpt_factory as cf
from ple4patch.ckpt import inspect as ckpt_inspect
from ple4patch.ckpt.placement import (GIB, PAGE_BYTES, PIN_PAGE, PIN_POWER_OF_TWO, gib_bytes, host_budget,
                                      page_rounded, place_rows, power_of_two_rounded)
from ple4patch.ckpt.venv_engine import fp8_pin_rule
from ple4patch.ckpt.report import render_text
from ple4patch.cli import main
from ple4patch.errors import EXIT_USAGE, UsageError
from test_checkpoint_inspect import sparse_rowpacked

ENGINES = Path(__file__).resolve().parents[1].parent / "shared" / "engines"
REAL_RANK_ROWS = 80_000_384  # the real table's TP4 share (320,001,536 rows / 4)


@pytest.fixture
def meminfo(tmp_path: Path):
    def make(available_gib: float = 64, total_gib: float = 128) -> str:
        path = tmp_path / "meminfo"
        path.write_text(f"MemTotal: {int(total_gib * 1024**2)} kB\nMemAvailable: {int(available_gib * 1024**2)} kB\n")
        return str(path)

    return make


@pytest.fixture
def real(tmp_path: Path) -> Path:
    """The real model's config and shard shapes (128 x [2500012, 90]), the data as holes."""
    root = tmp_path / "real"
    root.mkdir()
    cfg = cf.config(head_dim=160, heads_per_ngram=8, base=20_000_000, divisor=128, parts=128)
    (root / "config.json").write_text(json.dumps(cfg))
    sparse_rowpacked(root / "model.safetensors", 128, 2_500_012)
    return root


# -- the arithmetic ----------------------------------------------------------------------------------


def test_page_rounding() -> None:
    assert [page_rounded(n) for n in (0, 1, 4095, 4096, 4097)] == [0, 4096, 4096, 4096, 8192]
    exact = REAL_RANK_ROWS * 90  # 7,200,034,560 B
    pinned = page_rounded(exact)
    assert pinned == 7_200_034_816 and pinned % PAGE_BYTES == 0 and 0 <= pinned - exact < PAGE_BYTES
    assert pinned <= 1.001 * exact


@pytest.mark.parametrize(
    "rows,budget,host",
    [
        (1000, None, 1000),  # no budget: the whole share in host memory
        (1000, 0, 0),  # budget 0: every row in VRAM
        (1000, 89, 0),  # less than one row
        (1000, 90, 1),
        (1000, 90 * 400 + 89, 400),  # floor(budget / row bytes)
        (1000, 90 * 1000, 1000),
        (1000, 10**15, 1000),  # more than the table: min(rows, ...)
        (0, 4096, 0),
    ],
)
def test_place_rows(rows, budget, host) -> None:
    p = place_rows(rows, 90, budget)
    assert (p.host_rows, p.vram_rows) == (host, rows - host)
    assert p.host_bytes == host * 90 and p.vram_bytes == (rows - host) * 90
    assert p.pinned_bytes == page_rounded(host * 90)


def test_place_rows_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        place_rows(10, 0, None)
    with pytest.raises(ValueError):
        place_rows(10, 90, -1)


def test_budget_in_gib_as_the_engine_converts_it() -> None:
    assert gib_bytes(0, "x") == 0 and gib_bytes(1, "x") == GIB == 2**30
    assert gib_bytes(1.5, "x") == 1_610_612_736 and gib_bytes(6.71, "x") == int(6.71 * 2**30)
    for bad in (-1, float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="finite, non-negative"):
            gib_bytes(bad, "VLLM_QWEN4EXP_PLE_HOST_GIB")
    assert host_budget(None, {}) == (None, None)
    assert host_budget(None, {"VLLM_QWEN4EXP_PLE_HOST_GIB": " "}) == (None, None)
    assert host_budget(None, {"VLLM_QWEN4EXP_PLE_HOST_GIB": "12"}) == (12 * GIB, "VLLM_QWEN4EXP_PLE_HOST_GIB")
    assert host_budget(2, {"VLLM_QWEN4EXP_PLE_HOST_GIB": "12"}) == (2 * GIB, "--host-budget-gib")
    with pytest.raises(ValueError, match="VLLM_QWEN4EXP_PLE_HOST_GIB"):
        host_budget(None, {"VLLM_QWEN4EXP_PLE_HOST_GIB": "lots"})


def _engine_function(path: Path, name: str, namespace: dict):
    """A top-level function of a real engine file, defined in ``namespace`` (test data, not product code)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace)
    return namespace[name]


def test_budget_conversion_matches_the_real_engine() -> None:
    """_ple_host_budget_bytes of 1Cat-vLLM at 036318a0 (vllm/models/qwen4_exp/nvidia/ple_layer.py),
    run on the values a user sets: the same bytes, and the same values refused."""
    path = ENGINES / "1cat-vllm-main-036318a0" / "ple_layer.py"
    if not path.is_file():
        pytest.skip("../shared/engines is absent")
    for gib in (0, 0.5, 1, 1.5, 2, 6.71, 12, 100.25, 1e-9):
        envs = SimpleNamespace(VLLM_QWEN4EXP_PLE_HOST_GIB=float(gib))
        engine = _engine_function(path, "_ple_host_budget_bytes", {"envs": envs, "math": math})
        assert engine() == gib_bytes(float(gib), "x") == host_budget(None, {"VLLM_QWEN4EXP_PLE_HOST_GIB": str(gib)})[0]
    for bad in (-1.0, float("nan"), float("inf")):
        engine = _engine_function(path, "_ple_host_budget_bytes",
                                  {"envs": SimpleNamespace(VLLM_QWEN4EXP_PLE_HOST_GIB=bad), "math": math})
        with pytest.raises(ValueError):
            engine()
        with pytest.raises(ValueError):
            gib_bytes(bad, "x")


def test_later_release_uses_a_configured_budget_as_given() -> None:
    """_plan_placement at 15a8d185: a configured host budget goes to plan_ple_placement unchanged (no cap)."""
    path = ENGINES / "1cat-vllm-main-15a8d185" / "ple_layer.py"
    if not path.is_file():
        pytest.skip("../shared/engines is absent")
    text = path.read_text(encoding="utf-8")
    plan = text[text.index("    def _plan_placement("):text.index("    def materialize_tables(")]
    assert "explicit_host = ple_host_budget_bytes()" in plan
    assert "host_budget = explicit_host" in plan
    assert "host_budget_bytes=host_budget" in plan and "row_bytes=row_bytes" in plan


# -- through inspect --------------------------------------------------------------------------------


def inspect(root: Path, meminfo: str, **kw):
    kw.setdefault("environ", {})
    return ckpt_inspect.inspect_checkpoint(root, meminfo_path=meminfo, **kw)


def test_exact_pinned_bytes_without_a_budget(real, meminfo) -> None:
    report = inspect(real, meminfo(available_gib=64), tp=4)
    m = report.memory
    assert m["rows_per_rank"] == REAL_RANK_ROWS and m["bytes_per_rank"] == REAL_RANK_ROWS * 90
    assert m["host_budget_bytes"] is None and m["host_rows_per_rank"] == REAL_RANK_ROWS
    assert m["pinned_bytes_per_rank"] == page_rounded(REAL_RANK_ROWS * 90) == 7_200_034_816
    assert m["pinned_bytes_per_host"] == 4 * 7_200_034_816
    assert m["vram_rows_per_rank"] == 0 and m["vram_bytes_per_rank"] == 0 and m["page_bytes"] == 4096
    text = render_text(report)
    flat = " ".join(text.split())  # the report wraps its lines at 100 columns
    assert "exactly 7,200,034,816 B per rank" in flat and "28,800,139,264 B for 4 rank(s)" in flat


def test_a_budget_splits_each_rank_and_makes_it_fit(real, meminfo) -> None:
    """22 GiB available: four ranks of 6.71 GiB do not fit; with 4 GiB of host each, they do."""
    assert not inspect(real, meminfo(available_gib=22, total_gib=128), tp=4).ok
    report = inspect(real, meminfo(available_gib=22, total_gib=128), tp=4, host_budget_gib=4)
    assert report.ok, [p.line() for p in report.problems]
    m = report.memory
    host = 4 * GIB // 90
    assert (m["host_rows_per_rank"], m["vram_rows_per_rank"]) == (host, REAL_RANK_ROWS - host) == (47_721_858,
                                                                                                     32_278_526)
    assert m["pinned_bytes_per_rank"] == page_rounded(host * 90) <= 4 * GIB
    assert m["pinned_bytes_per_host"] == 4 * m["pinned_bytes_per_rank"]
    assert m["vram_bytes_per_rank"] == (REAL_RANK_ROWS - host) * 90
    assert (m["host_budget_bytes"], m["host_budget_source"]) == (4 * GIB, "--host-budget-gib")
    assert m["bytes_per_rank"] == REAL_RANK_ROWS * 90  # the share itself is unchanged
    text = render_text(report)
    assert "47,721,858 of 80,000,384 rows per rank in host memory" in text
    assert "vram        32,278,526 rows per rank in GPU memory" in text and "(--host-budget-gib)" in text


def test_budget_zero_and_from_the_engines_variable(real, meminfo) -> None:
    report = inspect(real, meminfo(), tp=4, environ={"VLLM_QWEN4EXP_PLE_HOST_GIB": "0"})
    m = report.memory
    assert (m["host_rows_per_rank"], m["pinned_bytes_per_rank"], m["pinned_bytes_per_host"]) == (0, 0, 0)
    assert m["vram_rows_per_rank"] == REAL_RANK_ROWS and m["vram_bytes_per_rank"] == REAL_RANK_ROWS * 90
    assert m["host_budget_source"] == "VLLM_QWEN4EXP_PLE_HOST_GIB"
    # the option wins over the variable
    report = inspect(real, meminfo(), tp=4, host_budget_gib=100, environ={"VLLM_QWEN4EXP_PLE_HOST_GIB": "0"})
    assert report.memory["host_rows_per_rank"] == REAL_RANK_ROWS
    for bad in ("-1", "nan", "a lot", "inf"):
        with pytest.raises(UsageError, match="VLLM_QWEN4EXP_PLE_HOST_GIB"):
            inspect(real, meminfo(), tp=4, environ={"VLLM_QWEN4EXP_PLE_HOST_GIB": bad})


def test_a_budget_beyond_the_hosts_share_is_a_warning(real, meminfo) -> None:
    """check_ple_host_share: share = (MemAvailable - MemTotal/4) // ranks; 64 - 32 = 32 GiB over 4 ranks = 8."""
    ok = inspect(real, meminfo(available_gib=64, total_gib=128), tp=4, host_budget_gib=8)
    assert ok.ok and ok.warnings == []
    over = inspect(real, meminfo(available_gib=64, total_gib=128), tp=4, host_budget_gib=8.5)
    assert over.ok and [w.code for w in over.warnings] == ["host_budget"]
    assert "check_ple_host_share" in over.warnings[0].message and "8.00 GiB" in over.warnings[0].message
    reserve = inspect(real, meminfo(available_gib=64, total_gib=128), tp=4, host_budget_gib=8,
                      environ={"VLLM_QWEN4EXP_PLE_HOST_RESERVE_GIB": "40"})
    assert [w.code for w in reserve.warnings] == ["host_budget"]  # (64 - 40) // 4 = 6 GiB < 8


def test_each_table_gets_the_whole_budget(tmp_path: Path, meminfo) -> None:
    """Two PLE layers: each table plans its own placement, as each engine module does."""
    cfg = cf.config(ple_layer_ids=[2, 5])
    tensors = cf.table_tensors(cfg, layer=1)
    tensors.update(cf.table_tensors(cfg, layer=4))
    root = cf.write(tmp_path / "c", cfg, tensors)
    report = inspect(root, meminfo(), tp=2, host_budget_gib=(18 * 10 + 17) / GIB)  # 10 rows of 18 B, nearly 11
    tables = report.memory["per_table"]
    assert [t["host_rows"] for t in tables] == [10, 10] and [t["layer"] for t in tables] == [1, 4]
    assert report.memory["host_rows_per_rank"] == 20
    assert report.memory["vram_rows_per_rank"] == report.memory["rows_per_rank"] - 20
    assert report.memory["pinned_bytes_per_rank"] == 2 * 4096  # one page each


def test_cli_option_variable_and_usage_errors(real, tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(main, ["inspect", str(real), "--tp", "4", "--host-budget-gib", "4", "--json"],
                        env={"VLLM_QWEN4EXP_PLE_HOST_GIB": None})
    data = json.loads(res.stdout)
    assert data["memory"]["host_rows_per_rank"] == 47_721_858 and data["memory"]["host_budget_source"] == \
        "--host-budget-gib"
    res = runner.invoke(main, ["inspect", str(real), "--tp", "4", "--json"], env={"VLLM_QWEN4EXP_PLE_HOST_GIB": "0"})
    assert json.loads(res.stdout)["memory"]["pinned_bytes_per_rank"] == 0
    res = runner.invoke(main, ["inspect", str(real), "--host-budget-gib", "-1"])
    assert res.exit_code == EXIT_USAGE
    res = runner.invoke(main, ["inspect", str(real), "--host-budget-gib", "inf"])
    assert res.exit_code == EXIT_USAGE and "finite" in res.output
    res = runner.invoke(main, ["inspect", str(real)], env={"VLLM_QWEN4EXP_PLE_HOST_GIB": "lots"})
    assert res.exit_code == EXIT_USAGE and "VLLM_QWEN4EXP_PLE_HOST_GIB" in res.output
    # each bad value says what to do, and a bad reserve is a usage error too (the engine refuses both)
    said = " ".join(res.output.split())
    assert ("got 'lots' (the engine refuses it too): unset VLLM_QWEN4EXP_PLE_HOST_GIB (no budget) or set it "
            "to a non-negative number of GiB") in said
    res = runner.invoke(main, ["inspect", str(real), "--host-budget-gib", "nan"])
    assert res.exit_code == EXIT_USAGE and "give --host-budget-gib a non-negative number of GiB" in " ".join(
        res.output.split())
    res = runner.invoke(main, ["inspect", str(real), "--json"], env={"VLLM_QWEN4EXP_PLE_HOST_RESERVE_GIB": "-2"})
    assert res.exit_code == EXIT_USAGE, res.output
    assert "unset VLLM_QWEN4EXP_PLE_HOST_RESERVE_GIB" in json.loads(res.stdout)["error"]["message"]
    res = runner.invoke(main, ["inspect", str(real), "--tp", "4"], env={"VLLM_QWEN4EXP_PLE_HOST_GIB": None})
    assert "exactly 7,200,034,816 B per rank" in res.output


# -- an FP8 table: pinned through torch's caching host allocator ---------------------------------------

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools import engine_corpus  # noqa: E402  (tests/data/engines/INDEX.md, or ../shared/engines)

FP8_RANK_BYTES = REAL_RANK_ROWS * 160  # 12,800,061,440 B (11.92 GiB) per TP4 rank


def test_power_of_two_rounding_is_the_measured_stock_pin() -> None:
    """BENCHMARKS.md, fp8-stock-alloc: torch.empty((80000384, 160), uint8, pin_memory=True)
    pinned 17,179,869,184 B (torch.cuda.host_memory_stats, H200 host)."""
    assert power_of_two_rounded(FP8_RANK_BYTES) == 17_179_869_184
    assert [power_of_two_rounded(n) for n in (0, 1, 2, 3, 4096, 4097)] == [0, 1, 2, 4, 4096, 8192]
    placed = place_rows(REAL_RANK_ROWS, 160, None, PIN_POWER_OF_TWO)
    assert (placed.host_bytes, placed.pinned_bytes) == (FP8_RANK_BYTES, 17_179_869_184)
    assert place_rows(10, 160, 0, PIN_POWER_OF_TWO).pinned_bytes == 0  # no host rows: nothing pinned
    with pytest.raises(ValueError, match="pinned_by"):
        place_rows(10, 160, None, "exact")


def test_fp8_pin_rule_of_each_release() -> None:
    """036318a0, 15a8d185 (materialize_tables) and a223f046 (the whole weight) pin the FP8 table
    with torch.empty(pin_memory=True); cookys 1b5731f9 and Qixiao02 0aac941e register it exactly."""
    want = {"1cat-vllm-fork-a223f046": PIN_POWER_OF_TWO, "1cat-vllm-main-036318a0": PIN_POWER_OF_TWO,
            "1cat-vllm-main-15a8d185": PIN_POWER_OF_TWO, "fork-cookys-1b5731f9": PIN_PAGE,
            "fork-qixiao02-0aac941e": PIN_PAGE, "main-45d0a3bb": PIN_POWER_OF_TWO,
            "fork-cookys-aa0bf8f0": PIN_PAGE, "fork-rapatel0-b850ff73": PIN_POWER_OF_TWO,
            "fork-peuqui-5099866f": PIN_POWER_OF_TWO, "fork-areslp-ab4792a6": PIN_POWER_OF_TWO,
            "fork-qixiao02-7ee70bdc": PIN_PAGE, "fork-zyx-a-dd691db6": PIN_POWER_OF_TWO,
            "fork-abcd19886-6a29be22": PIN_POWER_OF_TWO}
    seen = 0
    for folder, rule in want.items():
        path = ENGINES / folder / "ple_layer.py" if folder.startswith("1cat") else engine_corpus.stored(folder, "ple_layer.py")
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        assert ("pin_memory=True" in text or "pin_memory=placement.host_rows > 0" in text), folder
        assert fp8_pin_rule(text) == rule, folder
        seen += 1
    if not seen:
        pytest.skip("no real engine file here")


@pytest.fixture
def real_fp8(tmp_path: Path) -> Path:
    """The real model's FP8 table (128 x [2500012, 160] F8_E4M3 + weight_scale), the data as holes."""
    root = tmp_path / "real-fp8"
    root.mkdir()
    cfg = cf.config(head_dim=160, heads_per_ngram=8, base=20_000_000, divisor=128, parts=128,
                    dtype="float8_e4m3fn")
    (root / "config.json").write_text(json.dumps(cfg))
    pre, header, offset = cf.table_prefix(1), {}, 0
    for i in range(128):
        n = 2_500_012 * 160
        header[f"{pre}.shard_{i}.weight"] = {"dtype": "F8_E4M3", "shape": [2_500_012, 160],
                                             "data_offsets": [offset, offset + n]}
        offset += n
    header[f"{pre}.weight_scale"] = {"dtype": "BF16", "shape": [1], "data_offsets": [offset, offset + 2]}
    raw = json.dumps(header).encode()
    with open(root / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
    os.truncate(root / "model.safetensors", 8 + len(raw) + offset + 2)
    return root


def test_an_fp8_table_pins_what_torchs_allocator_rounds_to(real_fp8, meminfo) -> None:
    """README's headline: stock FP8 asks 11.92 GiB a TP4 rank and pins 16.00 GiB (64 GiB for four)."""
    report = inspect(real_fp8, meminfo(available_gib=80), tp=4)
    assert report.ok, [p.line() for p in report.problems]
    m = report.memory
    assert (m["bytes_per_rank"], m["host_bytes_per_rank"]) == (FP8_RANK_BYTES, FP8_RANK_BYTES)
    assert m["pinned_bytes_per_rank"] == 16 * GIB and m["pinned_bytes_per_host"] == 64 * GIB
    assert m["per_table"][0]["pinned_by"] == PIN_POWER_OF_TWO
    flat = " ".join(render_text(report).split())
    assert "exactly" not in flat
    assert ("17,179,869,184 B pinned per rank (torch's pinned allocator rounds the FP8 table's "
            "12,800,061,440 B up to a power of two)") in flat
    # 64 GiB for four ranks does not fit in 60 GiB, though 4 x 11.92 GiB would
    assert [p.code for p in inspect(real_fp8, meminfo(available_gib=60), tp=4).problems] == ["memory"]
    # under a budget the host rows are rounded the same way
    budget = inspect(real_fp8, meminfo(available_gib=80), tp=4, host_budget_gib=5).memory
    assert budget["host_bytes_per_rank"] == (5 * GIB // 160) * 160 and budget["pinned_bytes_per_rank"] == 8 * GIB
