"""Coarse-grained models (closed form and queueing), after Zeng, Zhang and Li et al.

- BSP parameter server: per-link FIFO pipelines (pull → forward, backward → push → update);
  the slowest worker and the busiest shard link set the pace. Heterogeneous workers and shard
  imbalance are exact inputs, overlap (WFBP) is a switch.
- ASP parameter server: mean value analysis of a closed queueing network — workers are delay
  stations (think time = compute), shard downlinks, uplinks and update processors are queues —
  so throughput saturates at the PS bottleneck. Multi-class (Schweitzer) for mixed workers.
- SSP(s): SSP(0) is BSP; for s ≥ 1 every worker's long-run rate is capped by the slowest
  worker's (it may only run s iterations ahead), solved as ASP with that cap, never worse
  than BSP.
- Ring all-reduce: 2(N−1) steps of S/N bytes per bucket on the slowest link, buckets in
  gradient-ready order, overlapped with backward.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddlperf.prediction import Prediction, ResourceUse, WorkerResult
from ddlperf.predictors.timeline import backward_ready, forward_order, serial_finish
from ddlperf.scenario import GroupPlan, Scenario

# Below this share of the iteration, exposed communication is not called a bottleneck.
COMPUTE_BOUND_SHARE = 0.05


@dataclass
class _GroupTime:
    """Per-group outcome before it is expanded into per-worker results."""

    iteration_s: float
    compute_s: float
    communication_s: float
    wait_s: float


# ---------------------------------------------------------------- parameter server, BSP


def _ps_senders(sc: Scenario) -> np.ndarray:
    """Workers whose traffic to each shard crosses the network (a colocated host's does not)."""
    n = sc.worker_count
    return np.array([n - (1 if s.host is not None else 0) for s in sc.shards], dtype=float)


def _ps_bsp(sc: Scenario) -> tuple[list[_GroupTime], float, list[ResourceUse]]:
    overlap = sc.strategy.overlap
    alpha = sc.latency_s
    sizes, placement = sc.tensor_bytes, sc.placement
    senders = _ps_senders(sc)
    ps_up = np.array([s.up for s in sc.shards])
    ps_down = np.array([s.down for s in sc.shards])
    ps_update = np.array([s.update_s_per_byte for s in sc.shards])
    holds = placement > 0

    # Pull: every shard sends its part of each tensor to every worker, in forward order.
    order = forward_order(sc)
    pull_up = np.cumsum(placement[order] * (senders / ps_up), axis=0)  # (J, K) finish
    pull_up_done = np.zeros(len(sizes))
    pull_up_done[order] = np.where(holds[order], pull_up, 0.0).max(axis=1)

    readies, group_ends = [], []
    for group in sc.groups:
        down_done = np.empty(len(sizes))
        down_done[order] = np.cumsum(sizes[order] / group.down)
        arrival = np.maximum(pull_up_done, down_done) + alpha
        layer_arrival = np.zeros(len(group.forward))
        np.maximum.at(layer_arrival, sc.tensor_layer, arrival)
        if overlap:
            forward_end = float(serial_finish(layer_arrival, group.forward)[-1])
        else:
            forward_end = float(layer_arrival.max() + group.forward.sum())
        ready, backward_end = backward_ready(sc, group, forward_end + group.unattributed_s)
        if not overlap:
            ready = np.full_like(ready, backward_end)
        readies.append(ready)
        group_ends.append(backward_end)

    # Push: each worker's uplink and each shard's downlink are FIFO links.
    sent = np.zeros(len(sizes))
    for group, ready in zip(sc.groups, readies):
        sent = np.maximum(sent, serial_finish(ready, sizes / group.up))
    arrived = np.zeros((len(sizes), len(sc.shards)))
    for k, shard in enumerate(sc.shards):
        part = placement[:, k]
        items_ready, items_work, items_tensor = [], [], []
        for group, ready in zip(sc.groups, readies):
            count = group.count - (1 if shard.host is not None and
                                   group.first <= shard.host < group.first + group.count else 0)
            if count:
                items_ready.append(ready)
                items_work.append(part * count / shard.down)
                items_tensor.append(np.arange(len(sizes)))
        ready_all = np.concatenate(items_ready)
        work_all = np.concatenate(items_work)
        tensor_all = np.concatenate(items_tensor)
        if len(items_ready) > 1:
            by_time = np.argsort(ready_all, kind="stable")
            ready_all, work_all, tensor_all = (
                ready_all[by_time], work_all[by_time], tensor_all[by_time])
        finish = serial_finish(ready_all, work_all)
        done = np.zeros(len(sizes))
        np.maximum.at(done, tensor_all, finish)
        arrived[:, k] = np.maximum(done, sent) + alpha

    # Update: each shard applies a tensor once all N gradients of it arrived (FIFO).
    period = max(group_ends)
    for k in range(len(sc.shards)):
        mask = holds[:, k]
        if not mask.any():
            continue
        when = arrived[mask, k]
        by_time = np.argsort(when, kind="stable")
        finish = serial_finish(when[by_time], placement[mask, k][by_time] * ps_update[k])
        period = max(period, float(finish[-1]))

    slowest = max(g.compute_s for g in sc.groups)
    times = [
        _GroupTime(period, g.compute_s, period - slowest, slowest - g.compute_s)
        for g in sc.groups
    ]
    shard_bytes = placement.sum(axis=0)
    busy = []
    for k, shard in enumerate(sc.shards):
        busy.append((f"{shard.name} downlink", senders[k] * shard_bytes[k] / shard.down))
        busy.append((f"{shard.name} uplink", senders[k] * shard_bytes[k] / shard.up))
        busy.append((f"{shard.name} update", shard_bytes[k] * ps_update[k]))
    total = float(sizes.sum())
    for group in sc.groups:
        busy.append((f"{group.worker_name()} uplink", total / group.up))
        busy.append((f"{group.worker_name()} downlink", total / group.down))
    resources = [ResourceUse(name, float(b), float(b / period)) for name, b in busy]
    return times, period, resources


# ---------------------------------------------------------------- parameter server, ASP/SSP


def mva(
    think: np.ndarray, demand: np.ndarray, population: np.ndarray, iterations: int = 500
) -> tuple[np.ndarray, np.ndarray]:
    """Closed multi-class queueing network by mean value analysis.

    ``think`` (C,) delay-station time per class, ``demand`` (S, C) service demand of a class at
    each queueing station, ``population`` (C,) customers per class. Returns throughput per
    class (C,) and residence times (S, C). One class: exact MVA; several: Bard–Schweitzer.
    """
    stations, classes = demand.shape
    if classes == 1:
        queue = np.zeros(stations)
        throughput = 0.0
        residence = demand[:, 0].copy()
        for n in range(1, int(population[0]) + 1):
            residence = demand[:, 0] * (1.0 + queue)
            throughput = n / (think[0] + residence.sum())
            queue = throughput * residence
        return np.array([throughput]), residence[:, None]
    queue = demand * population / max(demand.shape[0], 1)  # initial guess (S, C)
    throughput = np.zeros(classes)
    residence = demand.copy()
    for _ in range(iterations):
        seen = queue.sum(axis=1, keepdims=True) - queue / population
        residence = demand * (1.0 + seen)
        throughput = population / (think + residence.sum(axis=0))
        new_queue = residence * throughput
        if np.allclose(new_queue, queue, rtol=1e-10, atol=1e-12):
            queue = new_queue
            break
        queue = new_queue
    return throughput, residence


def _ps_queueing(sc: Scenario) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Think times (C,), station demands (S, C), populations (C,) and station names."""
    alpha = sc.latency_s
    total = float(sc.tensor_bytes.sum())
    n = sc.worker_count
    shard_bytes = sc.placement.sum(axis=0)
    names, rows = [], []
    sum_down = sum_up = 0.0
    for k, shard in enumerate(sc.shards):
        remote = (n - 1) / n if shard.host is not None else 1.0
        down, up = shard_bytes[k] * remote / shard.down, shard_bytes[k] * remote / shard.up
        sum_down, sum_up = sum_down + down, sum_up + up
        names += [f"{shard.name} downlink", f"{shard.name} uplink", f"{shard.name} update"]
        rows += [down, up, shard_bytes[k] * shard.update_s_per_byte]
    demand = np.tile(np.array(rows)[:, None], (1, len(sc.groups)))
    think = np.array([
        g.compute_s + 2 * alpha
        + max(0.0, total / g.up - sum_down) + max(0.0, total / g.down - sum_up)
        for g in sc.groups
    ])
    population = np.array([g.count for g in sc.groups], dtype=float)
    return think, demand, population, names


def _ps_async(
    sc: Scenario, bsp_period: float | None
) -> tuple[list[_GroupTime], float, list[ResourceUse]]:
    think, demand, population, names = _ps_queueing(sc)
    staleness = sc.strategy.staleness if sc.strategy.sync == "ssp" else None
    extra = np.zeros_like(think)
    throughput, residence = mva(think, demand, population)
    if staleness is not None:
        # Long-run rates are capped by the slowest worker: the others wait at the bound.
        for _ in range(50):
            period = population / throughput
            slowest = period.max()
            if np.all(period >= slowest * (1 - 1e-9)):
                break
            extra = np.maximum(extra + (slowest - period), 0.0)
            throughput, residence = mva(think + extra, demand, population)
    periods = population / throughput
    if bsp_period is not None and np.all(periods >= bsp_period):
        # SSP can always follow the BSP schedule, so it is never slower than BSP.
        extra = extra - (periods - bsp_period)
        periods = np.full_like(periods, bsp_period)
        extra = np.maximum(extra, 0.0)
    times = []
    for c, group in enumerate(sc.groups):
        wait = float(extra[c])
        comm = float(periods[c]) - group.compute_s - wait
        times.append(_GroupTime(float(periods[c]), group.compute_s, max(comm, 0.0), wait))
    utilization = (demand * throughput).sum(axis=1)
    mean_period = float(np.average(periods, weights=population))
    resources = [
        ResourceUse(name, float(u * mean_period), float(u))
        for name, u in zip(names, utilization)
    ]
    return times, mean_period, resources


# ---------------------------------------------------------------- ring all-reduce


def buckets(sizes: np.ndarray, cap: float) -> list[np.ndarray]:
    """Tensor indices (gradient order) per bucket; a bucket closes once it reaches ``cap``."""
    out, current, filled = [], [], 0.0
    for j, size in enumerate(sizes):
        current.append(j)
        filled += size
        if filled >= cap:
            out.append(np.array(current))
            current, filled = [], 0.0
    if current:
        out.append(np.array(current))
    return out


def ring_allreduce_seconds(size: float, workers: int, rate: float, alpha: float) -> float:
    """2(N−1) steps, each moving size/N bytes over the slowest link plus one latency."""
    if workers <= 1:
        return 0.0
    return 2 * (workers - 1) * (alpha + size / (workers * rate))


def _allreduce(sc: Scenario) -> tuple[list[_GroupTime], float, list[ResourceUse]]:
    n = sc.worker_count
    rate = min(min(g.up, g.down) for g in sc.groups)
    cache = sc.workload.derived_cache
    key = ("buckets", sc.strategy.bucket_bytes)
    if key not in cache:
        cache[key] = buckets(sc.tensor_bytes, sc.strategy.bucket_bytes)
    groups_of_tensors = cache[key]
    last = np.array([b[-1] for b in groups_of_tensors])
    bucket_bytes = np.array([sc.tensor_bytes[b].sum() for b in groups_of_tensors])
    total = float(sc.tensor_bytes.sum())
    ready = np.full(len(last), -np.inf)
    end_all = 0.0
    computes = []
    for group in sc.groups:
        update = total * group.update_s_per_byte
        tensor_ready, backward_end = backward_ready(
            sc, group, float(group.forward.sum()) + group.unattributed_s)
        # Offsetting by the optimizer step turns "all start together" into the steady state.
        bucket_ready = tensor_ready[last] if sc.strategy.overlap else np.full(len(last), backward_end)
        ready = np.maximum(ready, update + bucket_ready)
        end_all = max(end_all, update + backward_end)
        computes.append(group.compute_s + update)
    step = np.array([ring_allreduce_seconds(s, n, rate, sc.latency_s) for s in bucket_bytes])
    finish = serial_finish(ready, step)
    period = max(float(finish[-1]), end_all)
    slowest = max(computes)
    times = [_GroupTime(period, c, period - slowest, slowest - c) for c in computes]
    slow_group = min(sc.groups, key=lambda g: min(g.up, g.down))
    link = "uplink" if slow_group.up <= slow_group.down else "downlink"
    busy = float(step.sum())
    resources = [ResourceUse(f"ring ({slow_group.worker_name()} {link})", busy, busy / period)]
    return times, period, resources


# ---------------------------------------------------------------- assembly


def name_bottleneck(
    sc: Scenario, times: list[_GroupTime], period: float, resources: list[ResourceUse]
) -> str:
    slowest_group = max(zip(sc.groups, times), key=lambda gt: gt[1].compute_s)[0]
    mean_wait = max(t.wait_s for t in times)
    exposed = period - max(t.compute_s for t in times)
    async_mode = sc.strategy.arch == "ps" and sc.strategy.effective_sync != "bsp"
    if async_mode:
        hot = max(resources, key=lambda r: r.utilization)
        if hot.utilization >= 0.8:
            return hot.name
        comm_share = max(t.communication_s / t.iteration_s for t in times)
        if comm_share <= COMPUTE_BOUND_SHARE:
            return "compute"
        if mean_wait > max(t.communication_s for t in times):
            return f"straggler {slowest_group.worker_name()}"
        return hot.name
    if mean_wait > exposed and mean_wait > COMPUTE_BOUND_SHARE * period:
        return f"straggler {slowest_group.worker_name()}"
    if exposed <= COMPUTE_BOUND_SHARE * period:
        return "compute"
    return max(resources, key=lambda r: r.busy_s).name


def single_worker_baseline(sc: Scenario) -> tuple[dict[str, object], float]:
    """Fastest worker alone (no communication) and the sum of all workers' standalone rates."""
    total = float(sc.tensor_bytes.sum())
    best, standalone_sum = None, 0.0
    for group in sc.groups:
        step = group.compute_s + total * group.update_s_per_byte
        rate = group.batch_size / step
        standalone_sum += rate * group.count
        if best is None or rate > best["throughput_samples_per_s"]:
            best = {"worker": group.worker_name(), "device": group.device,
                    "iteration_time_s": step, "throughput_samples_per_s": rate}
    assert best is not None
    return best, standalone_sum


def assemble(
    sc: Scenario, method: str, times: list[_GroupTime], resources: list[ResourceUse],
    bottleneck: str, extra_notes: list[str] | None = None,
) -> Prediction:
    """Expand group results into per-worker results and the cluster-level summary."""
    workers: list[WorkerResult] = []
    for group, t in zip(sc.groups, times):
        rate = group.batch_size / t.iteration_s
        for offset in range(group.count):
            workers.append(WorkerResult(
                group.worker_name(offset), group.name, group.device, group.batch_size,
                t.iteration_s, rate, t.compute_s, t.communication_s, t.wait_s,
            ))
    counts = np.array([g.count for g in sc.groups], dtype=float)
    throughput = float(sum(g.batch_size / t.iteration_s * g.count
                           for g, t in zip(sc.groups, times)))
    mean = lambda values: float(np.dot(values, counts) / counts.sum())  # noqa: E731
    single, standalone_sum = single_worker_baseline(sc)
    notes = [
        f"bandwidth = payload goodput = line rate × {sc.cluster.goodput:.4g}"
        + (" (TCP over Ethernet, 1448/1514)" if abs(sc.cluster.goodput - 1448 / 1514) < 1e-9
           else ""),
        *sc.notes,
        *(extra_notes or []),
    ]
    return Prediction(
        method=method,
        iteration_time_s=mean([t.iteration_s for t in times]),
        throughput_samples_per_s=throughput,
        speedup=throughput / float(single["throughput_samples_per_s"]),  # type: ignore[arg-type]
        scaling_efficiency=throughput / standalone_sum,
        bottleneck=bottleneck,
        breakdown_s={
            "compute": mean([t.compute_s for t in times]),
            "communication": mean([t.communication_s for t in times]),
            "wait": mean([t.wait_s for t in times]),
        },
        workers=workers,
        single_worker=single,
        resources=resources,
        inputs=describe_inputs(sc, method),
        notes=notes,
    )


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


def predict_analytic(sc: Scenario) -> Prediction:
    """Coarse-grained prediction of a resolved scenario."""
    strategy = sc.strategy
    notes: list[str] = []
    if strategy.arch == "allreduce":
        times, period, resources = _allreduce(sc)
    elif strategy.effective_sync == "bsp":
        times, period, resources = _ps_bsp(sc)
    else:
        bsp_period = None
        if strategy.sync == "ssp":
            bsp_period = _ps_bsp(sc)[1]
        times, period, resources = _ps_async(sc, bsp_period)
        notes.append("analytic ASP/SSP: mean value analysis; push, update and pull are "
                     "sequential in this model (use --method simulate for overlap)")
    bottleneck = name_bottleneck(sc, times, period, resources)
    return assemble(sc, "analytic", times, resources, bottleneck, notes)
