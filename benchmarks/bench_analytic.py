"""Speed of the analytic predictor on a resnet50 sweep grid, and CLI start-up time.

Run: ``python benchmarks/bench_analytic.py``. Prints predictions per second (best of 3
passes over the grid) — one ``predict_analytic`` per point, and ``ddlperf.sweep`` per point and
batched (``predictors.analytic_batch``) — and the wall time of ``ddlperf predict --json``
(best of 5).
Targets (issue #2): ≥ 10,000 predictions/s; start-up under 1 s.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time

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


def predictions_per_second(passes: int = 3) -> tuple[float, int]:
    workload = zoo.load("resnet50", batch_size=32, device="V100")
    points = grid()
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        for cluster, strategy in points:
            predict_analytic(resolve(workload, cluster, strategy))  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - start)
    return len(points) / best, len(points)


SWEEP_AXES = {
    "workers": [1, 2, 4, 8, 16, 32, 64, 128],
    "ps": [1, 2, 4, 8],
    "bandwidth": [1e9, 10e9, 25e9, 40e9, 100e9, 200e9],
    "sync": ["bsp", "asp"],
    "sharding": ["round_robin", "greedy"],
    "overlap": [True, False],
}


def sweep_rate(jobs: int, passes: int = 3, batch: bool = True) -> tuple[float, int]:
    """``ddlperf.sweep.sweep`` over a resnet50 grid (workload built inside, as a user runs it).

    ``batch=False``: one ``predict_analytic`` per point instead of the batched model.
    """
    from ddlperf import sweep as sweep_module

    best, n = float("inf"), 0
    saved, sweep_module.BATCH = sweep_module.BATCH, batch
    try:
        for _ in range(passes):
            start = time.perf_counter()
            n = len(sweep_module.sweep(SWEEP_AXES, jobs=jobs, model="resnet50"))
            best = min(best, time.perf_counter() - start)
    finally:
        sweep_module.BATCH = saved
    return n / best, n


def batched_share() -> float:
    """Share of the sweep grid's points that take the batched path (the rest: per point)."""
    from ddlperf.sweep import _plan, _State, grid

    state, points = _State(), grid(SWEEP_AXES)
    return sum(_plan({"model": "resnet50", **p}, state) is not None for p in points) / len(points)


def startup_seconds(runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "ddlperf", "predict", "--json"], check=True,
                       stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


if __name__ == "__main__":
    rate, n = predictions_per_second()
    print(f"predict_analytic loop, resnet50 grid of {n} points, 1 process: {rate:,.0f}/s")
    rate, n = sweep_rate(1, batch=False)
    print(f"ddlperf.sweep, per-point path, resnet50 grid of {n} points, 1 process: {rate:,.0f}/s")
    print(f"ddlperf.sweep, batched share of the grid: {batched_share():.0%}")
    for jobs in (1, 2):
        rate, n = sweep_rate(jobs)
        print(f"ddlperf.sweep, resnet50 grid of {n} points, {jobs} process(es): {rate:,.0f}/s")
    print(f"'ddlperf predict --json' wall time (best of 5): {startup_seconds():.3f} s")
