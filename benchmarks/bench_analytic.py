"""Speed of the analytic predictor on a resnet50 sweep grid, and CLI start-up time.

Run: ``python benchmarks/bench_analytic.py`` (``--grids``: only the grid sizes below;
``--batched``: only the batched sweep's rates; ``--split``: where the batched sweep of the
1,536-point grid spends its time). Prints
predictions per second (best of 3 passes over the grid) — one ``predict_analytic`` per point,
and ``ddlperf.sweep`` per point and batched (``predictors.analytic_batch``) — and the wall and
CPU time of ``ddlperf predict --json`` (best of 5). Rates are per CPU second (this process,
plus its worker processes for ``jobs`` > 1) with the wall-clock rate and the 1-minute load
average next to them: on a shared machine the wall clock measures the other jobs too.
Targets: ≥ 10,000 predictions/s (issue #2); the batched sweep ≥ 20,000 points/s (issue #12);
start-up under 1 s.

Measured after the shard-by-shard release without overlap (twenty-second session,
2026-12-07/08, load 0.5-1.0, four runs of the code before and after alternating; CPU seconds,
best of 5): the 1,536-point grid 29,800-31,200 points/s batched on 1 process (before:
36,500-39,300), BSP with 8-128 workers 32,100-35,300 (36,700-40,900), ASP 17,500-19,400
(19,200-20,500). The
points without overlap (half the grid) now iterate the passes to their period, as points
with overlap always did, where one pass was the answer before (a pass whose shards all
finish together still is).

Measured after the shared-link loop moved to virtual time (``shared_connections``; all
binding points of a pass in one call) and the smaller cuts with it, alternating runs of the
code before and after in one session (2026-12-01, load 3.1-4.0: another session's runs on
the same 2 cores; CPU seconds, best of 5; in brackets the code before, same runs): the
1,536-point grid 21,400-35,800 points/s batched on 1 process (14,800-20,900), 11,100-17,800
on 2 (8,000-10,900), BSP with 8-128 workers 23,000-38,500 (21,300-32,300: no binding point,
little changed), ASP with 8-128 workers 13,600-24,000 (8,900-15,300); per point 2,090/s
(1,620), the ``predict_analytic`` loop 1,400/s (1,110). Where the batched grid's time goes
(``--split``, load 3.9): 42-46 ms in all, the shared-link loops 8-9 ms (29-31: the loop that
followed every item's end), the rest of the shared links 8-9 (13-15), the rest of the BSP
fixed points 12 (14-16), the rest of the batched model 4-5 (4-6), grid, templates and rows
10-11 (11). The loop is Python (~60 us for ~160 items and ~150 rate changes); a
lockstep over a structure's rows with numpy (tried before, on the item-by-item loop) cost
~150 us per event for 6-18 rows. The same measurement on a busier machine earlier in the
day gave the code before 7,400-7,800 points/s for the grid, BSP 13,500-14,200, ASP
4,800-5,400. The figures below predate the shared-link model.

Measured (2026-12-01, 2 shared cores, CPU seconds, best of several runs): batched sweep of
the 1,536-point grid on 1 process 22,450 points/s at load 3.3 and 20,300 at load 6.9 (before
the speed work of issue 12: 8,700–8,900 at load 2.9, 7,400–8,100 at load 3.7–7; the BSP fixed
points, MVA and set-up of each batch are now shared across batches, see
``predictors/analytic_batch.py``). Where the time goes now (load 6.9, 75 ms): the batched
model 42 ms (BSP fixed points 27–29, MVA 3), templates 17 ms (workload 2.5), grid and rows
16 ms.

Grid sizes (``--grids``: the grid above with more link rates, worker counts varying slowest,
so a 4,096-point chunk holds ~1 point per template; CPU s / wall s, best of 3, nice 19):

  points   processes   before (load 2.8)        after (load 3.9)
  1,536    1           0.072 / 0.072 (21.4k/s)  0.069 / 0.070 (22.1k/s)
  1,536    2           0.159 / 0.160            0.149 / 0.148
  6,144    1           0.306 / 0.307 (20.1k/s)  0.248 / 0.248 (24.8k/s)
  6,144    2           0.407 / 0.408            0.366 / 0.347
  24,576   1           2.217 / 2.289 (11.1k/s)  1.269 / 1.273 (19.4k/s)
  24,576   2           2.469 / 2.501            1.659 / 1.664
  99,840   1           10.98 / 11.29 (9.1k/s)   6.405 / 6.759 (15.6k/s)
  99,840   2           12.35 / 12.56            7.925 / 7.972

Before, each chunk started with empty template caches (~90 us per template: cluster, resolve,
keys); now a process keeps one sweep's caches across its chunks (bounded, ``MAX_CACHED``), so
each of the 12,480 templates of the largest grid is built once. What is left at 99,840 points
is the batched BSP model itself (cumulative sums over padded worker arrays, ~55% of the time):
every point there has its own link rate, so deduplication saves nothing. Two processes never
won on these 2 busy cores (load 3–4); on a quiet machine a pool of 2 pays from ~5,000 points
(~90 ms to start, ~25% more CPU), hence ``MIN_BATCHED_POINTS_PER_JOB`` (3,000 points per
process) for the default ``--jobs`` of analytic sweeps, against 200 for points predicted one
by one.
"""

from __future__ import annotations

import itertools
import os
import resource
import sys
import time
from typing import Any

import numpy as np

from ddlperf.api import make_cluster, make_strategy
from ddlperf.predictors.analytic import predict_analytic
from ddlperf.scenario import resolve
from ddlperf.workload import zoo


def grid() -> list[tuple[object, object]]:
    """(cluster, strategy) pairs: workers × PS shards × bandwidth × sync/arch."""
    points = []
    strategies = [make_strategy(), make_strategy(sync="asp"),
                  make_strategy(sync="ssp", staleness=2), make_strategy(arch="allreduce"),
                  make_strategy(sharding="greedy"), make_strategy(overlap=False)]
    for workers, ps, gbps, strategy in itertools.product(
        (1, 2, 4, 8, 16, 32, 64), (1, 2, 4, 8), (1, 10, 25, 100), strategies
    ):
        if strategy.arch == "allreduce":
            if ps != 1:
                continue
            cluster = make_cluster(workers=workers, ps=0, bandwidth=gbps * 1e9, arch="allreduce")
        else:
            cluster = make_cluster(workers=workers, ps=ps, bandwidth=gbps * 1e9)
        points.append((cluster, strategy))
    return points


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished (waited-for) child processes."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def best_rates(run: object, passes: int) -> tuple[float, float, int]:
    """(points per CPU second, points per wall second, points): best of ``passes`` runs."""
    best_cpu = best_wall = float("inf")
    n = 0
    for _ in range(passes):
        cpu, wall = cpu_seconds(), time.perf_counter()
        n = run()  # type: ignore[operator]
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, cpu_seconds() - cpu)
    return n / best_cpu, n / best_wall, n


def predictions_per_second(passes: int = 3) -> tuple[float, float, int]:
    workload = zoo.load("resnet50", batch_size=32, device="V100")
    points = grid()

    def run() -> int:
        for cluster, strategy in points:
            predict_analytic(resolve(workload, cluster, strategy))  # type: ignore[arg-type]
        return len(points)

    return best_rates(run, passes)


SWEEP_AXES = {
    "workers": [1, 2, 4, 8, 16, 32, 64, 128],
    "ps": [1, 2, 4, 8],
    "bandwidth": [1e9, 10e9, 25e9, 40e9, 100e9, 200e9],
    "sync": ["bsp", "asp"],
    "sharding": ["round_robin", "greedy"],
    "overlap": [True, False],
}


def sweep_rate(jobs: int, passes: int = 3, batch: bool = True,
               axes: dict[str, list[object]] | None = None) -> tuple[float, float, int]:
    """``ddlperf.sweep.sweep`` over a resnet50 grid (``axes``, default :data:`SWEEP_AXES`;
    workload built inside, as a user runs it): points per CPU second, per wall second, and
    the number of points.

    ``batch=False``: one ``predict_analytic`` per point instead of the batched model.
    """
    from ddlperf import sweep as sweep_module

    grid_axes = SWEEP_AXES if axes is None else axes
    saved, sweep_module.BATCH = sweep_module.BATCH, batch
    try:
        return best_rates(
            lambda: len(sweep_module.sweep(grid_axes, jobs=jobs, model="resnet50")), passes)
    finally:
        sweep_module.BATCH = saved


def many_workers(sync: str) -> dict[str, list[object]]:
    """:data:`SWEEP_AXES` with 8–128 workers and one sync mode: no BSP point there has its
    worker's shard connections hold its link; every ASP point with several shards needs the
    one-worker cycle, where they do."""
    return {**SWEEP_AXES, "workers": [8, 16, 32, 64, 128], "sync": [sync]}


def grid_of(points: int) -> dict[str, list[object]]:
    """:data:`SWEEP_AXES` with more link rates for about ``points`` points: the worker count
    varies slowest, so a 4,096-point chunk holds few points of each template (everything but
    the worker count) — the hard case for the batched path."""
    rates = len(SWEEP_AXES["bandwidth"]) * -(-points // 1_536)
    return {**SWEEP_AXES, "bandwidth": [float(r) for r in np.geomspace(1e9, 200e9, rates)]}


def big_grid_rates(sizes: tuple[int, ...] = (1_536, 6_144, 24_576, 99_840)
                   ) -> list[tuple[int, int, float, float]]:
    """(points, jobs, CPU seconds, wall seconds) of ``sweep`` over grids of growing size on
    1 and 2 processes (best of 3, one pass for the largest): where worker processes pay."""
    from ddlperf.sweep import sweep

    results = []
    for size in sizes:
        axes = grid_of(size)
        for jobs in (1, 2):
            best_cpu = best_wall = float("inf")
            n = 0
            for _ in range(1 if size >= 50_000 else 3):
                cpu, wall = cpu_seconds(), time.perf_counter()
                n = len(sweep(axes, jobs=jobs, model="resnet50"))
                best_wall = min(best_wall, time.perf_counter() - wall)
                best_cpu = min(best_cpu, cpu_seconds() - cpu)
            results.append((n, jobs, best_cpu, best_wall))
    return results


def batched_share() -> float:
    """Share of the sweep grid's points that take the batched path (the rest: per point)."""
    from ddlperf.sweep import _plan, _State, grid

    state, points = _State(), grid(SWEEP_AXES)
    return sum(_plan({"model": "resnet50", **p}, state) is not None for p in points) / len(points)


def startup_seconds(runs: int = 5) -> tuple[float, float]:
    """Wall and CPU seconds of ``ddlperf predict --json``, best of ``runs``, measured as
    ``benchmarks/bench_startup.py`` does (byte-compiled package, as installed)."""
    from bench_startup import best_of, compile_package

    compile_package()
    return best_of(("predict", "--json"), runs)


def time_split(passes: int = 9, loop: str = "_virtual_time",
               axes: dict[str, list[object]] | None = None) -> tuple[int, dict[str, float]]:
    """Where the batched sweep of a grid (``axes``, default :data:`SWEEP_AXES`, the
    1,536-point grid) spends its CPU time: seconds of the
    pass with the least total of ``passes`` (after one to warm up), by part — the
    shared-link loops (``shared_connections``'s ``loop``: ``_event_loop`` before the
    virtual-time loop), the rest of the shared links (closed forms, shifted repeats,
    set-up), the rest of the BSP fixed points, the rest of the batched model (ASP's MVA,
    bottlenecks, results) and the rest of the sweep (grid, templates, rows)."""
    from ddlperf import sweep as sweep_module
    from ddlperf.predictors import analytic_batch, analytic_batch_bsp, shared_connections

    spent = dict.fromkeys(("loops", "links", "bsp", "batched"), 0.0)
    timed = [(shared_connections, loop, "loops"),
             (analytic_batch_bsp, "_shared_links", "links"),
             (analytic_batch._BspPeriods, "run", "bsp"),
             (analytic_batch, "predict_batches", "batched")]

    def timer(inner: Any, part: str) -> Any:
        def run(*args: Any) -> Any:
            start = time.process_time()
            try:
                return inner(*args)
            finally:
                spent[part] += time.process_time() - start
        return run

    originals = [getattr(owner, name) for owner, name, _part in timed]
    for (owner, name, part), inner in zip(timed, originals):
        setattr(owner, name, timer(inner, part))
    best: dict[str, float] = {}
    n = 0
    try:
        for i in range(passes + 1):
            spent.update(dict.fromkeys(spent, 0.0))
            start = time.process_time()
            n = len(sweep_module.sweep(axes or SWEEP_AXES, jobs=1, model="resnet50"))
            total = time.process_time() - start
            if i and (not best or total < best["total"]):
                best = {**spent, "total": total}
    finally:
        for (owner, name, _part), inner in zip(timed, originals):
            setattr(owner, name, inner)
    return n, {"shared-link loops": best["loops"],
               "rest of the shared links": best["links"] - best["loops"],
               "rest of the BSP fixed points": best["bsp"] - best["links"],
               "rest of the batched model": best["batched"] - best["bsp"],
               "grid, templates, rows": best["total"] - best["batched"],
               "total": best["total"]}


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def batched_rates() -> None:
    """The batched sweep's figures: the 1,536-point grid on 1 and 2 processes, BSP and ASP
    with 8-128 workers."""
    for jobs in (1, 2):
        cpu, wall, n = sweep_rate(jobs, passes=5)
        print(f"ddlperf.sweep, resnet50 grid of {n} points, {jobs} process(es): "
              f"{cpu:,.0f}/CPU-s ({wall:,.0f}/s wall, {load()})")
    for sync in ("bsp", "asp"):
        cpu, wall, n = sweep_rate(1, passes=5, axes=many_workers(sync))
        print(f"ddlperf.sweep, {sync.upper()} with 8-128 workers ({n} points), 1 process: "
              f"{cpu:,.0f}/CPU-s ({wall:,.0f}/s wall, {load()})")


if __name__ == "__main__":
    if {"-h", "--help"} & set(sys.argv):
        print(__doc__.split("\n\n")[1])
        sys.exit()
    if "--split" in sys.argv:  # where the batched sweep's time goes
        n, parts = time_split()
        print(f"ddlperf.sweep, resnet50 grid of {n} points, best of 9 passes ({load()}):")
        for part, seconds in parts.items():
            print(f"  {part:<29} {1e3 * seconds:6.1f} ms")
        sys.exit()
    if "--batched" in sys.argv:  # only the batched sweep's figures
        batched_rates()
        sys.exit()
    if "--grids" in sys.argv:  # only the grid sizes
        for n, jobs, cpu, wall in big_grid_rates():
            print(f"{n:>7,} points, {jobs} process(es): {cpu:.3f} CPU-s ({n / cpu:,.0f}/CPU-s), "
                  f"{wall:.3f} s wall ({n / wall:,.0f}/s), {load()}")
        sys.exit()
    cpu, wall, n = predictions_per_second()
    print(f"predict_analytic loop, resnet50 grid of {n} points, 1 process: {cpu:,.0f}/CPU-s "
          f"({wall:,.0f}/s wall, {load()})")
    cpu, wall, n = sweep_rate(1, batch=False)
    print(f"ddlperf.sweep, per-point path, resnet50 grid of {n} points, 1 process: "
          f"{cpu:,.0f}/CPU-s ({wall:,.0f}/s wall, {load()})")
    print(f"ddlperf.sweep, batched share of the grid: {batched_share():.0%}")
    batched_rates()
    wall, cpu = startup_seconds()
    print(f"'ddlperf predict --json' (best of 5): {wall:.3f} s wall, {cpu:.3f} s CPU "
          f"({load()}; more commands: benchmarks/bench_startup.py)")
