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
"""

from __future__ import annotations

import numpy as np

from ddlperf.scenario import GroupPlan, Scenario, ShardPlan


def has_connections(sc: Scenario, shard: ShardPlan, remote_senders: float) -> bool:
    """Some endpoint reaches ``shard`` over a connection (network or loopback)."""
    if remote_senders > 0:
        return True
    return shard.host is not None and sc.group_of(shard.host).gpus > 1


def stream_s_per_byte(sc: Scenario, senders: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Seconds per byte of each shard link's FIFO: ``senders`` streams share the link (rates
    in payload bytes/s), each at most the connection cap."""
    per_byte = senders / rates
    if not sc.capped:
        return per_byte
    connected = np.array([has_connections(sc, s, n) for s, n in zip(sc.shards, senders)])
    return np.where(connected, np.maximum(per_byte, 1.0 / sc.connection_cap), per_byte)


def capped_rate(sc: Scenario, rate: float) -> float:
    """A stream's rate: its share of the links, at most the connection cap."""
    return min(rate, sc.connection_cap)


def _connected_to(sc: Scenario, shard: ShardPlan, group: GroupPlan) -> bool:
    """``group``'s endpoints reach ``shard`` over connections (not a one-GPU host and its own
    shard)."""
    own = (shard.host is not None and group.gpus == 1 and group.count == 1
           and group.first == shard.host)
    return not own


def alone_transfer_s(sc: Scenario, group: GroupPlan, rate: float) -> float:
    """One worker of ``group`` pushing (or pulling) the whole model alone at its path ``rate``:
    all its connections at once, none faster than the cap."""
    seconds = float(sc.tensor_bytes.sum()) / rate
    if sc.capped:
        shard_bytes = sc.placement.sum(axis=0)
        slowest = max((float(shard_bytes[k]) for k, shard in enumerate(sc.shards)
                       if _connected_to(sc, shard, group)), default=0.0)
        seconds = max(seconds, slowest / capped_rate(sc, rate))
    return seconds


def connection_busy(sc: Scenario, periods: list[float] | None = None
                    ) -> list[tuple[str, float]]:
    """(resource, busy seconds per period) of one connection per shard and direction: its
    bytes per iteration over the cap. ``periods`` (per group, ASP/SSP): the busiest group's
    connection, per mean period of 1 (a utilization); None (BSP): per iteration."""
    if not sc.capped:
        return []
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
    return out
