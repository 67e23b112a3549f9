"""The transport's per-connection cap in the analytic PS models (:mod:`ddlperf.transport`).

A shard's link serves one stream per connection crossing it, all at once; with a cap c each
stream moves at min(its fair share of the link, c). That is exact for the shard's side of the
BSP pipeline (identical workers in lockstep, as the simulator shares the link), and it is the
connection's own limit wherever the shard link is not the tighter one, since every endpoint's
stream to a shard crosses that shard's link FIFO. A one-GPU host talking to its own colocated
shard has no connection at all; the GPUs of a multi-GPU server reach their server's shard over
loopback connections, which the cap limits too.

Resources: ``ps0 push connection`` / ``ps0 pull connection`` are one connection's busy time
(its bytes per iteration over the cap), listed only when a cap is set.

The transport's per-process receive cap R (TensorFlow 1.x parsed everything a process received
on one thread) is shared by all connections into one process: a shard's process takes in every
worker's push (loopback ones too), so each of its n streams moves at most R / n; a worker's
process (a server's, with local aggregation) takes in its pulls from every shard, so its pull
moves at most R. Resources: ``ps0 receive`` (the shard's process) and ``<group> receive`` (one
worker's or server's process), bytes per iteration over R.
"""

from __future__ import annotations

import numpy as np

from ddlperf.predictors.server_links import ps_endpoints
from ddlperf.scenario import GroupPlan, Scenario, ShardPlan


def has_connections(sc: Scenario, shard: ShardPlan, remote_senders: float) -> bool:
    """Some endpoint reaches ``shard`` over a connection (network or loopback)."""
    if remote_senders > 0:
        return True
    return shard.host is not None and sc.group_of(shard.host).gpus > 1


def stream_s_per_byte(sc: Scenario, senders: np.ndarray, rates: np.ndarray,
                      receiving: bool = False) -> np.ndarray:
    """Seconds per byte of each shard link's FIFO: ``senders`` streams share the link (rates
    in payload bytes/s), each at most the connection cap; ``receiving`` (the push side): and
    at most its share of the shard process's receive cap."""
    per_byte = senders / rates
    if not (sc.capped or (receiving and sc.receive_capped)):
        return per_byte
    connected = np.array([has_connections(sc, s, n) for s, n in zip(sc.shards, senders)])
    floor = np.full(len(sc.shards), 1.0 / sc.connection_cap)
    if receiving and sc.receive_capped:
        floor = np.maximum(floor, shard_receivers(sc) / sc.receive_cap)
    return np.where(connected, np.maximum(per_byte, floor), per_byte)


def shard_receivers(sc: Scenario) -> np.ndarray:
    """Connections into each shard's process: every endpoint's but a one-GPU host's own."""
    endpoints = sum(ps_endpoints(sc, g) for g in sc.groups)
    return np.array([endpoints - (1 if s.host is not None and sc.group_of(s.host).gpus == 1
                                  else 0) for s in sc.shards], dtype=float)


def receive_rate(sc: Scenario, rate: float) -> float:
    """An endpoint's pull rate: its path's, at most its process's receive cap."""
    return min(rate, sc.receive_cap)


def capped_rate(sc: Scenario, rate: float) -> float:
    """A stream's rate: its share of the links, at most the connection cap."""
    return min(rate, sc.connection_cap)


def _connected_to(sc: Scenario, shard: ShardPlan, group: GroupPlan) -> bool:
    """``group``'s endpoints reach ``shard`` over connections (not a one-GPU host and its own
    shard)."""
    own = (shard.host is not None and group.gpus == 1 and group.count == 1
           and group.first == shard.host)
    return not own


def alone_transfer_s(sc: Scenario, group: GroupPlan, rate: float, pull: bool = False) -> float:
    """One worker of ``group`` pushing (or pulling) the whole model alone at its path ``rate``:
    all its connections at once, none faster than the cap; a shard's process takes in one
    push stream, the worker's process all of its pull streams, at most the receive cap."""
    seconds = float(sc.tensor_bytes.sum()) / rate
    if sc.capped or sc.receive_capped:
        shard_bytes = sc.placement.sum(axis=0)
        connected = [float(shard_bytes[k]) for k, shard in enumerate(sc.shards)
                     if _connected_to(sc, shard, group)]
        seconds = max(seconds, max(connected, default=0.0)
                      / min(capped_rate(sc, rate), sc.receive_cap))
        if pull:
            seconds = max(seconds, sum(connected) / sc.receive_cap)
    return seconds


def connection_busy(sc: Scenario, periods: list[float] | None = None
                    ) -> list[tuple[str, float]]:
    """(resource, busy seconds per period) of one connection per shard and direction: its
    bytes per iteration over the cap. ``periods`` (per group, ASP/SSP): the busiest group's
    connection, per mean period of 1 (a utilization); None (BSP): per iteration."""
    if not sc.capped:
        return receive_busy(sc, periods)
    shard_bytes = sc.placement.sum(axis=0)
    out: list[tuple[str, float]] = []
    for k, shard in enumerate(sc.shards):
        groups = [i for i, g in enumerate(sc.groups) if _connected_to(sc, shard, g)]
        if not groups:
            continue
        busy = float(shard_bytes[k]) / sc.connection_cap
        if periods is not None:
            busy /= min(periods[i] for i in groups)
        out += [(f"{shard.name} push connection", busy), (f"{shard.name} pull connection", busy)]
    return out + receive_busy(sc, periods)


def _hosts_one_gpu(shard: ShardPlan, group: GroupPlan) -> bool:
    """``shard`` sits on a one-GPU host of ``group`` (that worker reaches it in-process)."""
    return (shard.host is not None and group.gpus == 1
            and group.first <= shard.host < group.first + group.count)


def receive_busy(sc: Scenario, periods: list[float] | None = None
                 ) -> list[tuple[str, float]]:
    """(resource, busy seconds per period) of each shard's receiving process (every push into
    it) and of one receiving process per group (its pulls from every shard), over the receive
    cap; ``periods`` as :func:`connection_busy`'s."""
    if not sc.receive_capped:
        return []
    shard_bytes = sc.placement.sum(axis=0)
    out: list[tuple[str, float]] = []
    receivers = shard_receivers(sc)
    for k, shard in enumerate(sc.shards):
        if receivers[k] <= 0:
            continue
        if periods is None:
            rate = receivers[k]
        else:  # each group's connections at its own rate, but a one-GPU host's own
            rate = sum((ps_endpoints(sc, g) - _hosts_one_gpu(shard, g)) / p
                       for g, p in zip(sc.groups, periods))
        out.append((f"{shard.name} receive", rate * float(shard_bytes[k]) / sc.receive_cap))
    for i, group in enumerate(sc.groups):
        pulled = sum(float(shard_bytes[k]) for k, shard in enumerate(sc.shards)
                     if _connected_to(sc, shard, group))
        if pulled > 0:
            busy = pulled / sc.receive_cap
            out.append((f"{group.name} receive",
                        busy if periods is None else busy / periods[i]))
    return out
