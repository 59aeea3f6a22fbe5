#!/usr/bin/env python3
"""Load benchmark: one real-size TP4 share of the NVFP4 PLE table from safetensors on local disk.

The share is what one rank of Qwen3.8-Flash-Next holds at TP4: 80,000,384 rows x 90 B = 6.71
GiB, as 128 checkpoint shards of 625,003 rows (split_ngram_parts = 512) in 4 safetensors files,
written once per layout: row-packed (``shard_<i>.weight`` uint8 [rows, 90]) and NVIDIA's split
layout (``.weight`` uint8 [rows, 80] + ``.weight_scale`` F8_E4M3 [rows, 10]). Each case runs in
a fresh process (after CUDA is initialised) and reports wall time, peak anonymous memory
(RssAnon, sampled every 5 ms; the page cache of the files is file-backed and not in it), pinned
bytes and the drop of MemAvailable:

- nvfp4-rowpacked / nvfp4-split   the injected table code: ``Ple4NvFp4Tiers`` (exact pinned
  host rows, ple4patch/kernels/nvfp4_host.py) allocated for the whole share, then every shard
  read with ``safe_open(...).get_tensor`` (as vLLM's safetensors iterator reads) and copied with
  ``copy_rows`` at the loader's row arithmetic (the loader's name parsing needs the engine);
- torch-pinned-rowpacked   the former allocation, ``torch.empty(..., pin_memory=True)`` (torch's
  caching host allocator), then the same reads and copies;
- fp8-stock-alloc   the stock FP8 share's allocation: torch.empty((80,000,384, 160), uint8,
  pin_memory=True), 11.92 GiB requested (allocation only);
- plain-read   the floor: the row-packed files' bytes read with readinto into fresh anonymous
  memory, 64 MiB at a time; plain-read-hugepage the same into memory advised MADV_HUGEPAGE (as
  the table's host tier is), which saves most of the page faults: the stricter floor.

Page cache: the files are read warm (just written) in every case; ``--cold`` adds the nvfp4 and
plain-read cases after dropping the files' pages (posix_fadvise DONTNEED). Targets: pinned bytes
<= 1.001 x rows x 90 B; peak RssAnon during load <= pinned table + the largest checkpoint tensor
+ 10 %; load wall time <= 1.5 x the plain-read floor. Writes load.json and load.txt.

Usage: python3 benchmarks/bench_load.py [--out DIR] [--dir /tmp/ple4-load] [--cold] [--keep]
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import harness as hb

ROWS = 80_000_384
SHARD_ROWS = 625_003  # ceil(320,001,536 / 512): 128 shards make rank 0's share
DIM = 160
W, CODES = DIM // 2 + DIM // 16, DIM // 2
FILES = 4
CASES = ["plain-read", "plain-read-hugepage", "nvfp4-rowpacked", "nvfp4-split", "torch-pinned-rowpacked", "fp8-stock-alloc"]
COLD_CASES = ["plain-read-cold", "nvfp4-rowpacked-cold"]
READ_CHUNK = 64 << 20


# -- the checkpoint files ------------------------------------------------------------------------


def _stream(seed: int):
    import torch

    chunk = torch.randint(0, 256, (READ_CHUNK + 4096,), generator=torch.Generator().manual_seed(seed),
                          dtype=torch.uint8).numpy().tobytes()
    pos = 0
    while True:
        yield chunk, pos
        pos = (pos + 4093) % 4096


def _write_safetensors(path: Path, tensors: list[tuple[str, str, list[int]]], data) -> None:
    """A safetensors file of ``tensors`` ([(name, dtype, shape)]), bytes from the ``data`` stream."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape in tensors:
        nbytes = shape[0] * shape[1]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path.with_suffix(".part")
    with open(tmp, "wb") as fh:
        fh.write(len(text).to_bytes(8, "little") + text)
        left = offset
        while left:
            chunk, pos = next(data)
            k = min(left, READ_CHUNK)
            fh.write(memoryview(chunk)[pos : pos + k])
            left -= k
    tmp.rename(path)


def write_checkpoints(root: Path) -> dict[str, list[Path]]:
    """The share as 4 files per layout (skipped when they are there)."""
    layouts = {"rowpacked": [], "split": []}
    shards = -(-ROWS // SHARD_ROWS)
    per_file = -(-shards // FILES)
    for layout in layouts:
        data = _stream(1 if layout == "rowpacked" else 2)
        for f in range(FILES):
            path = root / layout / f"model-{f + 1:05d}-of-{FILES:05d}.safetensors"
            layouts[layout].append(path)
            if path.exists():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            tensors = []
            for i in range(f * per_file, min(shards, (f + 1) * per_file)):
                rows = min(SHARD_ROWS, ROWS - i * SHARD_ROWS)
                name = f"model.layers.0.ple.ple_embedding.ngram_embedding.shard_{i}"
                if layout == "rowpacked":
                    tensors.append((f"{name}.weight", "U8", [rows, W]))
                else:
                    tensors.append((f"{name}.weight", "U8", [rows, CODES]))
                    tensors.append((f"{name}.weight_scale", "F8_E4M3", [rows, W - CODES]))
            t0 = time.perf_counter()
            _write_safetensors(path, tensors, data)
            print(f"wrote {path} ({path.stat().st_size / 2**30:.2f} GiB, {time.perf_counter() - t0:.1f} s)", flush=True)
    return layouts


def drop_page_cache(paths: list[Path]) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# -- one case, in its own process ------------------------------------------------------------------


class _TorchTable:
    """The former allocation (torch's caching host allocator) with the tiers' copy interface."""

    def __init__(self, rows: int, width: int) -> None:
        import torch

        self.tensor = torch.empty((rows, width), dtype=torch.uint8, pin_memory=True)

    def copy_rows(self, first, source, columns) -> None:
        self.tensor[first : first + source.shape[0], columns].copy_(source)


def _load(table, paths: list[Path]) -> dict:
    """Every shard tensor through get_tensor, copied at the loader's row arithmetic (rank 0)."""
    import torch
    from safetensors import safe_open

    largest = 0
    for path in paths:
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():
                index_text, _, leaf = name.rsplit("shard_", 1)[1].partition(".")
                start = int(index_text) * SHARD_ROWS
                loaded = f.get_tensor(name)
                largest = max(largest, loaded.numel() * loaded.element_size())
                if loaded.dtype != torch.uint8:
                    loaded = loaded.view(torch.uint8)
                columns = slice(CODES, W) if leaf == "weight_scale" else slice(0, loaded.shape[1])
                lo, hi = max(start, 0), min(start + loaded.shape[0], ROWS)
                if lo < hi:
                    table.copy_rows(lo, loaded[lo - start : hi - start], columns)
                del loaded
    return {"largest_tensor_bytes": largest}


def _check(host, paths: list[Path]) -> int:
    """Rows of three shards against the files: the number of differing bytes."""
    import torch
    from safetensors import safe_open

    bad = 0
    for path in (paths[0], paths[-1]):
        with safe_open(str(path), framework="pt") as f:
            for name in list(f.keys())[:2]:
                index_text, _, leaf = name.rsplit("shard_", 1)[1].partition(".")
                start = int(index_text) * SHARD_ROWS
                t = f.get_tensor(name)
                if t.dtype != torch.uint8:
                    t = t.view(torch.uint8)
                cols = slice(CODES, W) if leaf == "weight_scale" else slice(0, t.shape[1])
                bad += int((host[start : start + t.shape[0], cols] != t).sum())
    return bad


def run_case(case: str, root: Path) -> dict:
    import torch

    torch.cuda.init()
    torch.empty(1, device="cuda")  # the CUDA context is there before the baseline
    cold = case.endswith("-cold")
    name = case.removesuffix("-cold")
    layout = "split" if name.endswith("split") else "rowpacked"
    paths = sorted((root / layout).glob("*.safetensors"))
    if cold:
        drop_page_cache(paths)
    base_anon, avail0 = hb.rss_anon(), hb.meminfo("MemAvailable")
    rec = {"case": case, "rows": ROWS, "row_bytes": W, "table_bytes": ROWS * W, "baseline_rss_anon": base_anon}
    t0 = time.perf_counter()
    with hb.PeakRssAnon() as peak:
        if name.startswith("plain-read"):
            buf = mmap.mmap(-1, sum(p.stat().st_size for p in paths), flags=mmap.MAP_PRIVATE)
            if name.endswith("hugepage"):
                buf.madvise(mmap.MADV_HUGEPAGE)
            view, off = memoryview(buf), 0
            for path in paths:
                with open(path, "rb", buffering=0) as fh:
                    while n := fh.readinto(view[off : off + READ_CHUNK]):
                        off += n
            rec["bytes_read"] = off
            t_alloc = 0.0
        elif name == "fp8-stock-alloc":
            table = torch.empty((ROWS, DIM), dtype=torch.uint8, pin_memory=True)
            t_alloc = time.perf_counter() - t0
            rec["requested_bytes"] = ROWS * DIM
        else:
            if name.startswith("nvfp4"):
                from ple4patch.kernels.nvfp4_host import Ple4NvFp4Tiers

                table = Ple4NvFp4Tiers(ROWS, W, 0, device="cuda", pin=True, what="bench")
                host = table.host.tensor
                rec["pinned_bytes"] = table.host.mapped_bytes
            else:
                table = _TorchTable(ROWS, W)
                host = table.tensor
            t_alloc = time.perf_counter() - t0
            rec.update(_load(table, paths))
    wall = time.perf_counter() - t0
    avail1 = hb.meminfo("MemAvailable")
    rec.update(wall_s=wall, alloc_s=t_alloc, peak_rss_anon=peak.peak, peak_rss_anon_over_baseline=peak.peak - base_anon,
               mem_available_drop=avail0 - avail1)
    if name in ("torch-pinned-rowpacked", "fp8-stock-alloc"):
        stats = torch.cuda.host_memory_stats()
        rec["host_memory_stats"] = {k: v for k, v in stats.items() if "bytes" in k}
        rec["pinned_bytes"] = stats.get("reserved_bytes.current", stats.get("allocated_bytes.current"))
    if name.startswith(("nvfp4", "torch-pinned")):
        rec["is_pinned"] = bool(host.is_pinned())
        rec["mismatched_bytes"] = _check(host, paths)
        t1 = time.perf_counter()
        if name.startswith("nvfp4"):
            table.release()
        del table, host
        rec["release_s"] = time.perf_counter() - t1
        rec["mem_available_after_release"] = hb.meminfo("MemAvailable")
    return rec


# -- the whole run ---------------------------------------------------------------------------------


def _gib(b) -> str:
    return "-" if b is None else f"{b / 2**30:.3f}"


def main() -> None:
    ap = hb.arg_parser(__doc__, "bench-out")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/ple4-load"), help="where the checkpoint files go")
    ap.add_argument("--cold", action="store_true", help="also run the nvfp4 and floor cases cold")
    ap.add_argument("--keep", action="store_true", help="keep the checkpoint files")
    ap.add_argument("--case", help=argparse_hidden())
    args = ap.parse_args()
    if args.case:
        print("RESULT " + json.dumps(run_case(args.case, args.dir)), flush=True)
        return
    import torch  # noqa: F401  (for the machine facts)
    import triton  # noqa: F401

    report = hb.Report(args.out, "load")
    env = hb.machine()
    report.line(f"machine: {env}")
    paths = write_checkpoints(args.dir)
    results = []
    for case in CASES + (COLD_CASES if args.cold else []):
        proc = subprocess.run([sys.executable, __file__, "--case", case, "--dir", str(args.dir)],
                              capture_output=True, text=True)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode or not lines:
            report.line(f"{case}: failed ({proc.returncode})\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
            continue
        rec = json.loads(lines[-1][7:])
        results.append(rec)
        print(json.dumps(rec), flush=True)
    by = {r["case"]: r for r in results}
    report.line("")
    report.line(f"one TP4 share: {ROWS:,} rows x {W} B = {ROWS * W:,} B ({ROWS * W / 2**30:.3f} GiB); "
                f"FP8: {ROWS * DIM:,} B ({ROWS * DIM / 2**30:.3f} GiB); files on local disk, warm page cache unless -cold")
    report.table(
        ["case", "wall s", "alloc s", "pinned GiB", "pinned / requested", "peak RssAnon GiB (over baseline)",
         "MemAvailable drop GiB"],
        [[r["case"], f"{r['wall_s']:.2f}", f"{r['alloc_s']:.2f}", _gib(r.get("pinned_bytes")),
          "-" if r.get("pinned_bytes") is None else
          f"{r['pinned_bytes'] / r.get('requested_bytes', r['table_bytes']):.4f}",
          _gib(r["peak_rss_anon_over_baseline"]), _gib(r["mem_available_drop"])] for r in results],
    )
    checks = []
    warm_floors = [by[c]["wall_s"] for c in ("plain-read", "plain-read-hugepage") if c in by]
    floor = min(warm_floors) if warm_floors else None
    for case in ("nvfp4-rowpacked", "nvfp4-split", "nvfp4-rowpacked-cold"):
        r = by.get(case)
        if r is None:
            continue
        checks.append((f"{case}: pinned bytes / (rows x 90 B) <= 1.001", r["pinned_bytes"] / r["table_bytes"], 1.001, "le"))
        limit = (r["pinned_bytes"] + r["largest_tensor_bytes"]) * 1.10
        checks.append((f"{case}: peak RssAnon over baseline / ((pinned + largest tensor) x 1.1) <= 1",
                       r["peak_rss_anon_over_baseline"] / limit, 1.0, "le"))
        f = by.get("plain-read-cold", {}).get("wall_s") if case.endswith("-cold") else floor
        if f:
            checks.append((f"{case}: wall / fastest plain-read floor <= 1.5", r["wall_s"] / f, 1.5, "le"))
        checks.append((f"{case}: mismatched bytes == 0", r["mismatched_bytes"], 0, "le"))
    tg = hb.targets(checks)
    report.line("")
    for t in tg:
        report.line(f"{'MET ' if t['met'] else 'MISS'} {t['target']}: {t['value']:.4f}")
    report.write({"env": env, "results": results, "targets": tg})
    if not args.keep:
        shutil.rmtree(args.dir, ignore_errors=True)
    del paths


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
