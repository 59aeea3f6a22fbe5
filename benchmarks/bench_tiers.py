#!/usr/bin/env python3
"""Two-tier gather benchmark: one launch reading both tiers against one launch per tier.

A table split as the engine's host budget splits it: the first --vram-share of the rows in
device memory, the rest in pinned host memory allocated exactly (ple4patch.kernels.nvfp4_host,
cudaHostRegister), random row ids over the whole table. Modes:

- one launch   ple4_nvfp4_gather(..., device_table=vram, launches=1) (TIER 0: two complementary
               masked loads a byte, one launch);
- two launches launches=2 (TIER 1 over the device rows, then TIER 2 over the host rows, each
               launch over all ids, writing only its rows);
- host only    the one-table gather on the pinned host tier alone (ids below its rows), and
- vram only    the one-table gather on the VRAM tier alone, for reference.

Both split modes are checked bit for bit against the CPU reference first. Timing from
benchmarks/harness.py: eager (CUDA events, fresh ids each run) and, at decode sizes, replayed
from a CUDA graph of 1 and of 10 gathers. Writes tiers.json and tiers.txt.

Usage: python3 benchmarks/bench_tiers.py [--out DIR] [--rows 24000000] [--vram-share 0.5]
"""

from __future__ import annotations

import harness as hb
import torch
import triton

from ple4patch.kernels import nvfp4, nvfp4_host
from ple4patch.kernels.nvfp4_gather import ple4_nvfp4_gather

DIM = 160
W = DIM // 2 + DIM // 16
NS = [16, 128, 640, 1024, 16384, 262144]
GRAPH_MAX_N = 1024
GLOBAL = 1.7316e-4


def main() -> None:
    ap = hb.arg_parser(__doc__, "bench-out")
    ap.add_argument("--rows", type=int, default=24_000_000)
    ap.add_argument("--vram-share", type=float, default=0.5)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    torch.cuda.init()
    report = hb.Report(args.out, "tiers")
    rows = args.rows
    vram_rows = int(rows * args.vram_share)
    tiers = nvfp4_host.Ple4NvFp4Tiers(rows, W, vram_rows, device="cuda", pin=True, what="bench")
    hb.fill_random(tiers.host.tensor.view(-1), 1)
    hb.fill_random(tiers.vram.view(-1), 2)
    host, vram = tiers.host.tensor, tiers.vram
    gs = torch.tensor([GLOBAL], dtype=torch.float32, device="cuda")
    env = {**hb.machine(), "rows": rows, "vram_rows": vram_rows, "host_rows": rows - vram_rows,
           "host_pinned_bytes": tiers.host.mapped_bytes, "reps": args.reps, "warmup": args.warmup}
    report.line(f"machine: {env}")

    mismatches = {}
    ids = torch.randint(0, rows, (8192,), device="cuda")
    ids[:4] = torch.tensor([0, vram_rows - 1, vram_rows, rows - 1])
    cpu_ids = ids.cpu()
    in_vram = cpu_ids < vram_rows
    packed = torch.empty(ids.numel(), W, dtype=torch.uint8)
    packed[in_vram] = vram[ids[in_vram.cuda()]].cpu()
    packed[~in_vram] = host[cpu_ids[~in_vram] - vram_rows]
    ref = nvfp4.dequant_reference(packed, GLOBAL, DIM).view(torch.int16)
    for launches in (1, 2):
        out = nvfp4.gather(host, ids, gs, DIM, device_table=vram, launches=launches)
        mismatches[launches] = int((out.cpu().view(torch.int16) != ref).sum())
    report.line(f"bit-exact check, 8192 ids over both tiers: mismatches {mismatches}")

    def split(launches):
        def fn(i, out):
            ple4_nvfp4_gather(host, i, gs, DIM, torch.float16, out=out, device_table=vram, launches=launches)
        return fn

    def single(table):
        def fn(i, out):
            ple4_nvfp4_gather(table, i, gs, DIM, torch.float16, out=out)
        return fn

    modes = {"one launch": (split(1), rows), "two launches": (split(2), rows),
             "host only": (single(host), rows - vram_rows), "vram only": (single(vram), vram_rows)}
    results = []
    for n in NS:
        out = torch.empty(n, DIM, dtype=torch.float16, device="cuda")
        rec = {"n": n}
        for name, (fn, id_rows) in modes.items():
            call = lambda i, fn=fn: fn(i, out)  # noqa: E731
            rec[f"{name} eager_us"] = hb.time_eager(call, n, id_rows, args.reps, args.warmup)
            if n <= GRAPH_MAX_N:
                for mode, k in (("graph", 1), ("graph10", 10)):
                    rec[f"{name} {mode}_us"] = hb.time_graph(call, n, id_rows, args.reps, args.warmup, k)
        results.append(rec)
        print(rec, flush=True)
    small = torch.randint(0, rows, (16,), device="cuda")
    o16 = torch.empty(16, DIM, dtype=torch.float16, device="cuda")
    cpu_us = {f"{k} launches": hb.cpu_launch_us(lambda i, f=split(k): f(i, o16), small) for k in (1, 2)}

    report.line("")
    report.line(f"table {rows:,} rows x {W} B: {vram_rows:,} in VRAM, {rows - vram_rows:,} in pinned host memory "
                f"({tiers.host.mapped_bytes:,} B pinned); ids uniform over the whole table; times in µs")
    header = ["n", "timing"] + list(modes) + ["two / one"]
    rows_out = []
    for rec in results:
        for mode in ("eager", "graph", "graph10"):
            if f"one launch {mode}_us" not in rec:
                continue
            vals = [rec[f"{m} {mode}_us"] for m in modes]
            rows_out.append([rec["n"], {"eager": "eager", "graph": "graph (1)", "graph10": "graph (10)"}[mode]]
                            + [f"{v:.1f}" for v in vals] + [f"{vals[1] / vals[0]:.2f}x"])
    report.table(header, rows_out, "lr" + "r" * (len(header) - 2))
    report.line(f"CPU cost of one gather call (Python): {', '.join(f'{k} {v:.1f} µs' for k, v in cpu_us.items())}")
    faster = sum(1 for r in rows_out if float(r[-1][:-1]) >= 1.0)
    report.line(f"one launch faster or equal in {faster} of {len(rows_out)} cells")
    report.write({"env": env, "mismatches": mismatches, "results": results, "cpu_launch_us": cpu_us,
                  "triton": triton.__version__})
    tiers.release()


if __name__ == "__main__":
    main()
