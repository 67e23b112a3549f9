"""Servers and racks → runs of identical servers and the rates their workers see.

A worker (GPU) reaches anything outside its server through its own intra-node link, the
server's NICs (``nics`` NICs act as one link of ``nics`` × the NIC rate per direction: NCCL
spreads its rings and the PS connections over them) and, when the peer is outside its rack,
the rack's uplink (sending) or downlink (receiving). Dedicated PS hosts sit on the core
switch, so every byte between a rack and a dedicated shard crosses that rack's link.

The parameter-server models see each worker's path as one link whose rate is the worker's
fair share of every link on it when all workers push (or pull) at once:
min(intra, NIC / GPUs, rack link × the worker's bytes / all bytes crossing that rack link).
That share is exact for identical servers in lockstep (what BSP on a homogeneous cluster
does) and an estimate otherwise; the simulator shares the real links max-min fairly.

Servers are planned in *segments*: consecutive servers of one cluster group that are either
a set of whole racks holding nothing else, or all inside one rack. A segment is one
:class:`~ddlperf.scenario.GroupPlan`, so the simulator can keep a segment in lockstep and
still give each rack link its own load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ddlperf.cluster import Cluster, ServerGroup
from ddlperf.strategy import Strategy


@dataclass(frozen=True)
class Segment:
    """``servers`` consecutive servers of ``group`` from global server ``first_server``.

    ``rack`` is the rack of the first server (None without racks); ``whole_racks`` ≥ 1 means
    the segment is exactly racks ``rack`` … ``rack + whole_racks − 1`` and nothing else is in
    them, 0 that it lies inside rack ``rack``, which it may share. ``up``/``down``: each
    worker's path rate for PS traffic (payload bytes/s).
    """

    group: ServerGroup
    first_server: int
    servers: int
    rack: int | None
    whole_racks: int
    nic_up: float
    nic_down: float
    intra: float | None
    up: float
    down: float


@dataclass(frozen=True)
class RackPlan:
    """Racks of ``size`` servers; link rates in payload bytes/s."""

    size: int
    count: int
    up: float
    down: float
    crossing: tuple[float, ...] = ()  # PS bytes per iteration across each rack's link

    def name(self, rack: int, direction: str) -> str:
        return f"rack{rack} {direction}"

    def of(self, server: int) -> int:
        return server // self.size

    def share(self, rack: int, own_bytes: float) -> tuple[float, float]:
        """(up, down) rate of an endpoint that moves ``own_bytes`` of the ``crossing[rack]``
        bytes per iteration across its rack's links, all endpoints moving at once (the link
        drains its load L in L / rate); unlimited where nothing crosses."""
        load = self.crossing[rack] if self.crossing else 0.0
        if load <= 0:
            return math.inf, math.inf
        return self.up * own_bytes / load, self.down * own_bytes / load


def plan_servers(
    cluster: Cluster, strategy: Strategy, shard_bytes: np.ndarray | None
) -> tuple[list[Segment], RackPlan | None]:
    """The cluster's segments and racks (see the module docstring).

    ``shard_bytes[k]``: bytes of the model on PS shard k (to weigh rack-link loads; only
    needed with racks).
    """
    payload = cluster.goodput / 8.0
    groups = cluster.servers()
    racks = None
    if cluster.racks is not None:
        size = cluster.racks.servers
        racks = RackPlan(size, -(-cluster.server_count // size), cluster.racks.uplink * payload,
                         cluster.racks.down * payload)
    # (group, first server, servers) pieces cut at rack boundaries
    pieces: list[tuple[ServerGroup, int, int]] = []
    server = 0
    for g in groups:
        left = g.count
        while left:
            take = left if racks is None else min(left, racks.size - server % racks.size)
            pieces.append((g, server, take))
            server += take
            left -= take
    crossing: list[float] = []
    total = 0.0
    if racks is not None:
        assert shard_bytes is not None
        crossing = _rack_crossing(cluster, strategy, racks, pieces, shard_bytes)
        racks = RackPlan(racks.size, racks.count, racks.up, racks.down, tuple(crossing))
        total = float(shard_bytes.sum())
    aggregate = strategy.arch == "ps" and strategy.local_aggregation
    segments: list[Segment] = []
    for g, first, count in pieces:
        nic_up = g.nics * g.up * payload
        nic_down = g.nics * g.down * payload
        intra = None if g.intra is None else g.intra / 8.0
        up, down = nic_up / g.gpus, nic_down / g.gpus
        if intra is not None:
            up, down = min(up, intra), min(down, intra)
        rack = None if racks is None else racks.of(first)
        if racks is not None and rack is not None:
            rack_up, rack_down = racks.share(rack, total / (g.gpus if aggregate else 1))
            up, down = min(up, rack_up), min(down, rack_down)
        last = segments[-1] if segments else None
        if (racks is not None and last is not None and last.group is g and count == racks.size
                and last.servers == last.whole_racks * racks.size
                and (last.up, last.down) == (up, down)):
            segments[-1] = Segment(g, last.first_server, last.servers + count, last.rack,
                                   last.whole_racks + 1, nic_up, nic_down, intra, up, down)
        else:
            whole = 1 if racks is not None and count == racks.size else 0
            segments.append(Segment(g, first, count, rack, whole, nic_up, nic_down, intra, up,
                                    down))
    return segments, racks


def _rack_crossing(
    cluster: Cluster, strategy: Strategy, racks: RackPlan | None,
    pieces: list[tuple[ServerGroup, int, int]], shard_bytes: np.ndarray,
) -> list[float]:
    """PS bytes per iteration across each rack's uplink (= across its downlink: pulls bring
    back what pushes sent); zeros for all-reduce, whose rings are sized in the predictors."""
    if racks is None:
        return []
    if strategy.arch != "ps" or not len(shard_bytes):
        return [0.0] * racks.count
    aggregate = strategy.local_aggregation
    colocated = cluster.ps.placement == "colocated"
    endpoints = np.zeros(racks.count)  # who pushes: GPUs, or servers when aggregating
    for g, first, count in pieces:
        endpoints[racks.of(first)] += count * (1 if aggregate else g.gpus)
    everyone = float(endpoints.sum())
    out = []
    for r in range(racks.count):
        inside = np.zeros(len(shard_bytes), dtype=bool)
        if colocated:  # shard k on server k
            inside[[k for k in range(len(shard_bytes)) if racks.of(k) == r]] = True
        outside_bytes = float(shard_bytes[~inside].sum())
        hosted_bytes = float(shard_bytes[inside].sum())
        # pushes to shards elsewhere leave the rack; so do pulls from its shards to others
        out.append(float(endpoints[r]) * outside_bytes + (everyone - endpoints[r]) * hosted_bytes)
    return out
