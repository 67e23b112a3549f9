"""How the parameter-server models see shards that share their hosts' NICs (colocated PS)."""

from __future__ import annotations

import math
from dataclasses import replace

from ddlperf.scenario import GroupPlan, Scenario


def colocated_view(sc: Scenario, scaled: bool = True) -> Scenario:
    """The scenario as the PS models see it when shards share their hosts' NICs: every
    one-GPU host worker a group of its own (its own shard's part stays local: a host worker
    with no remote shard sends nothing).

    BSP (``scaled=False``): the rates stay the NIC's, and
    :mod:`~ddlperf.predictors.analytic_colocated_bsp` shares each NIC between the roles and
    connections crossing it, as the simulator's fluid network does.

    ASP/SSP's queueing network (``scaled=True``) keeps the older view: a colocated shard's
    host NIC carries two roles, the shard's traffic with the other workers (their pushes in,
    their pulls out) and its own worker's with the other shards; taking the two as following
    each other on each direction (on the uplink the worker pushes during backward, after
    the shard's pulls; on the downlink it pulls after the other shards' updates), the shard
    keeps the NIC's rate. Without overlap the phases are apart (all pushes, then all pulls),
    so the host worker moves its remote part at the NIC's rate. With overlap its transfers
    wait for the shard's, so they take as long as the NIC needs for both roles per
    iteration: its rate is scaled so that its whole model crosses in that time. For BSP
    this was optimistic (mean −5%, worst −14% against the simulator over colocated grids):
    the roles do not follow each other but run at once (the workers drift out of phase),
    and a worker's connections to several shards share its link — see
    :mod:`~ddlperf.predictors.analytic_colocated_bsp`. One-GPU hosts only (multi-GPU
    servers: their own model, the scenario unchanged).
    """
    hosted = {s.host: s for s in sc.shards if s.host is not None}
    if not hosted or any(g.gpus != 1 for g in sc.groups):
        return sc
    shard_bytes = sc.placement.sum(axis=0)
    total = float(sc.tensor_bytes.sum())
    n = sc.worker_count
    groups: list[GroupPlan] = []

    def part(group: GroupPlan, first: int, count: int, **rates: float) -> GroupPlan:
        return replace(group, first=first, count=count,
                       first_server=group.first_server + first - group.first, **rates)

    for group in sc.groups:
        first, end = group.first, group.first + group.count
        for host in sorted(h for h in hosted if first <= h < end):
            if host > first:
                groups.append(part(group, first, host - first))
            shard = hosted[host]
            serving = (n - 1) * float(shard_bytes[shard.index])  # each way, other workers
            own = total - float(shard_bytes[shard.index])  # its worker, other shards
            busy = serving + own if sc.strategy.overlap else own
            scale = (total / busy if own > 0 else math.inf) if scaled else 1.0
            groups.append(part(group, host, 1, up=group.up * scale, down=group.down * scale))
            first = host + 1
        if first < end:
            groups.append(part(group, first, end - first))
    return replace(sc, groups=tuple(groups))
