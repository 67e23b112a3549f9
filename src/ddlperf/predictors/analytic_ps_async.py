"""ASP and SSP parameter server: a closed queueing network and SSP's steady state.

ASP: mean value analysis (:mod:`ddlperf.predictors.queueing`) — workers are delay stations
(think time = compute), shard downlinks, uplinks and update processors are queues — so
throughput saturates at the PS bottleneck; multi-class (Schweitzer) for mixed workers. On
dedicated shards never slower than BSP's schedule where the network puts every worker at or
above it (lockstep is a schedule ASP can keep; workers at several rates: the slowest at BSP's
period, the others faster in the network's proportion). SSP(s ≥ 1): BSP's schedule where ASP would
let some workers run faster (the bound then holds them), ASP where ASP gives every worker one
rate; never worse than BSP.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import fields, is_dataclass, replace

import numpy as np
from pydantic import BaseModel

from ddlperf.prediction import ResourceUse
from ddlperf.predictors.analytic_async_links import gpu_alone, shared_link_stations
from ddlperf.predictors.analytic_colocated_async import (
    colocated_stations,
    host_workers,
    remote_share,
    shares_host_nics,
)
from ddlperf.predictors.analytic_ps_bsp import ps_bsp
from ddlperf.predictors.assembly import GroupTime
from ddlperf.predictors.connections import alone_transfer_s, connection_busy
from ddlperf.predictors.queueing import mva
from ddlperf.predictors.server_links import ps_server_bytes
from ddlperf.scenario import GroupPlan, Scenario

# Distinct one-worker cycles a workload keeps (an ASP sweep point by point meets the same
# cycle at every worker count); beyond it the cache starts again.
MAX_ALONE_CYCLES = 4096
# Scenario fields a one-worker cycle does not depend on: the cache lives in the workload; the
# cluster's numbers are in the groups and shards; notes and memory are reports.
_NOT_IN_CYCLE = frozenset({"workload", "cluster", "notes", "memory"})


def alone_cycle(sc: Scenario, group: GroupPlan) -> float:
    """One worker of ``group`` alone with the shards: its pipelined, contention-free cycle (a
    shard on its own host stays local). Cached per workload by the one-worker scenario's
    content: with several shards each cycle runs the shared-link loop, and points that
    differ only in their worker count have the same cycle."""
    solo = replace(
        sc, groups=(replace(group, count=1, first=0),),
        shards=tuple(replace(shard, host=0 if host_workers(shard, group) == group.count else None)
                     for shard in sc.shards),
    )
    cycles = sc.workload.derived_cache.setdefault("alone_cycles", {})
    key = _content_key(solo)
    if key not in cycles:
        if len(cycles) >= MAX_ALONE_CYCLES:
            cycles.clear()
        cycles[key] = ps_bsp(solo)[1]
    return cycles[key]


def _content_key(sc: Scenario) -> bytes:
    """A digest of every field of ``sc`` a prediction from it depends on (arrays by their
    bytes), so scenarios built apart that say the same thing share it."""
    digest = hashlib.blake2b(digest_size=20)
    for f in fields(sc):
        if f.name not in _NOT_IN_CYCLE:
            digest.update(f.name.encode())
            _feed(digest, getattr(sc, f.name))
    return digest.digest()


def _feed(digest: hashlib.blake2b, value: object) -> None:
    if isinstance(value, np.ndarray):
        digest.update(f"{value.dtype}{value.shape}".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, BaseModel):
        digest.update(value.model_dump_json().encode())
    elif is_dataclass(value) and not isinstance(value, type):
        digest.update(type(value).__name__.encode())
        for f in fields(value):
            _feed(digest, getattr(value, f.name))
    elif isinstance(value, (tuple, list)):
        digest.update(f"[{len(value)}".encode())
        for item in value:
            _feed(digest, item)
    else:
        digest.update(repr(value).encode())


def _ps_queueing(sc: Scenario) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str],
                                         np.ndarray, np.ndarray, np.ndarray]:
    """Think times (C,), station demands (S, C), populations (C,), station names, floors
    (S, C), copies (S,) and transfers (S,) (:func:`~ddlperf.predictors.queueing.mva`).

    Each shard's downlink, uplink and optimizer are queueing stations; a class's demand at a
    shard's links is its workers' mean remote share of the shard's bytes (nothing for the
    shard's own host). With overlap a worker pushes some tensors while pulling others, so a
    shard's three resources work as a pipeline: they become one station whose demand is the
    largest of the three (the saturation limit is unchanged, the contention-free cycle is not
    inflated). The think time is then set so that one worker alone sees exactly its
    pipelined cycle from the BSP model.

    A shard link faster than the workers' own links serves several of their flows at full
    speed (each is capped by its sender's link): the station's floor per class is the
    transfer at the worker's own rate, so a flow slows only once the flows present need more
    than the shard's rate (:func:`~ddlperf.predictors.queueing.mva`). Without it a 600 Mbit
    shard fed by three 200 Mbit workers queued them as one 600 Mbit server (+8.5% against the
    simulator, which finds no contention). On a server a GPU's own rate is its share of the
    NIC, as in its alone cycle, unless its GPUs move on phases of their own
    (:func:`~ddlperf.predictors.analytic_async_links.independent_gpus`): then its server's NIC
    is a station of its own per server, and so is its rack's link per rack
    (:func:`~ddlperf.predictors.analytic_async_links.shared_link_stations`), crossed by a push
    together with the shard's link, and a GPU alone has them whole
    (:func:`~ddlperf.predictors.analytic_async_links.gpu_alone`).
    """
    if shares_host_nics(sc):
        return _colocated_queueing(sc)
    alpha = sc.latency_s
    shard_bytes = sc.placement.sum(axis=0)
    alone = [gpu_alone(sc, g) for g in sc.groups]  # each class's worker as it moves alone
    # per part (downlink, uplink, update): the shards work in parallel (a worker's tensors go
    # to all of them at once), so the part is one station at the busiest shard's demand
    parts: dict[str, tuple[str, np.ndarray, np.ndarray]] = {}
    for part in ("downlink", "uplink", "update"):
        best: tuple[str, np.ndarray, np.ndarray] | None = None
        for k, shard in enumerate(sc.shards):
            remote = np.array([remote_share(shard, g) for g in sc.groups])
            if part == "update":
                d = np.full(len(sc.groups), shard_bytes[k] * shard.update_s_per_byte)
                low = np.zeros(len(sc.groups))
            else:
                rate = shard.down if part == "downlink" else shard.up
                d = shard_bytes[k] * remote / rate
                if part == "downlink" and sc.receive_capped:  # the shard process's intake
                    connected = np.array([1.0 - (g.gpus == 1 and host_workers(shard, g) > 0)
                                          / g.count for g in sc.groups])
                    d = np.maximum(d, shard_bytes[k] * connected / sc.receive_cap)
                # a GPU's own rate, the one its alone cycle (the think time) is priced at:
                # its share of its server's NIC (``GroupPlan.up``), or the whole NIC where
                # its server's GPUs move on phases of their own (``gpu_alone``); a pull at
                # most its process's receive cap
                own = np.array([a.up if part == "downlink" else min(a.down, sc.receive_cap)
                                for a in alone])
                low = shard_bytes[k] * remote / own
            if best is None or float(d.max()) > float(best[1].max()):
                best = (f"{shard.name} {part}", d, low)
        assert best is not None
        parts[part] = best
    if sc.strategy.overlap:  # push, update and pull pipelined: one station, the largest
        name = max(parts.values(), key=lambda item: float(item[1].max()))[0]
        stations = [(name, np.max(np.array([v for _n, v, _f in parts.values()]), axis=0),
                     np.max(np.array([f for _n, _v, f in parts.values()]), axis=0), 1, "all")]
    else:
        stations = [(n, v, f, 1, part) for part, (n, v, f) in parts.items()]
    stations += shared_link_stations(sc, alone)
    names = [n for n, _v, _f, _m, _p in stations]
    demand = np.array([v for _n, v, _f, _m, _p in stations])
    floor = np.array([f for _n, _v, f, _m, _p in stations])
    copies = np.array([m for _n, _v, _f, m, _p in stations], dtype=float)
    # a GPU's push crosses its NIC and the shard's link at once (one transfer), so does its
    # pull the other way; the update is a transfer of its own
    transfer = {"all": 0, "link": 0, "downlink": 0, "link uplink": 0, "uplink": 1,
                "link downlink": 1, "update": 2}
    together = np.array([transfer[p] for *_r, p in stations])
    idle = np.maximum(floor, demand)  # a visit to idle stations, per transfer
    alone_visit = np.array([idle[together == t].max(axis=0) if (together == t).any()
                            else np.zeros(len(sc.groups)) for t in range(3)])
    if sc.strategy.overlap:
        think = np.array([max(alone_cycle(sc, a) - float(alone_visit[:, c].sum()), 0.0)
                          for c, a in enumerate(alone)])
    else:
        think = np.array([
            a.compute_s + 2 * alpha
            + max(0.0, alone_transfer_s(sc, a, a.up) - float(alone_visit[0][c]))
            + max(0.0, alone_transfer_s(sc, a, a.down, pull=True) - float(alone_visit[1][c]))
            for c, a in enumerate(alone)
        ])
    population = np.array([g.count for g in sc.groups], dtype=float)
    return think, demand, population, names, floor, copies, together


def _colocated_queueing(sc: Scenario) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str],
                                               np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_ps_queueing` where shards share their hosts' NICs: every link a station
    (:mod:`~ddlperf.predictors.analytic_colocated_async`), the think time again set so that a
    worker alone sees exactly its pipelined cycle from the BSP model."""
    demand, names, floor, copies, labels = colocated_stations(sc)
    idle = np.where((demand > 0) | (floor > 0), np.maximum(floor, demand), 0.0)
    alone_visit = np.sum([np.where(labels == label, idle, 0.0).max(axis=0)
                          for label in np.unique(labels)], axis=0)
    think = np.array([max(alone_cycle(sc, g) - float(alone_visit[c]), 0.0)
                      for c, g in enumerate(sc.groups)])
    population = np.array([g.count for g in sc.groups], dtype=float)
    return think, demand, population, names, floor, copies, labels


def ps_async(sc: Scenario, bsp: tuple[list[GroupTime], float, list[ResourceUse]] | None = None
             ) -> tuple[list[GroupTime], float, list[ResourceUse]]:
    """ASP: each worker class at the rate the closed queueing network gives it (no wait).
    ``bsp``: :func:`ps_bsp`'s result where the caller has it already.

    Identical workers too: sharing the PS links fairly they keep whatever phase offsets they
    have, and a run that starts them together (as the trainers do) begins near lockstep, the
    links idle while everyone computes. That is a transient, not the steady state: noise
    spreads the offsets within 10-15 iterations and keeps them spread (60-iteration
    measurements: ps-asp-4w-2s 0.97 s at first, 0.74 s over the run; ps-asp-3w-1s 1.13-1.20
    s, then 1.00 s), and independent phases are what the product-form network assumes (0.753
    and 1.012 s). An earlier rule (1/N of the way to lockstep) fitted 10-iteration runs,
    i.e. the transient.

    The exceptions stay in lockstep: the two remote workers of a host that holds every shard
    (:func:`remote_pair`) run BSP's schedule of the two alone with the shards, one server's two
    GPUs (:func:`server_pair`) BSP's schedule of the job.

    And on dedicated shards, where the network gives every worker one rate slower than BSP's
    period, the answer is BSP's schedule, as for SSP (:func:`ps_ssp`): there workers at one
    rate keep lockstep, in which each pull follows the worker's own push instead of
    everyone's. The network can be slower: a transfer crosses its worker's uplink and its
    shard's downlink at once, and the network adds the wait at the shard to the worker's own
    transfer time, where in lockstep both links are full together and neither wait adds to
    the other (no more workers than shards: 9-14% above BSP, where the simulator from random
    phases ends at BSP's period and seven measured rows, ``fresh17-*`` and ``fresh18-*``,
    came within 1.4% of it). Without this, ASP came out slower than SSP with any staleness.
    Workers at several rates that the network puts at or above BSP's period (one worker
    slower in compute: 7-19% above BSP) are capped too: the slowest at BSP's period, the
    others faster in the network's proportion (:func:`_slowest_in_lockstep`), as the
    simulator's and the measured runs' slow workers sat at BSP's period and their fast ones
    2-11% under it (``fresh20-*``; ``fresh21-*``, tested before their runs: mean errors
    +6.6/+14.5/+17.6% with BSP's period for everyone, +0.9/+8.6/+12.1% in proportion).
    Not with colocated shards: a host's NIC carries its worker's pull and the other workers'
    pushes to its shard, which lockstep keeps apart and ASP's phases do not, and the
    simulator's ASP runs 13-69% above BSP's period there (two or four hosts of as many
    shards, 50-200 Mbit, no overlap), near where the network puts it.
    """
    result = _network_async(sc)
    if server_pair(sc) or any(shard.host is not None for shard in sc.shards):
        return result
    bsp = bsp or ps_bsp(sc)
    times, period, _resources = result
    if _one_rate(times) and period >= bsp[1]:
        return bsp
    if all(t.iteration_s >= bsp[1] for t in times):  # workers at several rates
        return _slowest_in_lockstep(sc, times, bsp[1])
    return result


def _slowest_in_lockstep(sc: Scenario, times: list[GroupTime], bsp_period: float
                         ) -> tuple[list[GroupTime], float, list[ResourceUse]]:
    """Workers at several rates that the network puts at or above BSP's period: the slowest
    at BSP's period (the faster ones' transfers line up with its own, as in lockstep), the
    others faster in the network's proportion (free of the barrier; the wait the network
    adds at a shard taken as the same factor for every worker)."""
    scale = bsp_period / max(t.iteration_s for t in times)
    periods = np.array([t.iteration_s * scale for t in times])
    return _async_result(sc, periods, np.zeros(len(times)))


def _network_async(sc: Scenario) -> tuple[list[GroupTime], float, list[ResourceUse]]:
    """:func:`ps_async` before its lockstep cap: the network's rates, and lockstep where the
    workers are held in it (a remote pair, one server's two GPUs)."""
    network_periods = _network_periods(sc)
    periods = network_periods(np.zeros(len(sc.groups)))
    pair = remote_pair(sc)
    if pair is not None:  # in lockstep: BSP's schedule of the two alone with the shards
        periods[pair] = _pair_period(sc, sc.groups[pair])
    elif server_pair(sc):  # in lockstep: BSP's schedule of the job
        periods[0] = ps_bsp(sc)[1]
    return _async_result(sc, periods, np.zeros(len(sc.groups)))


def _network_periods(sc: Scenario) -> Callable[[np.ndarray], np.ndarray]:
    """Each group's period in the closed queueing network of the PS links, as a function of
    an extra delay per group (a wait at the staleness bound), so that callers that solve
    for that delay set the network up once."""
    think, demand, population, _names, floor, copies, together = _ps_queueing(sc)
    # a shared link (a server's NIC, a rack's link) is crossed together with a shard's
    shared = together.ndim == 2 or len(together) > len(set(together.tolist()))

    def periods(extra: np.ndarray) -> np.ndarray:
        throughput, _ = mva(think + extra, demand, population, floor=floor,
                            copies=copies if shared else None,
                            together=together if shared else None)
        return population / throughput
    return periods


def _async_result(sc: Scenario, periods: np.ndarray, waits: np.ndarray
                  ) -> tuple[list[GroupTime], float, list[ResourceUse]]:
    """Group times (communication is what the period leaves after compute and the wait),
    the worker-weighted mean period and the resources' use."""
    times = [GroupTime(float(p), g.compute_s, max(float(p) - g.compute_s - float(w), 0.0),
                       float(w)) for g, p, w in zip(sc.groups, periods, waits)]
    workers = np.array([g.count for g in sc.groups], dtype=float)
    mean_period = float((periods * workers).sum() / workers.sum())
    return times, mean_period, async_resources(sc, [float(p) for p in periods], mean_period)


def server_pair(sc: Scenario) -> bool:
    """A job of one server's two GPUs (one group: one server, two GPUs): they run in lockstep.
    The analytic model gives them BSP's schedule of the job (:func:`ps_async`); the simulator
    starts them together, with the compute jitter SSP gets (``simulate.runner.SSP_LEAST_CV``),
    not at random phases. Not three or more GPUs: their offsets are not neutral ((d, d) →
    (2d, d/2) every cycle), and measured (ten clusters of 3-5 GPUs, fourteenth session) they
    stayed near lockstep on some and spread a third of a period apart on others; the
    simulator's jittered common start was closer than random phases on the first five,
    measured before the choice, and not on five more chosen and predicted before their runs
    (MAPE 10.1% against 9.7%; 7.6% against 11.6% over all ten), so they keep random phases
    and the queueing network.

    Why: two flows entering one fairly shared link d apart leave it d apart (the first has it
    alone for d, both share it, the second has it alone for d), so two identical workers keep
    whatever offset they start with, and the trainers (and a real job) start every worker
    after one barrier; the simulator's jitter lets a run leave lockstep where its schedule does
    not hold it. Measured from a common start (fourteenth session, docs/models.md), one
    server's two GPUs stayed in lockstep, or within 0.15 of a period of it, in all nine runs
    of four clusters (behind a 300 Mbit NIC with two shards 0.636, 0.639, 0.640 s, one shard
    0.590, 0.603 s, no overlap 1.127, 1.135 s; behind a 1 Gbit NIC on a 150 Mbit shard 1.008,
    1.027 s), where random phases priced them 7-24% fast and the queueing network 5-25% fast.
    Two one-GPU hosts are not taken together: on one shard a pair parted in about half the
    runs (fresh4-asp-2w-1s: two of four, fresh12-asp-2w-small16: one of two), on two shards it
    stayed together in every run (fresh12-asp-2w-2s, fresh9-ssp1-2w-2s's cluster); why is not
    known (a shard's downlink is a switch port with deep per-sender queues that two hosts'
    TCP senders fill, where a server's GPUs share their own NIC's egress, but two shards are
    switch ports too), so hosts keep random phases.
    """
    return len(sc.groups) == 1 and sc.groups[0].count == 2 and sc.groups[0].gpus == 2


def remote_pair(sc: Scenario) -> int | None:
    """The group of the two remote workers of a host that holds every shard, if any.

    Two flows entering one fairly shared link d apart leave it d apart, so two identical
    workers keep the offset they start with, and the trainers start every worker together.
    Measured, such a pair stays together where the shards sit on a worker's host (within
    20 ms for all 60 iterations of every run: ps-asp-colocated-3w, fresh4-asp-coloc-3w-100m),
    while a pair on a dedicated shard leaves lockstep for half a period apart (docs/models.md);
    the simulator starts the same pair together (``simulate.runner.sharing_pair``). The two
    must be one group of one-GPU workers (identical), and everyone else on the shards' host.
    """
    hosts = {s.host for s in sc.shards}
    if len(hosts) != 1 or None in hosts or any(g.gpus != 1 for g in sc.groups):
        return None
    shard = sc.shards[0]
    remote = [c for c, g in enumerate(sc.groups) if host_workers(shard, g) < g.count]
    if len(remote) != 1 or sc.groups[remote[0]].count != 2:
        return None
    host = sc.groups[remote[0]]
    if sum(g.count for g in sc.groups) - host.count != sum(
            host_workers(shard, g) for g in sc.groups):
        return None  # a remote worker outside the pair
    return remote[0]


def _pair_period(sc: Scenario, group: GroupPlan) -> float:
    """BSP's period of ``group`` (two workers) alone with the shards, which keep their host's
    rates but serve nobody locally."""
    pair = replace(sc, groups=(replace(group, first=0),),
                   shards=tuple(replace(s, host=None) for s in sc.shards))
    return ps_bsp(pair)[1]


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
        crossing = sum((g.count - host_workers(shard, g)) / p for g, p in zip(sc.groups, periods))
        arriving = sum(g.count / p for g, p in zip(sc.groups, periods))
        busy += [(f"{shard.name} downlink", crossing * shard_bytes[k] / shard.down),
                 (f"{shard.name} uplink", crossing * shard_bytes[k] / shard.up),
                 (f"{shard.name} update",
                  arriving * shard_bytes[k] * shard.update_s_per_byte)]
    for g, p in zip(sc.groups, periods):  # named as BSP names them
        if any(host_workers(shard, g) == g.count for shard in sc.shards):
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
# SSP with colocated shards: workers whose ASP periods lie this close to the slowest one's are
# not told apart as "the slowest" — the queueing network's per-worker periods are within 9.5%
# of the simulator's on average over 60 random colocated clusters (10.0% with dedicated
# shards; docs/models.md), so a gap below that is inside the model's own resolution.
SLOWEST_RESOLVED = 0.10


def ps_ssp(sc: Scenario) -> tuple[list[GroupTime], float, list[ResourceUse]]:
    """SSP(s ≥ 1) in steady state, by the read rule of :mod:`ddlperf.strategy`.

    Where ASP would run some workers faster than the slowest, they gain on it until they are
    s iterations ahead, and from then on the bound releases their reads of a tensor with the
    slowest worker's update of it — the moment the slowest one reads it too. Every read
    coincides as under BSP, so the steady state is BSP's schedule (each gradient applied on
    arrival; s sets only how long the catch-up takes — a run shorter than that shows ASP's
    rates). Identical workers keep one rate and nobody is held: SSP is ASP there, never
    slower than BSP, whose schedule SSP could follow.

    Two cases hold the faster workers without lining anyone up (:func:`_held_at_bound`): a
    host of every shard (:func:`_silent_host`), and colocated shards where the slowest rate
    is shared by workers of different roles (:func:`_slowest_apart`).
    """
    return ssp_steady_state(sc)[1]


def ssp_regime(sc: Scenario) -> str:
    """Which steady state :func:`ps_ssp` takes: ``asp`` (nobody held), ``held`` (the faster
    workers held without lining anyone up) or ``bsp`` (BSP's schedule: held behind one
    distinct slowest)."""
    return ssp_steady_state(sc)[0]


def ssp_steady_state(sc: Scenario
                     ) -> tuple[str, tuple[list[GroupTime], float, list[ResourceUse]]]:
    """:func:`ssp_regime` and :func:`ps_ssp`'s result together (one computation)."""
    bsp = ps_bsp(sc)
    times, period, resources = ps_async(sc, bsp)
    if _never_held(times, period, bsp[1]):
        return "asp", (times, period, resources)
    if (_silent_host(sc) or _slowest_apart(sc, times)) and remote_pair(sc) is None:
        held = _held_at_bound(sc)
        if held is not None and held[1] < bsp[1]:
            return "held", held
    return "bsp", bsp


def _slowest_apart(sc: Scenario, times: list[GroupTime]) -> bool:
    """Colocated shards, and ASP's slowest rate shared (within :data:`SLOWEST_RESOLVED`) by
    workers of more than one class of the colocated view: hosts of different shards, or a
    host and workers with no shard. They move on clocks of their own, so the laggard a held
    worker waits for changes from one release to the next, and a held worker's traffic lines
    up with one of them at a time rather than with all (BSP's schedule). Measured:
    fresh9-ssp-coloc-3s (SSP(1), 4 identical workers, shards on 3 of them: ASP's slowest are
    two hosts and the worker with no shard, the host of the biggest shard twice as fast) ran
    at 0.73, 0.71, 0.75 and 0.72 s in four runs, BSP's schedule 1.34 s, the held model 0.76 s.
    Not with dedicated shards, where a slowest group's identical workers keep together (two
    slow workers: fresh-ssp-3s-2slow, a slow server's GPUs: fresh2-srv-ssp-slowserver, both
    measured at BSP's schedule)."""
    if not shares_host_nics(sc):
        return False
    slowest = max(t.iteration_s for t in times)
    near = [t for t in times if t.iteration_s >= slowest * (1 - SLOWEST_RESOLVED)]
    return len(near) >= 2


def _silent_host(view: Scenario) -> bool:
    """Identical workers but one that holds every shard: that host moves nothing over the
    network, and it is the only worker that differs (the colocated view splits it off)."""
    hosts = {s.host for s in view.shards}
    if len(hosts) != 1 or None in hosts or len(view.groups) < 2:
        return False
    first = view.groups[0]
    return all(
        np.array_equal(g.forward, first.forward) and np.array_equal(g.backward, first.backward)
        and (g.unattributed_s, g.up, g.down, g.gpus) == (first.unattributed_s, first.up,
                                                         first.down, first.gpus)
        for g in view.groups[1:])


def _held_at_bound(sc: Scenario) -> tuple[list[GroupTime], float, list[ResourceUse]] | None:
    """SSP where the faster workers are held at the bound without lining anyone up: each
    gets a delay (its wait at the bound) until it runs at the slowest one's period in the
    queueing network; None if that does not settle. A host of every shard
    (:func:`_silent_host`) runs ahead (all its traffic is local) and moves nothing over the
    network, so it cannot line anyone up (BSP's schedule is for a held worker whose reads and
    pushes cross the links with the slowest one's): fresh9-ssp3-coloc-1s measured 0.546 s,
    the simulator's ASP period of the remote workers 0.544 s, BSP's schedule 0.974 s. Where
    the slowest are apart (:func:`_slowest_apart`) a held worker lines up with one of them at
    a time."""
    network_periods = _network_periods(sc)
    extra = np.zeros(len(sc.groups))
    for _ in range(200):
        periods = network_periods(extra)
        target = float(periods.max())
        if float(periods.min()) >= target * (1 - 1e-6):
            break
        extra = np.maximum(extra + 0.5 * (target - periods), 0.0)
    else:
        return None
    return _async_result(sc, periods, extra)


def ssp_is_asp(sc: Scenario) -> bool:
    """Whether SSP runs as ASP here (:func:`ps_ssp`): every worker at one ASP rate, faster
    than BSP, so the bound never holds anyone. The simulator starts such workers at random
    phases as it does under ASP."""
    # the network before ps_async's cap: capped, its period would equal BSP's and fail the
    # same test; BSP's period only where ASP's rates agree (with colocated shards it is the
    # costly part)
    times, period, _resources = _network_async(sc)
    return _one_rate(times) and period < ps_bsp(sc)[1]


def _one_rate(times: list[GroupTime]) -> bool:
    periods = [t.iteration_s for t in times]
    return max(periods) <= min(periods) * (1 + ASP_RATES_AGREE)


def _never_held(times: list[GroupTime], period: float, bsp_period: float) -> bool:
    return _one_rate(times) and period < bsp_period
