"""Shared harness of the benchmarks: the machine, timing, memory probes, results on disk.

Each ``bench_*.py`` is a thin setup over this module (as Liger-Kernel's benchmark scripts are
over their shared utilities): it builds what it measures, calls the timers here and hands a
result dict and a text table to ``Report``. CUDA timing uses CUDA events and a fresh random id
set per timed run; whole-process timing uses ``time.perf_counter`` around ``subprocess.run``.
Nothing here imports from ``tests/``; torch is imported only by the functions that need it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
SHARED_ENGINES = REPO.parent / "shared" / "engines"
TARGET_REL = "vllm/models/qwen4_exp/nvidia/ple_layer.py"


# -- the machine -------------------------------------------------------------------------------


def machine() -> dict:
    """CPU, memory and, where torch sees one, the GPU and the CUDA stack."""
    info = {
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": None,
        "mem_total_bytes": meminfo("MemTotal"),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            dev = torch.cuda.current_device()
            info["gpu"] = torch.cuda.get_device_name(dev)
            info["capability"] = "sm_%d%d" % torch.cuda.get_device_capability(dev)
            info["cuda"] = torch.version.cuda
    if "triton" in sys.modules:
        info["triton"] = sys.modules["triton"].__version__
    return info


def arg_parser(doc: str, out: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / out, help=f"output folder (default {out})")
    return ap


# -- results -----------------------------------------------------------------------------------


class Report:
    """Prints lines as they come and writes ``<name>.txt`` (the lines) and ``<name>.json``."""

    def __init__(self, out_dir: Path, name: str) -> None:
        self.out_dir = Path(out_dir)
        self.name = name
        self.lines: list[str] = []
        self.out_dir.mkdir(parents=True, exist_ok=True)

    def line(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def table(self, header: list[str], rows: list[list], align: str | None = None) -> None:
        """A markdown table (``align``: one of l/r a column, default first l, rest r)."""
        align = align or "l" + "r" * (len(header) - 1)
        self.line("| " + " | ".join(header) + " |")
        self.line("|" + "|".join("---" if a == "l" else "---:" for a in align) + "|")
        for row in rows:
            self.line("| " + " | ".join(str(c) for c in row) + " |")

    def write(self, result: dict) -> None:
        (self.out_dir / f"{self.name}.json").write_text(json.dumps(result, indent=1) + "\n")
        (self.out_dir / f"{self.name}.txt").write_text("\n".join(self.lines) + "\n")
        print(f"wrote {self.out_dir / self.name}.json and .txt", flush=True)


def targets(checks: list[tuple[str, float, float, str]]) -> list[dict]:
    """[(what, value, limit, 'le' | 'ge')] -> result rows with ``met``."""
    out = []
    for what, value, limit, how in checks:
        met = value <= limit if how == "le" else value >= limit
        out.append({"target": what, "value": value, "limit": limit, "how": how, "met": met})
    return out


# -- statistics and whole processes ------------------------------------------------------------


def stats(times: list[float]) -> dict:
    q = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else [times[0]] * 3
    return {
        "runs": len(times),
        "median_s": statistics.median(times),
        "min_s": min(times),
        "p25_s": q[0],
        "p75_s": q[2],
        "max_s": max(times),
        "stdev_s": statistics.stdev(times) if len(times) > 1 else 0.0,
        "times_s": times,
    }


def run_timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    return time.perf_counter() - t0, proc


def version_of(python: str, dist: str) -> str | None:
    proc = subprocess.run(
        [python, "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        capture_output=True, text=True,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


# -- engines to benchmark against --------------------------------------------------------------


def largest_engine_file(engines: Path = SHARED_ENGINES) -> Path | None:
    """The largest real ple_layer.py under ``engines`` (None when there is none)."""
    files = sorted(engines.glob("*/ple_layer.py"), key=lambda p: p.stat().st_size) if engines.is_dir() else []
    return files[-1] if files else None


def engine_wheel(work: Path, data: bytes, *, version: str = "1.5.1") -> Path:
    """A real `1cat-vllm` wheel (setuptools + pip wheel) whose only module is the target file."""
    proj = work / "engine-src"
    target = proj / TARGET_REL
    target.parent.mkdir(parents=True)
    target.write_bytes(data)
    for parent in Path(TARGET_REL).parents:
        if str(parent) != ".":
            (proj / parent / "__init__.py").touch()
    (proj / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "1cat-vllm"
        version = "{version}"

        [tool.setuptools.packages.find]
        include = ["vllm*"]
        """))
    dest = work / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                    "--no-index", "-w", str(dest), str(proj)], check=True, capture_output=True)
    (wheel,) = dest.glob("*.whl")
    return wheel


# -- host memory -------------------------------------------------------------------------------


def meminfo(key: str) -> int | None:
    """A /proc/meminfo field in bytes (None if unreadable)."""
    return _kib_field("/proc/meminfo", key)


def rss_anon() -> int | None:
    """This process's anonymous resident memory (RssAnon) in bytes."""
    return _kib_field("/proc/self/status", "RssAnon")


def _kib_field(path: str, key: str) -> int | None:
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


class PeakRssAnon:
    """Samples RssAnon every ``interval`` s in a thread while the block runs: ``peak`` bytes."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_anon() or 0)
            time.sleep(self.interval)

    def __enter__(self) -> "PeakRssAnon":
        self.peak = rss_anon() or 0
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_anon() or 0)


# -- CUDA timing -------------------------------------------------------------------------------


def median_events(run, before, reps: int, warmup: int) -> float:
    """Median CUDA-event time of ``run()`` in microseconds; ``before(i)`` runs untimed first."""
    import torch

    for i in range(warmup):
        before(i)
        run()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for i, (s, e) in enumerate(ev):
        before(warmup + i)
        s.record()
        run()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in ev)


def id_pool(n: int, rows: int, count: int) -> list:
    """``count`` fresh random id sets of ``n`` ids below ``rows`` on the GPU (no L2 reuse)."""
    import torch

    if n == 0 or count == 0:
        return []
    return list(torch.randint(0, rows, (count, n), device="cuda", dtype=torch.int64).unbind(0))


def time_eager(fn, n: int, rows: int, reps: int, warmup: int) -> float:
    """Median event time (µs) of fn(ids), a fresh random id set each run."""
    pool = id_pool(n, rows, reps + warmup)
    cur = {}

    def before(i):
        cur["ids"] = pool[i]

    return median_events(lambda: fn(cur["ids"]), before, reps, warmup)


def time_graph(fn, n: int, rows: int, reps: int, warmup: int, k: int = 1) -> float:
    """Median time (µs) per gather replayed from a captured CUDA graph of k gathers (fresh ids
    each replay; k > 1 amortises the graph launch, as inside a whole-model graph)."""
    import torch

    static = [torch.zeros(n, dtype=torch.int64, device="cuda") for _ in range(k)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for st in static:
            fn(st)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for st in static:
            fn(st)
    pool = id_pool(n, rows, (reps + warmup) * k)

    def before(i):
        for j, st in enumerate(static):
            st.copy_(pool[i * k + j])

    t = median_events(graph.replay, before, reps, warmup) / k
    del graph
    return t


def cpu_launch_us(fn, ids, calls: int = 2000) -> float:
    """Python-side cost of one launch (no sync inside the loop)."""
    import torch

    for _ in range(50):
        fn(ids)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(ids)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def fill_random(flat, seed: int, chunk_bytes: int = 64 << 20) -> None:
    """Fill a uint8 tensor with a repeated random chunk (fast for GiB-sized tables)."""
    import torch

    chunk = torch.randint(0, 256, (chunk_bytes,), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8)
    for off in range(0, flat.numel(), chunk.numel()):
        k = min(chunk.numel(), flat.numel() - off)
        flat[off : off + k].copy_(chunk[:k])


def pinned_table(rows: int, width: int, seed: int):
    """A uint8 [rows, width] table of random bytes in pinned host memory (torch's allocator)."""
    import torch

    t = torch.empty((rows, width), dtype=torch.uint8, pin_memory=True)
    fill_random(t.view(-1), seed)
    return t
