"""Memory and time of a sweep streamed to a file: does a big grid stay out of memory?

Run: ``python benchmarks/bench_stream.py [--rows 100000|1000000] [--jobs 2] [--parquet]``.
Runs ``ddlperf sweep ... --csv FILE`` (or ``--parquet``) with the local executor as a child
process and samples, twice a second, the resident memory of the command and of its worker
processes (``/proc``) and the size of the file being written. Prints the peak RSS of the
command's own process, the peak of the whole process tree (command + workers, summed at one
instant), the RSS after every ~10% of the rows, and the wall and CPU time (command + workers)
with the 1-minute load average.

The grids (resnet50, analytic): 100,000 rows = workers 1..1000 × ps 1..10 × 5 bandwidths ×
BSP/ASP; 1,000,000 rows = the same × 5 batch sizes × 2 latencies.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = ["--model", "resnet50", "--workers", "1..1000", "--ps", "1..10",
        "--bandwidth", "1Gbps,10Gbps,25Gbps,40Gbps,100Gbps", "--sync", "bsp,asp"]
GRIDS = {100_000: BASE,
         1_000_000: [*BASE, "--batch-size", "16,32,64,128,256", "--latency", "10us,50us"]}


def rss_bytes(pid: int) -> int:
    """Resident set size of one process (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return []


def growing_file(target: Path) -> int:
    """Bytes written so far: the temporary file beside the target (renamed at the end)."""
    sizes = [p.stat().st_size for p in target.parent.glob(f".{target.name}.*.tmp")]
    if target.exists():
        sizes.append(target.stat().st_size)
    return max(sizes, default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, choices=sorted(GRIDS), default=100_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--parquet", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / ("rows.parquet" if args.parquet else "rows.csv")
        command = [sys.executable, "-m", "ddlperf", "sweep", *GRIDS[args.rows], "--jobs",
                   str(args.jobs), "--no-progress", "--parquet" if args.parquet else "--csv",
                   str(out)]
        load = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        peak_main = peak_tree = 0
        curve: list[tuple[float, int, int]] = []  # (seconds, bytes written, tree RSS)
        while proc.poll() is None:
            main_rss = rss_bytes(proc.pid)
            tree = main_rss + sum(rss_bytes(c) for c in children(proc.pid))
            peak_main, peak_tree = max(peak_main, main_rss), max(peak_tree, tree)
            curve.append((time.perf_counter() - start, growing_file(out), tree))
            time.sleep(0.5)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            sys.exit(f"sweep failed with exit status {proc.returncode}")
        size = out.stat().st_size
        with out.open("rb") as f:
            rows = sum(1 for _ in f) - 1 if not args.parquet else args.rows
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    mib = 1024 * 1024
    print(f"{rows:,} rows, {size / mib:,.1f} MiB of {'Parquet' if args.parquet else 'CSV'}, "
          f"--jobs {args.jobs}; load average (1 min) {load:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    print(f"wall {wall:,.1f} s, CPU {cpu:,.1f} s (command + workers), "
          f"{rows / wall:,.0f} rows/s wall")
    print(f"peak RSS: command {peak_main / mib:.1f} MiB, command + workers "
          f"{peak_tree / mib:.1f} MiB (largest single process, getrusage: "
          f"{after.ru_maxrss / 1024:.1f} MiB)")
    marks = [size * k / 10 for k in range(1, 11)]
    shown = []
    for seconds, written, tree in curve:
        if marks and written >= marks[0]:
            shown.append(f"{100 * written / size:.0f}% at {seconds:.0f} s: {tree / mib:.1f} MiB")
            while marks and written >= marks[0]:
                marks.pop(0)
    print("tree RSS as the file grows: " + "; ".join(shown))


if __name__ == "__main__":
    main()
