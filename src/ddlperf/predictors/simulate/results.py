"""Turn simulated runs into a :class:`~ddlperf.prediction.Prediction`.

Per worker: iteration time = mean step period over the measured iterations, averaged over
replications (likewise compute, communication and wait). Cluster figures follow the analytic
definitions (mean over workers; Σ batch / iteration time) so the two methods are comparable.

``percentiles``: for ``iteration_time_s`` and ``throughput_samples_per_s``, ``mean`` is the
headline value and ``p5``/``p50``/``p95`` are over every measured iteration of every
replication (per iteration: mean period over workers, Σ batch / period).
"""

from __future__ import annotations

import numpy as np

from ddlperf.prediction import Prediction, ResourceUse, WorkerGroups, WorkerResult
from ddlperf.predictors.analytic import (
    GroupTime,
    breakdown,
    bucket_layout,
    describe_inputs,
    goodput_note,
    name_bottleneck,
    single_worker_baseline,
)
from ddlperf.predictors.rings import ring_intra_share, ring_phases
from ddlperf.predictors.server_links import ps_intra_share
from ddlperf.predictors.simulate.run import RunResult
from ddlperf.scenario import Scenario, member_runs


def assemble_simulated(
    sc: Scenario, runs: list[RunResult], options: dict[str, object], notes: list[str],
) -> Prediction:
    units = runs[0].units
    # Per unit: mean over measured iterations, then over replications.
    iteration = np.mean([[m.period.mean() for m in r.measures] for r in runs], axis=0)
    compute = np.mean([[m.compute.mean() for m in r.measures] for r in runs], axis=0)
    wait = np.mean([[m.wait.mean() for m in r.measures] for r in runs], axis=0)
    communication = np.maximum(iteration - compute - wait, 0.0)

    runs_of_workers = []
    for u, unit in enumerate(units):
        g = unit.group
        for name, first, count in member_runs(g, unit.first, unit.count):
            template = WorkerResult(
                sc.worker_name(first), name, g.device, g.batch_size, float(iteration[u]),
                g.batch_size / float(iteration[u]), float(compute[u]),
                float(communication[u]), float(wait[u]))
            runs_of_workers.append((template, first, count))
    counts = np.array([u.count for u in units], dtype=float)
    batches = np.array([u.group.batch_size for u in units], dtype=float)
    n = counts.sum()
    mean_iteration = float(counts @ iteration / n)
    throughput = float(counts @ (batches / iteration))
    single, standalone_sum = single_worker_baseline(sc)

    names = [name for name, _ in runs[0].utilization]
    shares = np.mean([[u for _, u in r.utilization] for r in runs], axis=0) if names else []
    resources = [ResourceUse(name, float(s * mean_iteration), float(s))
                 for name, s in zip(names, shares)]

    times = _group_times(sc, units, iteration, compute, communication, wait)
    bottleneck = _bottleneck(sc, units, compute, times, mean_iteration, resources)

    samples_it, samples_tp = [], []
    for r in runs:
        k = min(len(m.period) for m in r.measures)
        periods = np.array([m.period[:k] for m in r.measures])  # (units, k)
        samples_it.append(counts @ periods / n)
        samples_tp.append((counts * batches) @ (1.0 / periods))
    percentiles = {
        "iteration_time_s": _spread(mean_iteration, np.concatenate(samples_it)),
        "throughput_samples_per_s": _spread(throughput, np.concatenate(samples_tp)),
    }

    inputs = describe_inputs(sc, "simulate")
    inputs["simulate"] = options
    all_notes = [goodput_note(sc.cluster.goodput), *sc.notes, *notes]
    mean = lambda values: float(counts @ values / n)  # noqa: E731
    return Prediction(
        method="simulate",
        iteration_time_s=mean_iteration,
        throughput_samples_per_s=throughput,
        speedup=throughput / float(single["throughput_samples_per_s"]),  # type: ignore[arg-type]
        scaling_efficiency=throughput / standalone_sum,
        bottleneck=bottleneck,
        breakdown_s=breakdown(mean(compute), mean(communication), mean(wait),
                              mean(communication * _intra_shares(sc, units))),
        workers=WorkerGroups(runs_of_workers, sc.worker_name),
        single_worker=single,
        resources=resources,
        inputs=inputs,
        notes=all_notes,
        percentiles=percentiles,
    )


def _intra_shares(sc: Scenario, units: list) -> np.ndarray:
    """Per unit: the share of its communication inside its server (the analytic model's
    attribution: transfer times of the phases, see ``breakdown_s``)."""
    if sc.strategy.arch == "ps":
        return np.array([ps_intra_share(sc, unit.group) for unit in units])
    share = ring_intra_share(sc, ring_phases(sc), list(bucket_layout(sc)[1]))
    return np.full(len(units), share)


def _spread(mean: float, samples: np.ndarray) -> dict[str, float]:
    p5, p50, p95 = np.percentile(samples, [5, 50, 95])
    return {"mean": mean, "p5": float(p5), "p50": float(p50), "p95": float(p95)}


def _group_times(
    sc: Scenario, units: list, iteration: np.ndarray, compute: np.ndarray,
    communication: np.ndarray, wait: np.ndarray,
) -> list[GroupTime]:
    """Worker-weighted means per scenario group (what the analytic bottleneck rule reads)."""
    out = []
    for group in sc.groups:
        idx = [u for u, unit in enumerate(units) if unit.group is group]
        w = np.array([units[u].count for u in idx], dtype=float)
        out.append(GroupTime(*(float(w @ a[idx] / w.sum())
                                for a in (iteration, compute, communication, wait))))
    return out


def _bottleneck(
    sc: Scenario, units: list, compute: np.ndarray, times: list[GroupTime], period: float,
    resources: list[ResourceUse],
) -> str:
    if not resources:
        return "compute"
    name = name_bottleneck(sc, times, period, resources)
    if name.startswith("straggler"):
        # The worker with the most compute, not just the first of the slowest group.
        return f"straggler {sc.worker_name(units[int(np.argmax(compute))].first)}"
    if sc.strategy.arch == "allreduce" and name != "compute":
        return f"ring ({name})"
    return name
