#!/usr/bin/env python3
"""PLE gather benchmark: NVFP4 row-packed (90 B rows) against the stock FP8 design (160 B rows).

All in one process, on pinned host tables (>= 2 GiB each) read by the GPU through UVA, with
random row ids over the whole table:

- fp8      the stock pinned-host FP8 gather re-implemented after 1Cat-vLLM's design: one
           program per row, 160 B rows, integer E4M3 decode, model-dtype (fp16) output;
- nvfp4    ple4patch's gather (ple4_nvfp4_gather), fp16 output;
- raw      a random-row gather-copy of the same 90 B rows with no decode, the best of several
           tunings at each n (the ceiling for nvfp4);
- bulk     one large pinned host -> device copy (the bus limit);
- empty    an empty kernel launch.

Timing from benchmarks/harness.py: medians of >= 20 timed runs after warm-up, CUDA events, a
fresh random id set each run (so no run finds its rows in L2); decode sizes (n <= 1024) also
replayed from a captured CUDA graph, as one gather a graph ("graph": includes the graph launch)
and ten ("graph10": per gather, as a node among others in a whole-model graph). Writes
gather.json, gather.txt and gather.png and prints a table. ``--tune`` first sweeps the kernels'
rows per program / warps / load layout.

Usage: python3 benchmarks/bench_gather.py [--out DIR] [--tune] [--rows 24000000] [--reps 30]
"""

from __future__ import annotations

import json
import time

import harness as hb
import torch
import triton
import triton.language as tl
from harness import cpu_launch_us, id_pool, pinned_table, time_eager, time_graph

from ple4patch.kernels import nvfp4
from ple4patch.kernels import nvfp4_gather as k4

DIM = 160
W4 = DIM // 2 + DIM // 16  # 90
W8 = DIM  # 160
NS = [16, 128, 640, 1024, 16384, 262144, 1048576]
GRAPH_MAX_N = 1024
GLOBAL = 1.7316e-4


# ------------------------------------------------------------------ kernels of the baseline


@triton.jit
def _fp8_gather_kernel(weight_ptr, ids_ptr, scale_ptr, out_ptr, DIM: tl.constexpr, BLOCK_D: tl.constexpr):
    """After 1Cat-vLLM's pinned-host FP8 gather: one program per looked-up row."""
    row = tl.program_id(0)
    rid = tl.load(ids_ptr + row).to(tl.int64)
    offs = tl.arange(0, BLOCK_D)
    mask = offs < DIM
    raw = tl.load(weight_ptr + rid * DIM + offs, mask=mask, other=0).to(tl.int32) & 255
    v = tl.cast(k4._ple4_e4m3fn_bits(raw), tl.float32, bitcast=True) * tl.load(scale_ptr)
    tl.store(out_ptr + row.to(tl.int64) * DIM + offs, v.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _raw_copy_kernel(table_ptr, ids_ptr, out_ptr, n, W: tl.constexpr, BW: tl.constexpr, ROWS: tl.constexpr):
    """Random-row gather-copy with no decode (elements of the table's dtype: uint8 or int16)."""
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    rmask = r < n
    rid = tl.load(ids_ptr + r, mask=rmask, other=0).to(tl.int64)
    c = tl.arange(0, BW)
    m = rmask[:, None] & (c < W)[None, :]
    x = tl.load(table_ptr + rid[:, None] * W + c[None, :], mask=m, other=0)
    tl.store(out_ptr + r[:, None] * W + c[None, :], x, mask=m)


@triton.jit
def _empty_kernel(x_ptr):
    pass


def fp8_gather(table, ids, scale, out):
    _fp8_gather_kernel[(ids.shape[0],)](table, ids, scale, out, DIM=DIM, BLOCK_D=256, num_warps=4)


def raw_gather(table, ids, out, cfg):
    elem, rows, warps = cfg
    n = ids.shape[0]
    if elem == "i16":
        t, o, w, bw = table.view(torch.int16), out.view(torch.int16), W4 // 2, 64
    else:
        t, o, w, bw = table, out, W4, 128
    _raw_copy_kernel[(triton.cdiv(n, rows),)](t, ids, o, n, W=w, BW=bw, ROWS=rows, num_warps=warps)


def nvfp4_gather(table, ids, gs, out, cfg=None):
    if cfg is None:
        return k4.ple4_nvfp4_gather(table, ids, gs, DIM, torch.float16, out=out)
    layout, rows, warps = cfg
    n = ids.shape[0]
    p = k4._ple4_launch_params(DIM, 0, table.stride(0), rows=rows, num_warps=warps, layout=layout)
    k4._ple4_nvfp4_gather_kernel[(triton.cdiv(n, rows),)](table, ids, gs, out, n, table, 0, **p["options"], **p["constexprs"])


# ------------------------------------------------------------------ setup


def bulk_h2d_gbps(src_pinned, reps=10):
    nbytes = src_pinned.numel()
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    t = hb.median_events(lambda: dst.copy_(src_pinned, non_blocking=True), lambda i: None, reps, 3)
    return nbytes / (t * 1e-6) / 1e9, t


def check_exact(table, gs, fn, label):
    """fn(ids, out) on the pinned table vs the CPU reference: 4096 random rows + full code space."""
    ids = torch.randint(0, table.shape[0], (4096,), device="cuda")
    out = torch.empty(4096, DIM, dtype=torch.float16, device="cuda")
    fn(table, ids, out)
    ref = nvfp4.dequant_reference(table[ids.cpu()], gs.item(), DIM)
    bad = int((out.cpu().view(torch.int16) != ref.view(torch.int16)).sum())
    fcs = nvfp4.full_code_space_table(DIM).pin_memory()
    ids2 = torch.arange(fcs.shape[0], device="cuda")
    out2 = torch.empty(fcs.shape[0], DIM, dtype=torch.float16, device="cuda")
    fn(fcs, ids2, out2)
    ref2 = nvfp4.dequant_reference(fcs, gs.item(), DIM)
    bad += int((out2.cpu().view(torch.int16) != ref2.view(torch.int16)).sum())
    if bad:
        print(f"!! {label}: {bad} values differ from the reference", flush=True)
    return bad


# ------------------------------------------------------------------ main


def main():
    ap = hb.arg_parser(__doc__, "bench-out")
    ap.add_argument("--rows", type=int, default=24_000_000, help="table rows (24M: 2.16 GB NVFP4, 3.84 GB FP8)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--ns", default=",".join(map(str, NS)))
    ap.add_argument("--tune", action="store_true", help="sweep rows/warps/layout of nvfp4 and raw first")
    args = ap.parse_args()
    out_dir = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    ns = [int(x) for x in args.ns.split(",")]
    assert args.reps >= 20
    torch.cuda.init()
    dev = torch.cuda.current_device()
    del dev
    env = {
        **hb.machine(),
        "rows": args.rows,
        "reps": args.reps,
        "warmup": args.warmup,
        "nvfp4_defaults": {"layout": k4._ple4_LAYOUT, "rows": k4._ple4_ROWS_PER_PROGRAM, "warps": k4._ple4_NUM_WARPS},
    }
    print(json.dumps(env), flush=True)
    t0 = time.time()
    t4 = pinned_table(args.rows, W4, 1)
    t8 = pinned_table(args.rows, W8, 2)
    print(f"pinned tables: nvfp4 {t4.numel() / 2**30:.2f} GiB, fp8 {t8.numel() / 2**30:.2f} GiB "
          f"({time.time() - t0:.1f} s)", flush=True)
    gs = torch.tensor([GLOBAL], dtype=torch.float32, device="cuda")
    s8 = torch.tensor([GLOBAL * 6], dtype=torch.float32, device="cuda")

    bulk, bulk_us = bulk_h2d_gbps(t8.view(-1)[: 1 << 30])
    dummy = torch.empty(1, device="cuda")
    empty = lambda ids: _empty_kernel[(1,)](dummy)  # noqa: E731
    empty_eager = time_eager(empty, 1, 1, args.reps, args.warmup)
    empty_graph = time_graph(empty, 1, 1, args.reps, args.warmup)
    empty_graph10 = time_graph(empty, 1, 1, args.reps, args.warmup, k=10)
    print(f"bulk pinned H2D: {bulk:.2f} GB/s (1 GiB in {bulk_us:.0f} us); empty kernel: eager {empty_eager:.1f} us, "
          f"graph {empty_graph:.1f} us, in a 10-kernel graph {empty_graph10:.2f} us", flush=True)

    result = {"env": env, "bulk_h2d_GBps": bulk,
              "empty_launch_us": {"eager": empty_eager, "graph": empty_graph, "graph10": empty_graph10}}

    # Python-side launch cost (what eager small-n times mostly are)
    ids16 = torch.randint(0, args.rows, (16,), device="cuda")
    o16s = torch.empty(16, DIM, dtype=torch.float16, device="cuda")
    oraw16 = torch.empty(16, W4, dtype=torch.uint8, device="cuda")
    result["cpu_launch_us"] = {
        "empty": cpu_launch_us(empty, None),
        "fp8": cpu_launch_us(lambda ids: fp8_gather(t8, ids, s8, o16s), ids16),
        "nvfp4": cpu_launch_us(lambda ids: nvfp4_gather(t4, ids, gs, o16s), ids16),
        "raw": cpu_launch_us(lambda ids: raw_gather(t4, ids, oraw16, ("u8", 2, 2)), ids16),
    }
    print("cpu launch us: " + json.dumps(result["cpu_launch_us"]), flush=True)

    # correctness of what we time
    result["exact_default_mismatches"] = check_exact(t4, gs, lambda t, i, o: nvfp4_gather(t, i, gs, o), "nvfp4 default")

    raw_cfgs = [(e, r, w) for e in ("u8", "i16") for r in (1, 2, 4, 8, 16) for w in (1, 2, 4)]
    nv_cfgs = [(lay, r, w) for lay in (0, 1) for r in (1, 2, 4, 8) for w in (1, 2, 4, 8)]
    tune_ns = [640, 1024, 16384, 1048576]
    if args.tune:
        sweep = {"nvfp4": {}}
        outs = {n: torch.empty(n, DIM, dtype=torch.float16, device="cuda") for n in tune_ns}
        for cfg in nv_cfgs:
            bad = check_exact(t4, gs, lambda t, i, o, c=cfg: nvfp4_gather(t, i, gs, o, c), f"nvfp4 {cfg}")
            if bad:
                sweep["nvfp4"][str(cfg)] = {"mismatches": bad}
                continue
            row = {}
            for n in tune_ns:
                fn = lambda ids, c=cfg, n=n: nvfp4_gather(t4, ids, gs, outs[n], c)  # noqa: E731
                row[n] = (time_graph(fn, n, args.rows, 20, 3, k=10) if n <= GRAPH_MAX_N
                          else time_eager(fn, n, args.rows, 20, 3))
            sweep["nvfp4"][str(cfg)] = row
            print(f"tune nvfp4 {str(cfg):12s} " + " ".join(f"n={n}:{row[n]:9.2f}us" for n in tune_ns), flush=True)
        result["tune"] = sweep
        for n in tune_ns:
            best = min((v[n], k) for k, v in sweep["nvfp4"].items() if n in v)
            print(f"best nvfp4 at n={n}: {best[1]} {best[0]:.2f} us", flush=True)
        del outs

    # the table
    rows_out = []
    for n in ns:
        o16 = torch.empty(n, DIM, dtype=torch.float16, device="cuda")
        oraw = torch.empty(n, W4, dtype=torch.uint8, device="cuda")
        fp8_fn = lambda ids: fp8_gather(t8, ids, s8, o16)  # noqa: E731
        nv_fn = lambda ids: nvfp4_gather(t4, ids, gs, o16)  # noqa: E731
        rec = {"n": n}
        rec["fp8_us"] = time_eager(fp8_fn, n, args.rows, args.reps, args.warmup)
        rec["nvfp4_us"] = time_eager(nv_fn, n, args.rows, args.reps, args.warmup)
        raw_times = {}
        for cfg in raw_cfgs:
            raw_times[str(cfg)] = time_eager(lambda ids, c=cfg: raw_gather(t4, ids, oraw, c), n, args.rows, 20, 2)
        best_cfg = min(raw_times, key=raw_times.get)
        rec["raw_us"], rec["raw_cfg"] = raw_times[best_cfg], best_cfg
        if n <= GRAPH_MAX_N:
            for mode, k in (("graph", 1), ("graph10", 10)):
                rec[f"fp8_{mode}_us"] = time_graph(fp8_fn, n, args.rows, args.reps, args.warmup, k)
                rec[f"nvfp4_{mode}_us"] = time_graph(nv_fn, n, args.rows, args.reps, args.warmup, k)
                g_times = {}
                for cfg in raw_cfgs:
                    g_times[str(cfg)] = time_graph(lambda ids, c=cfg: raw_gather(t4, ids, oraw, c), n, args.rows, 20, 2, k)
                gbest = min(g_times, key=g_times.get)
                rec[f"raw_{mode}_us"], rec[f"raw_{mode}_cfg"] = g_times[gbest], gbest
        for k in ("fp8", "nvfp4", "raw"):
            for mode in ("", "_graph", "_graph10"):
                t = rec.get(f"{k}{mode}_us")
                if t is None:
                    continue
                width = W8 if k == "fp8" else W4
                rec[f"{k}{mode}_rows_per_s"] = n / (t * 1e-6)
                rec[f"{k}{mode}_GBps"] = n * width / (t * 1e-6) / 1e9
                rec[f"{k}{mode}_pct_bulk"] = 100 * rec[f"{k}{mode}_GBps"] / bulk
        rec["nvfp4_over_fp8"] = rec["fp8_us"] / rec["nvfp4_us"]
        rec["nvfp4_over_raw"] = rec["raw_us"] / rec["nvfp4_us"]
        if n <= GRAPH_MAX_N:
            for mode in ("graph", "graph10"):
                rec[f"{mode}_nvfp4_over_fp8"] = rec[f"fp8_{mode}_us"] / rec[f"nvfp4_{mode}_us"]
                rec[f"{mode}_nvfp4_vs_raw_latency"] = rec[f"nvfp4_{mode}_us"] / rec[f"raw_{mode}_us"]
        rows_out.append(rec)
        del o16, oraw
        print(json.dumps(rec), flush=True)
    result["results"] = rows_out

    # targets
    tg = []
    for r in rows_out:
        n = r["n"]
        if n >= 262144:
            tg.append((f"n={n}: nvfp4 >= 0.95x raw rows/s", r["nvfp4_over_raw"], 0.95))
            tg.append((f"n={n}: nvfp4 >= 1.2x fp8 rows/s", r["nvfp4_over_fp8"], 1.2))
        if n == 16384:
            tg.append((f"n={n}: nvfp4 >= 2x fp8 rows/s", r["nvfp4_over_fp8"], 2.0))
        if n <= GRAPH_MAX_N:
            for mode in ("graph", "graph10"):
                tg.append((f"n={n}: {mode} latency nvfp4 <= fp8 (fp8/nvfp4 >= 1)", r[f"{mode}_nvfp4_over_fp8"], 1.0))
                tg.append((f"n={n}: {mode} latency nvfp4 <= 1.5x raw (raw*1.5/nvfp4 >= 1)",
                           1.5 / r[f"{mode}_nvfp4_vs_raw_latency"], 1.0))
    result["targets"] = [{"target": a, "value": b, "need": c, "met": b >= c} for a, b, c in tg]

    report = hb.Report(out_dir, "gather")
    print_table(result, report.line)
    report.write(result)
    plot(result, out_dir / "gather.png")


def print_table(result, say=print):
    bulk = result["bulk_h2d_GBps"]
    e = result["empty_launch_us"]
    say(f"\nbulk pinned H2D {bulk:.2f} GB/s; empty launch eager {e['eager']:.1f} us, graph {e['graph']:.1f} us, "
          f"in a 10-kernel graph {e['graph10']:.2f} us; cpu launch us {json.dumps(result['cpu_launch_us'])}")
    hdr = f"{'n':>8} | {'kernel':<12} | {'time us':>9} | {'Mrows/s':>9} | {'GB/s':>7} | {'% bulk':>6} | note"
    say(hdr)
    say("-" * len(hdr))
    for r in result["results"]:
        for k, label in (("fp8", "fp8"), ("nvfp4", "nvfp4"), ("raw", "raw 90B"), ("fp8_graph", "fp8 graph"),
                         ("nvfp4_graph", "nvfp4 graph"), ("raw_graph", "raw graph"), ("fp8_graph10", "fp8 graph10"),
                         ("nvfp4_graph10", "nvfp4 graph10"), ("raw_graph10", "raw graph10")):
            if f"{k}_us" not in r:
                continue
            note = ""
            if k == "nvfp4":
                note = f"x{r['nvfp4_over_fp8']:.2f} vs fp8, {r['nvfp4_over_raw']:.2f} of raw"
            if k in ("nvfp4_graph", "nvfp4_graph10"):
                m = k.split("_")[1]
                note = f"x{r[m + '_nvfp4_over_fp8']:.2f} vs fp8, {r[m + '_nvfp4_vs_raw_latency']:.2f}x raw latency"
            if k.startswith("raw"):
                note = r.get(f"{k}_cfg", "")
            say(f"{r['n']:>8} | {label:<12} | {r[f'{k}_us']:9.1f} | {r[f'{k}_rows_per_s'] / 1e6:9.2f} | "
                  f"{r[f'{k}_GBps']:7.2f} | {r[f'{k}_pct_bulk']:6.1f} | {note}")
    say("\ntargets:")
    for t in result["targets"]:
        say(f"  {'MET ' if t['met'] else 'MISS'} {t['target']}: {t['value']:.3f} (need {t['need']})")


def plot(result, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", flush=True)
        return
    rs = result["results"]
    ns = [r["n"] for r in rs]
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.plot(ns, [r["nvfp4_rows_per_s"] for r in rs], "o-", label="NVFP4 gather (90 B rows)")
    ax.plot(ns, [r["fp8_rows_per_s"] for r in rs], "s-", label="FP8 gather, stock design (160 B rows)")
    ax.plot(ns, [r["raw_rows_per_s"] for r in rs], "^--", label="raw 90 B row copy (ceiling)")
    small = [r for r in rs if "nvfp4_graph10_us" in r]
    if small:
        sn = [r["n"] for r in small]
        ax.plot(sn, [r["nvfp4_graph10_rows_per_s"] for r in small], "o:", label="NVFP4, in a CUDA graph")
        ax.plot(sn, [r["fp8_graph10_rows_per_s"] for r in small], "s:", label="FP8, in a CUDA graph")
        ax.plot(sn, [r["raw_graph10_rows_per_s"] for r in small], "^:", label="raw copy, in a CUDA graph")
    bulk = result["bulk_h2d_GBps"] * 1e9
    ax.axhline(bulk / W4, color="k", lw=1, label=f"bus limit, 90 B rows ({result['bulk_h2d_GBps']:.0f} GB/s bulk)")
    ax.axhline(bulk / W8, color="gray", lw=1, ls="--", label="bus limit, 160 B rows")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows gathered per call (n)")
    ax.set_ylabel("rows / s")
    ax.set_title(f"PLE gather from pinned host memory, {result['env']['gpu']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}", flush=True)


if __name__ == "__main__":
    main()
