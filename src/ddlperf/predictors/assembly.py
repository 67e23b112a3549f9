"""From per-group times to a :class:`~ddlperf.prediction.Prediction` (both predictors).

Per-worker results, the single-worker baseline behind speedup and scaling efficiency, the
time breakdown and the inputs echoed back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from ddlperf.cluster import TCP_ETHERNET_GOODPUT
from ddlperf.prediction import Prediction, ResourceUse, WorkerGroups, WorkerResult
from ddlperf.predictors.server_links import ps_intra_share
from ddlperf.predictors.timeline import backward_ready, serial_finish
from ddlperf.scenario import Scenario, member_runs


@dataclass
class GroupTime:
    """Per-group outcome before it is expanded into per-worker results."""

    iteration_s: float
    compute_s: float
    communication_s: float
    wait_s: float
    intra_s: float = 0.0  # the part of communication_s inside servers


def single_worker_baseline(sc: Scenario) -> tuple[dict[str, object], float]:
    """Fastest worker alone (no communication) and the sum of all workers' standalone rates.

    Alone, a worker still applies each tensor's update as soon as its gradient is ready
    (as a PS would), so no distributed configuration can beat N × this rate.
    """
    best, standalone_sum = None, 0.0
    cache = sc.workload.derived_cache
    for group in sc.groups:
        key = ("alone", id(group.ready_offset), group.update_s_per_byte)
        if key not in cache:
            ready, _ = backward_ready(sc, group, group.forward_s + group.unattributed_s)
            cache[key] = float(serial_finish(ready, sc.tensor_bytes * group.update_s_per_byte)[-1])
        step = cache[key]
        rate = group.batch_size / step
        standalone_sum += rate * group.count
        if best is None or rate > best["throughput_samples_per_s"]:
            best = {"worker": group.worker_name(), "device": group.device,
                    "iteration_time_s": step, "throughput_samples_per_s": rate}
    assert best is not None
    return best, standalone_sum


@lru_cache(maxsize=64)
def goodput_note(goodput: float) -> str:
    tcp = abs(goodput - TCP_ETHERNET_GOODPUT) < 1e-9
    return (f"bandwidth = payload goodput = line rate × {goodput:.4g}"
            + (" (TCP over Ethernet, 1448/1514)" if tcp else ""))


def assemble(
    sc: Scenario, method: str, times: list[GroupTime], resources: list[ResourceUse],
    bottleneck: str, extra_notes: list[str] | None = None,
) -> Prediction:
    """Expand group results into per-worker results and the cluster-level summary."""
    if sc.strategy.arch == "ps":
        times = [replace(t, intra_s=ps_intra_share(sc, g) * t.communication_s)
                 for g, t in zip(sc.groups, times)]
    runs = []
    for group, t in zip(sc.groups, times):
        for name, first, count in member_runs(group, group.first, group.count):
            template = WorkerResult(
                sc.worker_name(first), name, group.device, group.batch_size, t.iteration_s,
                group.batch_size / t.iteration_s, t.compute_s, t.communication_s, t.wait_s,
            )
            runs.append((template, first, count))
    workers = WorkerGroups(runs, sc.worker_name)
    counts = [g.count for g in sc.groups]
    n = sum(counts)
    throughput = sum(g.batch_size / t.iteration_s * g.count for g, t in zip(sc.groups, times))

    def mean(values: list[float]) -> float:
        return sum(v * c for v, c in zip(values, counts)) / n

    single, standalone_sum = single_worker_baseline(sc)
    notes = [goodput_note(sc.cluster.goodput), *sc.notes, *(extra_notes or [])]
    return Prediction(
        method=method,
        iteration_time_s=mean([t.iteration_s for t in times]),
        throughput_samples_per_s=throughput,
        speedup=throughput / float(single["throughput_samples_per_s"]),  # type: ignore[arg-type]
        scaling_efficiency=throughput / standalone_sum,
        bottleneck=bottleneck,
        breakdown_s=breakdown(
            mean([t.compute_s for t in times]), mean([t.communication_s for t in times]),
            mean([t.wait_s for t in times]), mean([t.intra_s for t in times])),
        workers=workers,
        single_worker=single,
        resources=resources,
        inputs=describe_inputs(sc, method),
        notes=notes,
    )


def breakdown(compute: float, communication: float, wait: float,
              intra: float) -> dict[str, float]:
    """``breakdown_s``: compute, communication (exposed, in all), wait, and communication
    split into the part inside servers and the part between them (the split keys add up to
    ``communication``; the first three to the iteration time)."""
    return {"compute": compute, "communication": communication, "wait": wait,
            "communication_intra": intra, "communication_inter": communication - intra}


def describe_inputs(sc: Scenario, method: str) -> dict[str, object]:
    w = sc.workload
    return {
        "method": method,
        "workload": {
            "name": w.name, "batch_size": w.batch_size, "device": w.device, "dtype": w.dtype,
            "layers": len(w.layers), "parameter_bytes": w.parameter_bytes,
            "compute_s": w.compute_s, "source": w.provenance.get("source"),
        },
        "cluster": sc.cluster.to_dict(),
        "strategy": sc.strategy.to_dict(),
    }
