"""The worker-side links of a PS iteration, by name: NICs, intra-node fabric, rack links.

Both predictors report resources under the same names: ``w3 uplink`` for the hosts of a
``workers:`` cluster; ``node1 nic0 uplink`` (``nic0-1`` for two NICs counted as one link),
``node1 intra`` (one GPU's fabric link, the busier direction) and ``rack0 uplink`` for
servers. A group of identical servers is reported once, under its first server.
"""

from __future__ import annotations

from ddlperf.scenario import GroupPlan, Scenario


def aggregates(sc: Scenario, group: GroupPlan) -> bool:
    """Local aggregation applies: the servers of ``group`` push and pull once each."""
    return sc.strategy.local_aggregation and group.gpus > 1


def ps_endpoints(sc: Scenario, group: GroupPlan) -> int:
    """Who talks to the shards: every worker, or every server when aggregating."""
    return group.servers if aggregates(sc, group) else group.count


def ps_endpoint_rates(sc: Scenario, group: GroupPlan) -> tuple[float, float]:
    """An endpoint's push and pull rates: a worker's path, or a server's G paths together
    (each GPU pushes and pulls a 1/G slice of the server's sum)."""
    if aggregates(sc, group):
        return group.gpus * group.up, group.gpus * group.down
    return group.up, group.down


def host_endpoints(sc: Scenario, group: GroupPlan) -> int:
    """Endpoints on one server of ``group`` (they reach a shard there without the NIC)."""
    return 1 if aggregates(sc, group) else group.gpus


def ps_server_bytes(sc: Scenario, group: GroupPlan) -> tuple[float, float]:
    """Bytes one server of ``group`` sends through its NICs and one GPU through its fabric
    link per PS iteration (each direction: pulls bring back what pushes sent)."""
    total = sc.parameter_bytes
    g = group.gpus
    if sc.strategy.local_aggregation and g > 1:
        # reduce-scatter (G−1)/G, push and pull a 1/G slice, all-gather (G−1)/G
        return total, total * (2 * g - 1) / g
    return g * total, total


def ps_link_busy(sc: Scenario) -> list[tuple[str, float]]:
    """(resource, busy seconds per iteration) of every group's NIC, fabric and rack links."""
    busy: list[tuple[str, float]] = []
    for group in sc.groups:
        nic, intra = ps_server_bytes(sc, group)
        busy.append((group.nic_name("uplink"), nic / group.nic_up))
        busy.append((group.nic_name("downlink"), nic / group.nic_down))
        if group.intra is not None:
            busy.append((group.intra_name(), intra / group.intra))
    racks = sc.racks
    if racks is not None:
        for r, load in enumerate(racks.crossing):
            busy.append((racks.name(r, "uplink"), load / racks.up))
            busy.append((racks.name(r, "downlink"), load / racks.down))
    return busy


def ps_intra_share(sc: Scenario, group: GroupPlan) -> float:
    """Share of a worker's PS communication that stays inside its server, by transfer time
    (bytes over the rate of their path, no contention): the local aggregation's reduce and
    all-gather, and traffic with a shard on the worker's own server. What splits exposed
    communication into ``communication_intra`` and ``communication_inter``."""
    if group.intra is None:
        return 0.0
    total = sc.parameter_bytes
    g = group.gpus
    if sc.strategy.local_aggregation:
        inside = 2 * (g - 1) / g * total / group.intra
        outside = 2 * total / (g * group.up)
        return inside / (inside + outside)
    hosted = [k for k, shard in enumerate(sc.shards) if shard.host_server is not None
              and group.first_server <= shard.host_server < group.first_server + group.servers]
    if not hosted:
        return 0.0
    # averaged over the group's servers: only a host server's GPUs have a shard at home
    local = float(sc.placement[:, hosted].sum()) / group.servers
    inside = 2 * local / group.intra
    outside = 2 * (total - local) / group.up
    return inside / (inside + outside)
