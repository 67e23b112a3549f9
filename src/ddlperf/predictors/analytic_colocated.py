"""How the parameter-server models see shards that share their hosts' NICs (colocated PS)."""

from __future__ import annotations

from dataclasses import replace

from ddlperf.scenario import GroupPlan, Scenario


def colocated_view(sc: Scenario) -> Scenario:
    """The scenario as the PS models see it when shards share their hosts' NICs: every
    one-GPU host worker a group of its own, at its NIC's rates (its own shard's part stays
    local: a host worker with no remote shard sends nothing). Both models share each NIC
    between the roles and connections crossing it, as the simulator's fluid network does:
    BSP in :mod:`~ddlperf.predictors.analytic_colocated_bsp`, ASP/SSP's queueing network in
    :mod:`~ddlperf.predictors.analytic_colocated_async`. One-GPU hosts only (multi-GPU
    servers: their own model, the scenario unchanged).
    """
    hosted = {s.host: s for s in sc.shards if s.host is not None}
    if not hosted or any(g.gpus != 1 for g in sc.groups):
        return sc
    groups: list[GroupPlan] = []

    def part(group: GroupPlan, first: int, count: int) -> GroupPlan:
        return replace(group, first=first, count=count,
                       first_server=group.first_server + first - group.first)

    for group in sc.groups:
        first, end = group.first, group.first + group.count
        for host in sorted(h for h in hosted if first <= h < end):
            if host > first:
                groups.append(part(group, first, host - first))
            groups.append(part(group, host, 1))
            first = host + 1
        if first < end:
            groups.append(part(group, first, end - first))
    return replace(sc, groups=tuple(groups))
