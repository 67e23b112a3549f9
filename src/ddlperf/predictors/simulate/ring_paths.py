"""The edges of an all-reduce's rings, in classes of identical edges, and the links they cross.

Phases (see :mod:`ddlperf.predictors.rings`): ``flat`` — worker i → i+1 over all N workers;
``inside`` — each server's GPUs in a ring (reduce-scatter, then all-gather); ``across`` — GPU
g of server s → GPU g of server s+1 (one ring per GPU index). An edge inside a server crosses
the sender's and receiver's fabric links; an edge between servers also the two servers' NICs
and, between racks, the two racks' links.

Edges whose sender and receiver lie in the same pair of worker groups and that cross the same
kind of path are identical: one class, simulated as one flow of weight = their number (units
that split a group only to give each worker its own compute noise do not split its edges: the
network cannot tell them apart). Each class gets
its own links (``copies`` = its edges), which is exact because in every phase each physical
link carries only edges of one class at a time, all at the same rate: a fabric link one edge,
a NIC direction or rack link one edge in the flat ring and the G edges of its server across
servers (each then has a 1/G share: the link's capacity per edge is divided by G).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ddlperf.host_cpu import ring_rank_rate
from ddlperf.predictors.rings import CONNECTION, cpu_name
from ddlperf.predictors.simulate.compute import OpRecord
from ddlperf.predictors.simulate.network import Link
from ddlperf.predictors.simulate.units import Unit
from ddlperf.topology import RackPlan

PHASES = ("flat", "inside", "across")


@dataclass
class EdgeClass:
    """``count`` identical ring edges from unit ``src`` to unit ``dst``.

    ``hops``: (capacity per edge in payload bytes/s, resource name) of every link on the path,
    in order. ``senders``/``receivers`` name the processes their trace rows go on.
    """

    src: Unit
    dst: Unit
    kind: str  # "intra", "nic" or "rack"
    count: int = 0
    hops: list[tuple[float, str]] = field(default_factory=list)
    senders: list[str] = field(default_factory=list)
    receivers: list[str] = field(default_factory=list)
    links: tuple[Link, ...] = ()
    records: list[OpRecord] | None = None


def ring_edges(units: list[Unit], racks: RackPlan | None = None,
               phase: str = "flat", cap: float = math.inf) -> list[EdgeClass]:
    """Edge classes of one phase over ``units`` (consecutive worker ranges, in order);
    ``cap``: the transport's per-connection payload rate on edges between servers."""
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
    unit_of: list[int] = []
    server_of: list[int] = []
    for unit in units:
        g = unit.group
        for w in range(unit.first, unit.first + unit.count):
            unit_of.append(unit.index)
            server_of.append(g.first_server + (w - g.first) // g.gpus)
    n = len(unit_of)
    first_worker = {}  # server → its first worker
    for w in range(n - 1, -1, -1):
        first_worker[server_of[w]] = w
    servers = sorted(first_worker)
    position = {server: i for i, server in enumerate(servers)}
    names = [name for unit in units for name in unit.names]
    classes: dict[tuple[int, int, str], EdgeClass] = {}  # by (sender group, receiver group)
    for w in range(n):
        dst = _next(w, phase, n, units[unit_of[w]], server_of, first_worker, servers, position)
        if dst is None or dst == w:
            continue
        a, b = server_of[w], server_of[dst]
        if a == b:
            kind = "intra"
        elif racks is not None and racks.of(a) != racks.of(b):
            kind = "rack"
        else:
            kind = "nic"
        src_unit, dst_unit = units[unit_of[w]], units[unit_of[dst]]
        key = (id(src_unit.group), id(dst_unit.group), kind)
        edge = classes.get(key)
        if edge is None:
            share = src_unit.group.gpus if phase == "across" else 1
            edge = classes[key] = EdgeClass(src_unit, dst_unit, kind)
            edge.hops = _hops(src_unit, dst_unit, kind, racks, share)
            edge.hops += _cpu_hops(src_unit, dst_unit, phase, len(servers))
            if kind != "intra" and math.isfinite(cap):
                edge.hops.append((cap, CONNECTION))
        edge.count += 1
        edge.senders.append(names[w])
        edge.receivers.append(names[dst])
    return list(classes.values())


def _next(w: int, phase: str, n: int, unit: Unit, server_of: list[int],
          first_worker: dict[int, int], servers: list[int],
          position: dict[int, int]) -> int | None:
    """The worker that ``w`` sends to in ``phase`` (None: no such edge)."""
    if phase == "flat":
        return (w + 1) % n if n > 1 else None
    gpus = unit.group.gpus
    base = first_worker[server_of[w]]
    if phase == "inside":
        return base + (w - base + 1) % gpus if gpus > 1 else None
    if len(servers) == 1:
        return None
    after = servers[(position[server_of[w]] + 1) % len(servers)]
    return first_worker[after] + (w - base)


def _hops(src: Unit, dst: Unit, kind: str, racks: RackPlan | None,
          share: int) -> list[tuple[float, str]]:
    """(capacity per edge, name) of the links an edge of the class crosses, named after the
    first server of the sending (uplinks) and the receiving unit (downlinks)."""
    gs, gd = src.group, dst.group
    a, b = src.server, dst.server
    hops = []
    if gs.intra is not None:
        hops.append((gs.intra, gs.intra_name(a - gs.first_server)))
    if kind != "intra":
        hops.append((gs.nic_up / share, gs.nic_name("uplink", a - gs.first_server)))
        if kind == "rack":
            assert racks is not None
            hops.append((racks.up / share, racks.name(racks.of(a), "uplink")))
            hops.append((racks.down / share, racks.name(racks.of(b), "downlink")))
            # (a run of several racks is named after its first; all carry the same)
        hops.append((gd.nic_down / share, gd.nic_name("downlink", b - gd.first_server)))
    if gd.intra is not None:
        hops.append((gd.intra, gd.intra_name(b - gd.first_server)))
    return hops


def _cpu_hops(src: Unit, dst: Unit, phase: str, servers: int) -> list[tuple[float, str]]:
    """A capped rank's communication CPU at each end of the edge (:mod:`ddlperf.host_cpu`):
    the slowest rank of its group in ``phase`` (a ring step waits for its slowest edge, so
    the class may take its slowest member's rate)."""
    hops = []
    for unit in (src, dst):
        g = unit.group
        rate = ring_rank_rate(g.comm_wall_s_per_byte, g.intra_wall_s_per_byte, g.gpus, phase,
                              servers)
        if rate < math.inf:
            hops.append((rate, cpu_name(g, unit.server - g.first_server)))
    return hops
