"""ASP runs of workers with different periods: how many iterations each worker runs.

Every worker of a run used to do the same number of iterations. Under ASP nobody waits, so a
worker three times faster than the others finished its iterations while they were a third of
the way through theirs, and the measurement's steady window (the time every worker is past
its warm-up and none has stopped, :func:`ddlperf.measure.records.steady_state`) shrank to a
few of the slow workers' iterations: in the dev matrix's ps-asp-colocated-3w, whose shard-host
worker runs at 0.24 s and the two others at 0.85 s, two iterations each. A real ASP job's
workers all run until the job ends, so here each worker runs as many iterations as fit in
the slowest worker's run: ``ceil(total × slowest period / its period)``, with the periods of
the analytic model (a CPU quota q slows a real-compute worker's period by 1/q at most). A
wrong estimate only moves where the window ends; the steady state is still found from the
records.
"""

from __future__ import annotations

import math
from typing import Any

from ddlperf.scenario import Scenario

MAX_FACTOR = 8  # no worker runs more than this many times the iterations asked for


def asp_iteration_counts(sc: Scenario, spec: dict[str, Any],
                         cpu_quota: dict[str, float] | None = None) -> dict[int, int]:
    """Worker index → measured iterations (warm-up not included), for the workers that run
    more than ``spec["iterations"]``; empty unless the run is ASP on a PS without local
    aggregation (BSP and SSP workers wait for each other, and local aggregation exchanges a
    server's gradients together)."""
    if (spec["arch"] != "ps" or spec["sync"] != "asp" or spec.get("local_aggregation")
            or len(spec["workers"]) < 2):
        return {}
    from ddlperf.predictors.analytic import predict_analytic

    periods = [w.iteration_time_s for w in predict_analytic(sc).workers]
    if spec.get("compute") == "real":
        quota = cpu_quota or {}
        periods = [p / min(1.0, float(quota.get(w["name"], 1.0)))
                   for p, w in zip(periods, spec["workers"])]
    slowest = max(periods)
    total = int(spec["warmup"]) + int(spec["iterations"])
    counts: dict[int, int] = {}
    for i, period in enumerate(periods):
        if period <= 0:
            continue
        runs = min(math.ceil(total * slowest / period), MAX_FACTOR * total)
        if runs > total:
            counts[i] = runs - int(spec["warmup"])
    return counts


def worker_totals(spec: dict[str, Any]) -> dict[str, int]:
    """Worker name → iterations it runs, warm-up included."""
    warmup, default = int(spec["warmup"]), int(spec["iterations"])
    return {w["name"]: warmup + int(w.get("iterations", default)) for w in spec["workers"]}
