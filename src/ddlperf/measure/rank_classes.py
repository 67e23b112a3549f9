"""Once every rank has connected: give each rank its class on its server's loopback and each
pair of ranks on different hosts its own fair class on every shaped link between them.

Ranks of one host (a server's GPUs, a worker and its colocated shard) share its IP address;
only TCP ports tell their traffic apart, and the ports are known once the ranks have
connected (gloo connects every pair at start-up: the trainers wait at the loopback gate
until this classification is done, so no byte of training is classified late). See
:func:`ddlperf.measure.shaping.shape_loopback` and
:func:`ddlperf.measure.shaping.add_pair_classes` for why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ddlperf.measure import shaping
from ddlperf.measure.loopback import connections

if TYPE_CHECKING:
    from ddlperf.measure.emulated import EmulatedCluster


@dataclass(frozen=True)
class Rank:
    """A running rank: its name, host, local rank on the host and process id."""

    name: str
    host: str
    local: int
    pid: int


def classify(cluster: EmulatedCluster, ranks: list[Rank]) -> dict[str, int]:
    """Install the classes and filters; returns per host the sockets classified on ``lo``
    and, under ``pairs``, the rank pairs given classes on the links between hosts."""
    sockets = {r.name: connections(r.pid) for r in ranks}
    owner = {(lip, lport): r.name for r in ranks for (lip, lport, _ip, _p) in sockets[r.name]}
    by_name = {r.name: r for r in ranks}
    loopback: dict[str, dict[int, str]] = {}
    pairs: dict[tuple[str, str], list[shaping.Connection]] = {}
    for r in ranks:
        for lip, lport, rip, rport in sockets[r.name]:
            peer = owner.get((rip, rport))
            if peer is None or peer == r.name:
                continue
            if by_name[peer].host == r.host:
                loopback.setdefault(r.host, {})[lport] = shaping.rank_class(r.local)
            else:
                pairs.setdefault((r.name, peer), []).append((lip, lport, rip, rport))
    counts: dict[str, int] = {}
    for host, ports in loopback.items():
        if cluster.loopback_shaped(host):
            shaping.classify_ports(cluster.namespace(host), ports)
            counts[host] = len(ports)
    devices: dict[tuple[str, str], tuple[float, int, list[list[shaping.Connection]]]] = {}
    for (src, dst), conns in sorted(pairs.items()):
        for ns, dev, rate, limit in cluster.path(by_name[src].host, by_name[dst].host):
            devices.setdefault((ns, dev), (rate, limit, []))[2].append(conns)
    for (ns, dev), (rate, limit, groups) in devices.items():
        shaping.add_pair_classes(ns, dev, rate, limit, groups)
    counts["pairs"] = len(pairs)
    return counts
