"""The links an ASP worker meets besides its shards' (its server's NIC, its rack's uplink and
downlink) as stations of the queueing network of :mod:`ddlperf.predictors.analytic_ps_async`,
and which workers move on phases of their own through them.

Split from that module, which builds the network and takes its steady state; this one says
which shared links are stations (a link faster than all its senders at once is none) and what a
worker moving alone has of them.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ddlperf.predictors.analytic_colocated_async import host_workers
from ddlperf.scenario import GroupPlan, Scenario


def independent_gpus(sc: Scenario, group: GroupPlan) -> bool:
    """Whether ``group``'s workers move on phases of their own through links they share with
    other workers of theirs (a server's NIC, a rack's uplink), rather than all together.

    Two GPUs of one server keep whatever offset they have on their shared NIC, and lockstep
    there is metastable: in the measured runs of 2 servers × 2 GPUs (ASP, no local
    aggregation) a server's GPUs that parted never came back together and settled half a
    period apart, where GPUs still together ran 20% slower (docs/models.md), as two workers on
    a dedicated shard do (unlike :func:`remote_pair`). A job of thousands of iterations is
    parted, so each GPU is a customer of its own, meeting its server's other GPUs at the NIC
    and its rack's other workers at the rack's links (:func:`rack_stations`). Not with a shard
    on the group's servers; local aggregation (BSP only) has a server's GPUs wait for each
    other every iteration. One-GPU hosts are customers of their own anyway; they count here
    only where their rack's links are stations.

    Racks do not decide whether a server's GPUs part at its NIC: that made a rack that
    carries nothing (every server and shard in it) move ASP on colocated servers by 22-63%.
    """
    if sc.strategy.local_aggregation or any(host_workers(shard, group) for shard in sc.shards):
        return False
    if sc.gpus_together and group.gpus > 1:  # the arrangement figure's other arrangement
        return False
    return group.gpus > 1 or rack_stations(sc)


def rack_stations(sc: Scenario) -> bool:
    """Whether racks' links are queueing stations of the ASP network: racks, and every shard
    dedicated (outside every rack), so that all a worker moves crosses its rack's links. A
    rack that holds shards also carries others' pulls from them, which a station met by its
    own workers' bytes does not describe; there a worker's path rate keeps its share of the
    rack's link when all move at once (``topology.plan_servers``)."""
    return sc.racks is not None and all(shard.host is None for shard in sc.shards)


def gpu_alone(sc: Scenario, group: GroupPlan) -> GroupPlan:
    """``group``'s worker as it moves alone: a worker of :func:`independent_gpus` has its
    server's NIC, its own fabric link and its rack's links to itself; anyone else its path
    rate (its share of them when all move at once)."""
    if not independent_gpus(sc, group):
        return group
    fabric = math.inf if group.intra is None else group.intra
    rack_up, rack_down = math.inf, math.inf
    racks = sc.racks
    if racks is not None and group.rack is not None:
        if rack_stations(sc):
            rack_up, rack_down = racks.up, racks.down
        else:  # its share, all moving at once, as its path rate has it
            rack_up, rack_down = racks.share(group.rack, float(sc.placement.sum()))
    return replace(group, gpus=1, up=min(group.nic_up, fabric, rack_up),
                   down=min(group.nic_down, fabric, rack_down))


Station = tuple[str, np.ndarray, np.ndarray, int, str]  # name, demand, floor, copies, part


def shared_link_stations(sc: Scenario, alone: list[GroupPlan]) -> list[Station]:
    """The links that :func:`independent_gpus` workers share among themselves, as stations:
    a server's NIC (one per server, met only by its GPUs: copies = servers) and a rack's
    uplink and downlink (one per rack, met by the workers in it; a group of whole racks has
    its own, copies = its racks). Every byte a worker moves to or from the shards crosses
    them (the shards in parallel, one transfer; dedicated shards sit outside every rack)."""
    moved = float(sc.placement.sum())
    overlap = sc.strategy.overlap
    classes = np.arange(len(sc.groups))
    links: list[tuple[str, str, np.ndarray, float, float, np.ndarray, np.ndarray, int]] = []
    racks = sc.racks
    shared_racks: dict[int, list[int]] = {}
    for c, (g, a) in enumerate(zip(sc.groups, alone)):
        if a is g:
            continue
        own = classes == c
        low_up, low_down = own * moved / a.up, own * moved / min(a.down, sc.receive_cap)
        if g.gpus > 1:
            links.append((g.nic_name("uplink"), g.nic_name("downlink"), own, g.nic_up,
                          g.nic_down, low_up, low_down, g.servers))
        if racks is not None and g.rack is not None and rack_stations(sc):
            if g.whole_racks:
                links.append((racks.name(g.rack, "uplink"), racks.name(g.rack, "downlink"),
                              own, racks.up, racks.down, low_up, low_down, g.whole_racks))
            else:
                shared_racks.setdefault(g.rack, []).append(c)
    own_up = np.array([a.up for a in alone])
    own_down = np.array([min(a.down, sc.receive_cap) for a in alone])
    for rack, members in shared_racks.items():  # a rack shared by several groups
        assert racks is not None
        inside = np.isin(classes, members)
        links.append((racks.name(rack, "uplink"), racks.name(rack, "downlink"), inside,
                      racks.up, racks.down, inside * moved / own_up, inside * moved / own_down,
                      1))
    out: list[Station] = []
    count = np.array([g.count for g in sc.groups], dtype=float)
    for up_name, down_name, visits, up_rate, down_rate, up_low, down_low, copies in links:
        per_copy = visits * count / copies  # the workers that cross one copy
        if (per_copy @ own_up <= up_rate * (1 + 1e-12)
                and per_copy @ own_down <= down_rate * (1 + 1e-12)):
            continue  # faster than all its senders at once: it never holds anyone back
        up = (visits * moved / up_rate, up_low)
        down = (visits * moved / down_rate, down_low)
        if overlap:  # pipelined with the rest: the busier direction
            hot = up_name if up_rate <= down_rate else down_name
            out.append((hot, np.maximum(up[0], down[0]), np.maximum(up[1], down[1]), copies,
                        "link"))
        else:
            out += [(up_name, *up, copies, "link uplink"),
                    (down_name, *down, copies, "link downlink")]
    return out
