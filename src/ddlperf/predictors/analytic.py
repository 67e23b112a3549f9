"""Coarse-grained models (closed form and queueing), after Zeng, Zhang and Li et al.

- BSP parameter server: per-link FIFO pipelines (pull → forward, backward → push → update);
  the slowest worker and the busiest shard link set the pace. Heterogeneous workers and shard
  imbalance are exact inputs, overlap (WFBP) is a switch.
- ASP parameter server: mean value analysis of a closed queueing network — workers are delay
  stations (think time = compute), shard downlinks, uplinks and update processors are queues —
  so throughput saturates at the PS bottleneck. Multi-class (Schweitzer) for mixed workers.
- SSP(s): SSP(0) is BSP; for s ≥ 1 the steady state of the read rule of
  :mod:`ddlperf.strategy`: BSP's schedule where ASP would let some workers run faster (the
  bound then holds them and releases their reads with the slowest one's), ASP where ASP
  gives every worker one rate; never worse than BSP.
- Ring all-reduce: 2(N−1) steps of S/N bytes per bucket on the slowest link, buckets in
  gradient-ready order, overlapped with backward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ddlperf.cluster import TCP_ETHERNET_GOODPUT
from ddlperf.prediction import Prediction, ResourceUse, WorkerGroups, WorkerResult, busiest
from ddlperf.predictors.connections import (
    alone_transfer_s,
    capped_rate,
    connection_busy,
    stream_s_per_byte,
)
from ddlperf.predictors.rings import ring_intra_share, ring_phases
from ddlperf.predictors.server_links import (
    aggregates,
    host_endpoints,
    ps_endpoint_rates,
    ps_endpoints,
    ps_intra_share,
    ps_link_busy,
    ps_server_bytes,
)
from ddlperf.predictors.shared_link import shared_link_finish
from ddlperf.predictors.timeline import backward_ready, forward_order, serial_finish
from ddlperf.scenario import GroupPlan, Scenario, ShardPlan

# Below this share of the iteration, exposed communication is not called a bottleneck.
COMPUTE_BOUND_SHARE = 0.05


@dataclass
class GroupTime:
    """Per-group outcome before it is expanded into per-worker results."""

    iteration_s: float
    compute_s: float
    communication_s: float
    wait_s: float
    intra_s: float = 0.0  # the part of communication_s inside servers


# ---------------------------------------------------------------- parameter server, BSP


def colocated_view(sc: Scenario) -> Scenario:
    """The scenario as the PS models see it when shards share their hosts' NICs.

    A colocated shard's host NIC carries two roles: the shard's traffic with the other workers
    (their pushes in, their pulls out) and its own worker's with the other shards. On each
    direction the two mostly follow each other — on the uplink the worker pushes during
    backward, after the shard's pulls; on the downlink it pulls after the other shards'
    updates, when the pushes into its shard are done — so the shard keeps the NIC's rate.
    Without overlap the phases are apart (all pushes, then all pulls), so the host worker moves
    its remote part at the NIC's rate. With overlap its transfers wait for the shard's, so they
    take as long as the NIC needs for both roles per iteration: its rate is scaled so that its
    whole model crosses in that time. Its own shard's part stays local (a host worker with no
    remote shard sends nothing), and it becomes a group of its own. One-GPU hosts only
    (multi-GPU servers: their own model). Known limit: where one shard holds most of the model
    its traffic spans the iteration, the roles overlap, and this view is optimistic (−12% vs
    the simulator for 12 MB vs 2 MB shards).
    """
    hosted = {s.host: s for s in sc.shards if s.host is not None}
    if not hosted or any(g.gpus != 1 for g in sc.groups):
        return sc
    shard_bytes = sc.placement.sum(axis=0)
    total = float(sc.tensor_bytes.sum())
    n = sc.worker_count
    groups: list[GroupPlan] = []

    def part(group: GroupPlan, first: int, count: int, **rates: float) -> GroupPlan:
        return replace(group, first=first, count=count,
                       first_server=group.first_server + first - group.first, **rates)

    for group in sc.groups:
        first, end = group.first, group.first + group.count
        for host in sorted(h for h in hosted if first <= h < end):
            if host > first:
                groups.append(part(group, first, host - first))
            shard = hosted[host]
            serving = (n - 1) * float(shard_bytes[shard.index])  # each way, other workers
            own = total - float(shard_bytes[shard.index])  # its worker, other shards
            busy = serving + own if sc.strategy.overlap else own
            scale = total / busy if own > 0 else math.inf
            groups.append(part(group, host, 1, up=group.up * scale, down=group.down * scale))
            first = host + 1
        if first < end:
            groups.append(part(group, first, end - first))
    return replace(sc, groups=tuple(groups))


def _ps_senders(sc: Scenario) -> np.ndarray:
    """Endpoints (workers, or servers when aggregating) whose traffic to each shard crosses
    the network (a colocated host's do not)."""
    n = sum(ps_endpoints(sc, g) for g in sc.groups)
    return np.array([n - _at_host(sc, s) for s in sc.shards], dtype=float)


def _at_host(sc: Scenario, shard: ShardPlan) -> int:
    if shard.host is None:
        return 0
    return host_endpoints(sc, sc.group_of(shard.host))


# Passes of the one-iteration map before its period is taken as converged.
MAX_PASSES = 8


@dataclass(frozen=True)
class _PsLayout:
    """Index arrays that depend only on the workload and the placement (cached per sweep)."""

    holds: np.ndarray  # (tensors, shards): shard k holds (part of) tensor j; gradient order
    owner_flat: np.ndarray | None  # whole-tensor placement: flat (J, K) index of the holder
    order: np.ndarray  # tensors in forward order (by owning layer)
    layer_has: np.ndarray  # layers owning at least one tensor
    layer_starts: np.ndarray  # first forward-ordered tensor of each such layer
    shard_rows: tuple[np.ndarray, ...]  # tensors (gradient order) held by each shard
    shard_parts: tuple[np.ndarray, ...]  # their bytes on that shard
    ready_sorted: bool  # gradient order follows reverse layer order (ready times ascend)


def ps_layout(sc: Scenario) -> _PsLayout:
    key = ("ps_layout", sc.strategy.sharding, len(sc.shards))
    cache = sc.workload.derived_cache
    if key not in cache:
        holds = sc.placement > 0
        owner_flat = None
        if np.all(holds.sum(axis=1) == 1):
            owner_flat = np.arange(len(holds)) * holds.shape[1] + np.argmax(holds, axis=1)
        order = forward_order(sc)
        layers_fwd = sc.tensor_layer[order]
        starts = np.flatnonzero(np.r_[True, layers_fwd[1:] != layers_fwd[:-1]])
        rows = tuple(np.flatnonzero(holds[:, k]) for k in range(holds.shape[1]))
        cache[key] = _PsLayout(
            holds=holds,
            owner_flat=owner_flat,
            order=order,
            layer_has=layers_fwd[starts],
            layer_starts=starts,
            shard_rows=rows,
            shard_parts=tuple(sc.placement[r, k] for k, r in enumerate(rows)),
            ready_sorted=bool(np.all(np.diff(sc.tensor_layer) <= 0)),
        )
    return cache[key]


def _per_tensor(layout: _PsLayout, matrix: np.ndarray) -> np.ndarray:
    """Latest finish over the shards that hold each tensor."""
    if layout.owner_flat is not None:
        return matrix.ravel()[layout.owner_flat]
    return np.where(layout.holds, matrix, -np.inf).max(axis=1)


def _ps_bsp(sc: Scenario) -> tuple[list[GroupTime], float, list[ResourceUse]]:
    """Iterate the one-iteration map of a max-plus system until its period settles.

    With overlap, a tensor's pull starts as soon as the shard has applied its update, so the
    pulls of one iteration overlap the pushes of the last tensors (PS uplinks and downlinks
    are independent directions). Starting from "all pulls at once", each pass feeds the update
    times of the last pass back as pull releases; the period converges in a few passes.
    """
    layout = ps_layout(sc)
    senders = _ps_senders(sc)
    zeros = np.zeros(len(sc.tensor_bytes))
    updates, ends = _bsp_pass(sc, layout, senders, zeros, [-np.inf] * len(sc.groups))
    period = max(float(updates.max()), *ends)
    if sc.strategy.overlap:
        for _ in range(MAX_PASSES - 1):
            updates, ends = _bsp_pass(sc, layout, senders, updates - period,
                                      [end - period for end in ends])
            new_period = max(float(updates.max()), *ends)
            settled = abs(new_period - period) <= 1e-9 * new_period
            period = new_period
            if settled:
                break

    slowest = max(g.compute_s for g in sc.groups)
    times = [
        GroupTime(period, g.compute_s, period - slowest, slowest - g.compute_s)
        for g in sc.groups
    ]
    shard_bytes = sc.placement.sum(axis=0)
    busy = []
    for k, shard in enumerate(sc.shards):
        volume = float(senders[k] * shard_bytes[k])
        busy.append((f"{shard.name} downlink", volume / shard.down))
        busy.append((f"{shard.name} uplink", volume / shard.up))
        busy.append((f"{shard.name} update", float(shard_bytes[k]) * shard.update_s_per_byte))
    busy += connection_busy(sc)
    busy += ps_link_busy(sc)
    resources = [ResourceUse(name, b, b / period) for name, b in busy]
    return times, period, resources


def _bsp_pass(
    sc: Scenario, layout: _PsLayout, senders: np.ndarray, release: np.ndarray,
    previous_end: list[float],
) -> tuple[np.ndarray, list[float]]:
    """One BSP iteration: pull → forward → backward → push → update, as FIFO links.

    ``release`` (gradient order) is when each tensor's pull may start and ``previous_end``
    when each group finished its last backward, both relative to this iteration's origin.
    Returns each tensor's update finish and each group's backward end.
    """
    overlap = sc.strategy.overlap
    alpha = sc.latency_s
    sizes, placement = sc.tensor_bytes, sc.placement
    ps_up = np.array([s.up for s in sc.shards])

    # Pull: each shard's uplink sends its tensors to every worker as they are released.
    up_ready = np.where(layout.holds, release[:, None], -np.inf)
    pulled = _per_tensor(layout, serial_finish(up_ready,
                                               placement * stream_s_per_byte(sc, senders, ps_up)))
    by_release = np.argsort(release, kind="stable")
    ready_in_order = release[by_release]

    readies, ends = [], []
    for group, before in zip(sc.groups, previous_end):
        down = ps_endpoint_rates(sc, group)[1]
        down_done = np.empty(len(sizes))
        down_done[by_release] = serial_finish(ready_in_order, sizes[by_release] / down)
        arrival = np.maximum(pulled, down_done) + alpha
        if aggregates(sc, group):  # all-gather the pulled slices over the fabric
            arrival = _inside_server(sc, group, arrival)
        if overlap:  # a layer starts once its parameters arrived and the previous layer ended
            layer_arrival = np.zeros(len(group.forward))
            layer_arrival[layout.layer_has] = np.maximum.reduceat(arrival[layout.order],
                                                                  layout.layer_starts)
            layer_arrival[0] = max(layer_arrival[0], before)
            forward_end = float(serial_finish(layer_arrival, group.forward)[-1])
        else:
            forward_end = max(float(arrival.max()), before) + group.forward_s
        ready, backward_end = backward_ready(sc, group, forward_end + group.unattributed_s)
        if not overlap:
            ready = np.full_like(ready, backward_end)
        if aggregates(sc, group):  # reduce-scatter the gradients over the fabric first
            ready = _inside_server(sc, group, ready)
        readies.append(ready)
        ends.append(backward_end)

    # Push: each endpoint's uplink and each shard's downlink are FIFO links.
    sent = serial_finish(readies[0], sizes / ps_endpoint_rates(sc, sc.groups[0])[0])
    for group, ready in zip(sc.groups[1:], readies[1:]):
        sent = np.maximum(sent, serial_finish(ready, sizes / ps_endpoint_rates(sc, group)[0]))
    if len(sc.groups) == 1 and layout.ready_sorted:
        updates = _shards_one_group(sc, layout, readies[0], sent, senders)
    else:
        updates = _shards_general(sc, layout, readies, sent)
    return updates, ends


def _inside_server(sc: Scenario, group: GroupPlan, ready: np.ndarray) -> np.ndarray:
    """Local aggregation's reduce-scatter (or all-gather) of each tensor inside a server: a
    FIFO over the fabric in the order tensors become ready, (G−1) steps of 1/G of the tensor,
    their latencies paid on arrival (as a connection pays them)."""
    g = group.gpus
    order = np.argsort(ready, kind="stable")
    work = (g - 1) / g * sc.tensor_bytes[order] / group.intra
    done = np.empty_like(ready)
    done[order] = serial_finish(ready[order], work) + (g - 1) * sc.latency_s
    return done


def _shards_one_group(
    sc: Scenario, layout: _PsLayout, ready: np.ndarray, sent: np.ndarray, senders: np.ndarray
) -> np.ndarray:
    """All shards at once: one FIFO per column of a (tensors × shards) matrix.

    Tensors a shard does not hold are zero-work items; with ready times in order they leave
    each FIFO unchanged, so every shard's downlink and update queue is one matrix operation.
    """
    down = np.array([s.down for s in sc.shards])
    update = np.array([s.update_s_per_byte for s in sc.shards])
    done = serial_finish(ready[:, None], sc.placement * stream_s_per_byte(sc, senders, down))
    arrived = np.maximum(done, sent[:, None]) + sc.latency_s
    if np.any(update > 0):
        arrived = serial_finish(arrived, sc.placement * update)
    return _per_tensor(layout, arrived)


def _shards_general(
    sc: Scenario, layout: _PsLayout, readies: list[np.ndarray], sent: np.ndarray
) -> np.ndarray:
    """Shard by shard, for mixed worker groups.

    TCP shares a shard's downlink between its senders: each group's gradient stream is a
    FIFO, and the streams share the link max-min fairly while they are active
    (:mod:`ddlperf.predictors.shared_link`); a tensor is complete at the shard when the last
    group delivered it. Merging all streams into one FIFO instead would make a straggler's
    first gradient wait behind the fast workers' last ones.
    """
    updates = np.full(len(sc.tensor_bytes), -np.inf)
    for k, shard in enumerate(sc.shards):
        rows = layout.shard_rows[k]
        if not len(rows):
            continue
        part = layout.shard_parts[k]
        counts = [
            ps_endpoints(sc, group) - (_at_host(sc, shard) if shard.host is not None
                                       and group.first <= shard.host < group.first + group.count
                                       else 0)
            for group in sc.groups
        ]
        caps = [capped_rate(sc, ps_endpoint_rates(sc, group)[0]) for group in sc.groups]
        done = np.full(len(rows), -np.inf)
        for finish in shared_link_finish([ready[rows] for ready in readies], part,
                                         [float(c) for c in counts], caps, shard.down):
            done = np.maximum(done, finish)
        arrived = np.maximum(done, sent[rows]) + sc.latency_s
        # Update: the shard applies a tensor once all N gradients of it arrived (FIFO).
        by_time = np.argsort(arrived, kind="stable")
        finish = serial_finish(arrived[by_time], part[by_time] * shard.update_s_per_byte)
        updates[rows[by_time]] = np.maximum(updates[rows[by_time]], finish)
    return updates


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
        # exact recursion over the population; plain floats beat numpy for a few stations
        d = demand[:, 0].tolist()
        z = float(think[0])
        queue = [0.0] * stations
        residence = d
        throughput = 0.0
        for n in range(1, int(population[0]) + 1):
            residence = [di * (1.0 + qi) for di, qi in zip(d, queue)]
            throughput = n / (z + sum(residence))
            queue = [throughput * r for r in residence]
        return np.array([throughput]), np.array(residence)[:, None]
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


def _alone_cycle(sc: Scenario, group: GroupPlan) -> float:
    """One worker of ``group`` alone with the shards: its pipelined, contention-free cycle (a
    shard on its own host stays local)."""
    solo = replace(
        sc, groups=(replace(group, count=1, first=0),),
        shards=tuple(replace(shard, host=0 if _hosts(shard, group) == group.count else None)
                     for shard in sc.shards),
    )
    return _ps_bsp(solo)[1]


def _hosts(shard: ShardPlan, group: GroupPlan) -> int:
    """How many of ``group``'s workers talk to ``shard`` without the network (its host's)."""
    if shard.host is not None and group.first <= shard.host < group.first + group.count:
        return shard.host_gpus
    return 0


def _ps_queueing(sc: Scenario) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Think times (C,), station demands (S, C), populations (C,) and station names.

    Each shard's downlink, uplink and optimizer are queueing stations; a class's demand at a
    shard's links is its workers' mean remote share of the shard's bytes (nothing for the
    shard's own host). With overlap a worker pushes some tensors while pulling others, so a
    shard's three resources work as a pipeline: they become one station whose demand is the
    largest of the three (the saturation limit is unchanged, the contention-free cycle is not
    inflated). The think time is then set so that one worker alone sees exactly its
    pipelined cycle from the BSP model.
    """
    alpha = sc.latency_s
    shard_bytes = sc.placement.sum(axis=0)
    # per part (downlink, uplink, update): the shards work in parallel (a worker's tensors go
    # to all of them at once), so the part is one station at the busiest shard's demand
    parts: dict[str, tuple[str, np.ndarray]] = {}
    for part in ("downlink", "uplink", "update"):
        best: tuple[str, np.ndarray] | None = None
        for k, shard in enumerate(sc.shards):
            remote = np.array([1.0 - _hosts(shard, g) / g.count for g in sc.groups])
            if part == "update":
                d = np.full(len(sc.groups), shard_bytes[k] * shard.update_s_per_byte)
            else:
                rate = shard.down if part == "downlink" else shard.up
                d = shard_bytes[k] * remote / rate
            if best is None or float(d.max()) > float(best[1].max()):
                best = (f"{shard.name} {part}", d)
        assert best is not None
        parts[part] = best
    if sc.strategy.overlap:  # push, update and pull pipelined: one station, the largest
        name, d = max(parts.values(), key=lambda item: float(item[1].max()))
        names, rows = [name], [np.max(np.array([v for _n, v in parts.values()]), axis=0)]
    else:
        names = [n for n, _v in parts.values()]
        rows = [v for _n, v in parts.values()]
    demand = np.array(rows)
    if sc.strategy.overlap:
        think = np.array([max(_alone_cycle(sc, g) - float(demand[:, c].sum()), 0.0)
                          for c, g in enumerate(sc.groups)])
    else:
        think = np.array([
            g.compute_s + 2 * alpha
            + max(0.0, alone_transfer_s(sc, g, g.up) - float(rows[0][c]))
            + max(0.0, alone_transfer_s(sc, g, g.down) - float(rows[1][c]))
            for c, g in enumerate(sc.groups)
        ])
    population = np.array([g.count for g in sc.groups], dtype=float)
    return think, demand, population, names


def _ps_async(sc: Scenario) -> tuple[list[GroupTime], float, list[ResourceUse]]:
    """ASP: each worker class at the rate the closed queueing network gives it (no wait).

    Identical workers are what the network does not see. Sharing the PS links fairly, they
    keep whatever phase offsets they have (a worker that starts its transfers δ later also
    ends them δ later), so the offsets are neutral and noise makes them wander. In lockstep
    every transfer runs at once and the links idle during the gap Z in which all workers
    compute without a transfer (BSP's schedule); offset, the others' transfers fill it. With
    each worker's offset from the first uniform over the gap, the gap left unfilled is
    Z − E[range of the offsets] = Z / N, so the period is the network's plus 1/N of the
    way to lockstep's (N = 2: the midpoint; many workers: the network's).
    """
    think, demand, population, _names = _ps_queueing(sc)
    throughput, _ = mva(think, demand, population)
    periods = population / throughput
    if len(sc.groups) == 1 and sc.groups[0].count > 1:
        periods = periods + (_ps_bsp(sc)[1] - periods) / sc.groups[0].count
    times = [GroupTime(float(p), g.compute_s, max(float(p) - g.compute_s, 0.0), 0.0)
             for g, p in zip(sc.groups, periods)]
    mean_period = float((periods * population).sum() / population.sum())
    return times, mean_period, async_resources(sc, [float(p) for p in periods], mean_period)


def async_resources(sc: Scenario, periods: list[float], mean_period: float
                    ) -> list[ResourceUse]:
    """Every station's utilization when each worker of group c runs at period ``periods[c]``:
    the shards' downlinks, uplinks and update processors (each gradient is an update) and
    one worker's uplink and downlink per group (busy seconds per mean period). A colocated
    shard's links are its host's NIC, reported under the shard's name; the host worker gets
    no entry of its own."""
    shard_bytes = sc.placement.sum(axis=0)
    busy: list[tuple[str, float]] = []
    for k, shard in enumerate(sc.shards):
        crossing = sum((g.count - _hosts(shard, g)) / p for g, p in zip(sc.groups, periods))
        arriving = sum(g.count / p for g, p in zip(sc.groups, periods))
        busy += [(f"{shard.name} downlink", crossing * shard_bytes[k] / shard.down),
                 (f"{shard.name} uplink", crossing * shard_bytes[k] / shard.up),
                 (f"{shard.name} update",
                  arriving * shard_bytes[k] * shard.update_s_per_byte)]
    for g, p in zip(sc.groups, periods):  # named as BSP names them
        if any(_hosts(shard, g) == g.count for shard in sc.shards):
            continue
        nic, intra = ps_server_bytes(sc, g)
        busy += [(g.nic_name("uplink"), nic / (g.nic_up * p)),
                 (g.nic_name("downlink"), nic / (g.nic_down * p))]
        if g.intra is not None:
            busy.append((g.intra_name(), intra / (g.intra * p)))
    busy += connection_busy(sc, periods)
    return [ResourceUse(name, u * mean_period, u) for name, u in busy]


# SSP: ASP rates this close count as one rate (the staleness bound never holds anyone).
ASP_RATES_AGREE = 0.005


def _ps_ssp(sc: Scenario) -> tuple[list[GroupTime], float, list[ResourceUse]]:
    """SSP(s ≥ 1) in steady state, by the read rule of :mod:`ddlperf.strategy`.

    Where ASP would run some workers faster than the slowest, they gain on it until they are
    s iterations ahead, and from then on the bound releases their reads of a tensor with the
    slowest worker's update of it — the moment the slowest one reads it too. Every read
    coincides as under BSP, so the steady state is BSP's schedule (each gradient applied on
    arrival; s sets only how long the catch-up takes — a run shorter than that shows ASP's
    rates). Identical workers keep one rate and nobody is held: SSP is ASP there, never
    slower than BSP, whose schedule SSP could follow.
    """
    times, period, resources = _ps_async(sc)
    periods = [t.iteration_s for t in times]
    bsp = _ps_bsp(sc)
    if max(periods) > min(periods) * (1 + ASP_RATES_AGREE) or period >= bsp[1]:
        return bsp
    return times, period, resources


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


def bucket_layout(sc: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """Last tensor (gradient order) and bytes of each bucket, cached per bucket size."""
    cache = sc.workload.derived_cache
    key = ("bucket_layout", sc.strategy.bucket_bytes)
    if key not in cache:
        members = buckets(sc.tensor_bytes, sc.strategy.bucket_bytes)
        cache[key] = (np.array([b[-1] for b in members]),
                      np.array([sc.tensor_bytes[b].sum() for b in members]))
    return cache[key]


def _allreduce(sc: Scenario) -> tuple[list[GroupTime], float, list[ResourceUse]]:
    """Buckets in gradient-ready order on one stream; each bucket runs the ring's phases."""
    phases = ring_phases(sc)
    last, bucket_bytes = bucket_layout(sc)
    total = float(sc.tensor_bytes.sum())
    ready = np.full(len(last), -np.inf)
    end_all = 0.0
    computes = []
    for group in sc.groups:
        update = total * group.update_s_per_byte
        tensor_ready, backward_end = backward_ready(
            sc, group, group.forward_s + group.unattributed_s)
        # Offsetting by the optimizer step turns "all start together" into the steady state.
        if sc.strategy.overlap:
            bucket_ready = tensor_ready[last]
        else:
            bucket_ready = np.full(len(last), backward_end)
        ready = np.maximum(ready, update + bucket_ready)
        end_all = max(end_all, update + backward_end)
        computes.append(group.compute_s + update)
    per_phase = [np.array([phase.seconds(s, sc.latency_s) for s in bucket_bytes])
                 for phase in phases]
    step = sum(per_phase) if per_phase else np.zeros(len(bucket_bytes))
    finish = serial_finish(ready, step)
    period = max(float(finish[-1]), end_all)
    slowest = max(computes)
    busy: dict[str, float] = {}
    for phase, seconds in zip(phases, per_phase):
        name = f"ring ({phase.binding})"
        busy[name] = busy.get(name, 0.0) + float(seconds.sum())
    share = ring_intra_share(sc, phases, list(bucket_bytes))
    times = [GroupTime(period, c, period - slowest, slowest - c, share * (period - slowest))
             for c in computes]
    resources = [ResourceUse(name, b, b / period) for name, b in busy.items()]
    return times, period, resources


# ---------------------------------------------------------------- assembly


SATURATED = 0.8  # a shared station this busy paces asynchronous workers


def name_bottleneck(
    sc: Scenario, times: list[GroupTime], period: float, resources: list[ResourceUse]
) -> str:
    """What limits the iteration rate, with the one tie rule of :func:`busiest`.

    Synchronized workers (BSP, all-reduce, and SSP whose bound holds someone — the same
    schedule as BSP): the straggler if waiting for it is the largest exposed part, compute if
    communication is hidden, else the busiest resource. Asynchronous workers (ASP, SSP whose
    bound holds nobody) each run their own cycle: a shared station at least 80% busy paces
    them; below that, compute when it is the larger part of a worker's period, else the
    busiest resource.
    """
    slowest_group = max(zip(sc.groups, times), key=lambda gt: gt[1].compute_s)[0]
    max_wait = max(t.wait_s for t in times)
    exposed = period - max(t.compute_s for t in times)
    held = sc.strategy.sync == "ssp" and max_wait > COMPUTE_BOUND_SHARE * period
    if sc.strategy.arch == "ps" and sc.strategy.effective_sync != "bsp" and not held:
        hot = busiest(resources)
        if hot.utilization >= SATURATED:
            return hot.name
        compute = sum(t.compute_s for t in times) / len(times)
        communication = sum(t.communication_s for t in times) / len(times)
        if compute >= communication:
            return "compute"
        return hot.name
    if max_wait > exposed and max_wait > COMPUTE_BOUND_SHARE * period:
        return f"straggler {slowest_group.worker_name()}"
    if exposed <= COMPUTE_BOUND_SHARE * period:
        return "compute"
    return busiest(resources).name


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
        template = WorkerResult(
            group.worker_name(), group.name, group.device, group.batch_size, t.iteration_s,
            group.batch_size / t.iteration_s, t.compute_s, t.communication_s, t.wait_s,
        )
        runs.append((template, group.first, group.count))
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


def predict_analytic(sc: Scenario) -> Prediction:
    """Coarse-grained prediction of a resolved scenario."""
    strategy = sc.strategy
    notes: list[str] = []
    if strategy.arch == "ps":
        sc = colocated_view(sc)
    if strategy.arch == "allreduce":
        times, period, resources = _allreduce(sc)
    elif strategy.effective_sync == "bsp":
        times, period, resources = _ps_bsp(sc)
    else:
        times, period, resources = _ps_ssp(sc) if strategy.sync == "ssp" else _ps_async(sc)
        notes.append("analytic ASP/SSP: mean value analysis of a closed queueing network; SSP "
                     "in steady state (BSP's schedule where the staleness bound holds the "
                     "faster workers)")
    bottleneck = name_bottleneck(sc, times, period, resources)
    return assemble(sc, "analytic", times, resources, bottleneck, notes)
