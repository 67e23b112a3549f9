"""All-reduce on servers: the phases of one bucket, how fast each runs, and what binds it.

Flat ring (``--allreduce ring``): one ring over all N workers, server by server (what NCCL
builds). A bucket of S bytes is 2(N−1) steps of S/N bytes on every ring edge at once. An edge
inside a server crosses the sender's and the receiver's fabric links; an edge between servers
crosses the sender's fabric link, its server's NICs, the receiver's NICs and fabric link, and
the two racks' links when it leaves a rack. Servers are consecutive on the ring, so every
fabric link, NIC direction and rack link carries exactly one edge: the ring runs at the
slowest link on it.

Hierarchical (``--allreduce hierarchical``, same G on every server): reduce-scatter inside
each server over the fabric (G−1 steps of S/G), all-reduce of each GPU's S/G shard across the
S servers (G rings, one per GPU index, 2(S−1) steps of S/(G·S); each NIC direction and rack
link carries the G edges of its server, so an edge gets a 1/G share), all-gather inside (G−1
steps of S/G). Each server's NICs move 2(S−1)/S · S bytes per direction in all, a flat ring's
2(N−1)/N · S.

A CPU-capped worker's communication CPU is one more link on its edges (``w1 cpu``, ``node0
cpu``): per step a rank sends one chunk and receives one, at the per-byte CPU of the NIC or,
where the fabric is TCP through the host, of the fabric (:func:`ddlperf.host_cpu.ring_rank_rate`).

Every step costs one latency α plus its chunk over the phase's rate; phases and buckets run
one after another on one stream, so nothing else shares their links. A transport's cap
(:mod:`ddlperf.transport`) limits every edge between servers (each is one connection; inside
a server collective libraries use P2P or shared memory): a link named ``connection``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddlperf.host_cpu import ring_rank_rate
from ddlperf.scenario import GroupPlan, Scenario


@dataclass(frozen=True)
class Phase:
    """``steps`` steps of ``size / parts`` bytes per edge at ``rate`` (payload bytes/s)."""

    steps: int
    parts: int
    rate: float
    binding: str  # resource name of the slowest link (``node0 nic0 uplink``, ``node0 intra``)
    intra: bool  # the phase stays inside servers
    kind: str  # "flat" (all workers), "inside" (each server's GPUs), "across" (servers)

    def seconds(self, size: float, alpha: float) -> float:
        """``steps`` × (α + size / (parts × rate)), the analytic ring formula."""
        return self.steps * (alpha + size / (self.parts * self.rate))


Link = tuple[float, str, bool]  # (rate per edge, resource name, inside a server)
CONNECTION = "connection"  # the transport's per-connection cap, as a link of its own


def _server_links(sc: Scenario, share: int) -> list[Link]:
    """NIC and rack links an edge between servers crosses, each divided by ``share`` edges."""
    links: list[Link] = []
    if sc.server_count > 1:
        for g in sc.groups:
            links += [(g.nic_up / share, g.nic_name("uplink"), False),
                      (g.nic_down / share, g.nic_name("downlink"), False)]
    racks = sc.racks
    if racks is not None and racks.count > 1:
        for r in range(racks.count):
            links += [(racks.up / share, racks.name(r, "uplink"), False),
                      (racks.down / share, racks.name(r, "downlink"), False)]
    if links and sc.capped:  # each edge leaving a server is a connection of the transport
        links.append((sc.connection_cap, CONNECTION, False))
    return links


def _cpu_links(sc: Scenario, phase: str) -> list[Link]:
    """The slowest capped rank of each group in ``phase``: its CPU moves its edges no faster
    than :func:`~ddlperf.host_cpu.ring_rank_rate`."""
    inside = phase == "inside" or sc.server_count <= 1
    links: list[Link] = []
    for g in sc.groups:
        rate = ring_rank_rate(g.comm_wall_s_per_byte, g.intra_wall_s_per_byte, g.gpus, phase,
                              sc.server_count)
        if rate < float("inf"):
            links.append((rate, cpu_name(g), inside))
    return links


def cpu_name(group: GroupPlan, offset: int = 0) -> str:
    """The resource a capped worker's communication CPU is (``w1 cpu``, ``node0 cpu``)."""
    return f"{group.server_name(offset)} cpu"


def _fabric_links(sc: Scenario) -> list[Link]:
    return [(g.intra, g.intra_name(), True) for g in sc.groups if g.intra is not None]


def _phase(kind: str, steps: int, parts: int, links: list[Link]) -> Phase:
    rate, name, intra = min(links, key=lambda link: link[0])
    return Phase(steps, parts, rate, name, intra, kind)


def ring_phases(sc: Scenario) -> list[Phase]:
    """The phases of one bucket (none when there is nothing to reduce with)."""
    n = sc.worker_count
    if n <= 1:
        return []
    if sc.strategy.allreduce == "ring":
        # NICs first, so that a tie names the NIC (and a workers: cluster names its ring as
        # it always has: the first group's uplink, else its downlink)
        return [_phase("flat", 2 * (n - 1), n,
                       _server_links(sc, 1) + _fabric_links(sc) + _cpu_links(sc, "flat"))]
    gpus = sc.groups[0].gpus
    servers = sc.server_count
    phases = []
    inside = _fabric_links(sc)
    inside_cpu = inside + _cpu_links(sc, "inside")
    if gpus > 1:
        phases.append(_phase("inside", gpus - 1, gpus, inside_cpu))
    if servers > 1:
        phases.append(_phase("across", 2 * (servers - 1), gpus * servers,
                             _server_links(sc, gpus) + inside + _cpu_links(sc, "across")))
    if gpus > 1:
        phases.append(_phase("inside", gpus - 1, gpus, inside_cpu))
    return phases


def ring_intra_share(sc: Scenario, phases: list[Phase], bucket_bytes: list[float]) -> float:
    """Share of the all-reduce time spent in phases inside servers (what splits exposed
    communication into ``communication_intra`` and ``communication_inter``)."""
    times = [(phase.intra, phase.seconds(size, sc.latency_s))
             for phase in phases for size in bucket_bytes]
    total = sum(t for _, t in times)
    inside = sum(t for intra, t in times if intra)
    return inside / total if inside else 0.0
