"""Speed and memory of ``--method simulate`` (targets of issues #3, #12 and #14).

Run: ``python benchmarks/bench_simulate.py`` (``--quick``: one repeat; ``--profile NAME``: a
cProfile summary of one case instead). Not a test; prints a table: best wall time of the
repeats (the least disturbed by other load; the 10-replication case runs its replications in
parallel processes, so wall time is what counts), the CPU time of that run (this process and
its replication processes; on a loaded machine the steadier figure),
and the target on a 2-core machine (issue #12: resnet50 / 64 servers × 8 GPUs (NVLink2,
100 Gbps) / 8 PS / BSP / 20 iterations ≤ 1 s). The load average is printed first: on a
shared machine a busy neighbour slows every figure.

Where the time went before issue 14 (cProfile, resnet50 / 64 workers / 4 PS / BSP / 5%
jitter): ~45% max-min reallocation of the whole connected component (64 worker links + 4 PS
links, ~110 flows, 19k times), ~35% per-message events (a message's end and its delivery α
later, 450k each), ~20% one event per compute operation (315k). The 1024-worker ring spent
~90% on 2.9M compute-operation events. Now (perf, compiled, ASP): message ends ~44% (464k),
reallocations ~25% (62k: 85% settled on one link, the rest by local fills, none over the whole
component), iteration planning ~16%, heap sifts ~9%. See docs/simulate-speed.md and
docs/simulate-compiled.md for what changed and what is left; on
this shared machine, A/B instruction counts (valgrind --tool=cachegrind) are steadier than
CPU seconds. For attribution prefer a sampling profiler to
``--profile`` (cProfile inflates the many small calls): ``py-spy record -f raw -o out.txt --
python benchmarks/bench_simulate.py --quick --no-memory --case asp``.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import time
import tracemalloc
from collections.abc import Callable

from ddlperf.api import predict
from ddlperf.workload import Workload


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Best wall time of ``repeat`` runs (the least disturbed by other load)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def synthetic(tensors: int) -> Workload:
    """``tensors`` layers of one 1 MB tensor each, 1 ms forward and 2 ms backward."""
    return Workload.from_dict({
        "format": "ddlperf.workload/1", "name": f"synthetic{tensors}", "batch_size": 32,
        "device": "V100",
        "layers": [{"name": f"l{i}", "forward_s": 1e-3, "backward_s": 2e-3,
                    "tensors": [{"name": f"l{i}.w", "bytes": 1_000_000}]}
                   for i in range(tensors)],
    })


JITTER = dict(workers=64, ps=4, iterations=20, jitter=0.05)
SERVERS = dict(workers=512, gpus_per_node=8, intra="NVLink2", bandwidth="100Gbps",
               iterations=20)

#: (name, target seconds or None, predict keyword arguments); the issue-14 cases come first
CASES: list[tuple[str, float | None, dict]] = [
    ("bsp", 1.0, JITTER),
    ("asp", 1.0, dict(JITTER, sync="asp")),
    ("ssp2", 1.0, dict(JITTER, sync="ssp", staleness=2)),
    ("ring-jitter", 2.0, dict(arch="allreduce", workers=1024, iterations=10, jitter=0.05)),
    ("bsp-10-replications", 3.0, dict(JITTER, replications=10)),
    ("bsp-noiseless", 1.0, dict(workers=64, ps=4, iterations=20)),
    ("ring-noiseless", 2.0, dict(arch="allreduce", workers=1024, iterations=10)),
    ("servers", 1.0, dict(SERVERS, ps=8)),
    ("servers-local-aggregation", None, dict(SERVERS, ps=8, local_aggregation=True)),
    ("servers-ring-hierarchical", None, dict(SERVERS, arch="allreduce",
                                             allreduce="hierarchical")),
    ("asp-8w", None, dict(workers=8, ps=2, sync="asp", iterations=20)),
    ("bsp-16w-jitter", None, dict(workers=16, ps=2, iterations=20, jitter=0.05)),
]
DESCRIPTION = {
    "bsp": "resnet50 · 64 w · 4 PS · BSP · 5% jitter · 20 it",
    "asp": "… the same with ASP",
    "ssp2": "… the same with SSP(2)",
    "ring-jitter": "ring · resnet50 · 1024 w · 5% jitter · 10 it",
    "bsp-10-replications": "10 replications of the BSP case",
    "bsp-noiseless": "resnet50 · 64 w · 4 PS · BSP · no jitter",
    "ring-noiseless": "ring · resnet50 · 1024 w · no jitter · 10 it",
    "servers": "resnet50 · 64 servers × 8 GPUs · 8 PS · BSP",
    "servers-local-aggregation": "… same, --local-aggregation",
    "servers-ring-hierarchical": "ring · 64 servers × 8 GPUs · hierarchical",
    "asp-8w": "resnet50 · 8 w · 2 PS · ASP · 20 it",
    "bsp-16w-jitter": "resnet50 · 16 w · 2 PS · BSP · 5% jitter",
}


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (replication processes)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(best wall, CPU of this process and its children in that run) over ``repeat`` runs."""
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        gc.collect()
        w0, c0 = time.perf_counter(), cpu_seconds()
        fn()
        wall, cpu = time.perf_counter() - w0, cpu_seconds() - c0
        best = min(best, (wall, cpu))
    return best


def speed(repeat: int, only: list[str] | None = None) -> None:
    """End-to-end ``predict(model="resnet50", method="simulate", ...)`` calls (zoo load,
    resolve, simulate, assemble)."""
    predict("resnet50", method="simulate", workers=2, ps=1, iterations=2)  # imports, caches
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
    print(f"{'case':46} {'wall':>8} {'cpu':>8} {'target':>8}")
    for name, target, kw in CASES:
        if only and name not in only:
            continue
        wall, cpu = timed(lambda kw=kw: predict("resnet50", method="simulate", **kw), repeat)
        goal = f"≤ {target:g} s" if target else ""
        flag = "" if target is None else ("  ok" if wall <= target else "  MISSED")
        print(f"{DESCRIPTION[name]:46} {wall:7.2f}s {cpu:7.2f}s {goal:>8}{flag}", flush=True)


def profile(name: str) -> None:
    """cProfile of one case: the functions with the most time of their own."""
    import cProfile
    import pstats

    kw = dict(next(kw for n, _, kw in CASES if n == name), jobs=1)
    predict("resnet50", method="simulate", workers=2, ps=1, iterations=2)
    prof = cProfile.Profile()
    prof.runcall(predict, "resnet50", method="simulate", **kw)
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)


def memory() -> None:
    """tracemalloc peak of noisy runs (every worker simulated on its own) vs workers × tensors."""
    print(f"\n{'workers':>8} {'tensors':>8} {'W×T':>8} {'peak MiB':>10} {'bytes/(W×T)':>12}")
    for workers, tensors in ((8, 50), (16, 50), (32, 50), (64, 50), (128, 50), (16, 100),
                             (16, 200)):
        w = synthetic(tensors)
        gc.collect()
        tracemalloc.start()
        predict(workload=w, method="simulate", workers=workers, ps=2, jitter=0.05,
                iterations=3, warmup=1)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        cells = workers * tensors
        print(f"{workers:8} {tensors:8} {cells:8} {peak / 2**20:10.2f} {peak / cells:12.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one repeat instead of three")
    parser.add_argument("--case", action="append", choices=[n for n, _, _ in CASES],
                        help="only these cases (repeatable)")
    parser.add_argument("--profile", choices=[n for n, _, _ in CASES],
                        help="print a cProfile summary of one case and stop")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory table")
    args = parser.parse_args()
    if args.profile:
        profile(args.profile)
        return
    speed(1 if args.quick else 3, args.case)
    if not args.no_memory:
        memory()


if __name__ == "__main__":
    main()
