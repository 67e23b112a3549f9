"""The worker-side links of a PS iteration, by name: NICs, intra-node fabric, rack links.

Both predictors report resources under the same names: ``w3 uplink`` for the hosts of a
``workers:`` cluster; ``node1 nic0 uplink`` (``nic0-1`` for two NICs counted as one link),
``node1 intra`` (one GPU's fabric link, the busier direction) and ``rack0 uplink`` for
servers. A group of identical servers is reported once, under its first server.
"""

from __future__ import annotations

from ddlperf.scenario import GroupPlan, Scenario


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
