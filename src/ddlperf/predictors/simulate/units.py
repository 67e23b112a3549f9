"""Simulation units: runs of identical workers simulated as one.

Why: 64 identical workers doing identical things at identical times are one worker whose flows
have weight 64 over links with ``copies=64`` (see :mod:`.network`); the max-min fair rates, the
PS's "all N gradients arrived" counts and every timestamp are the same as with 64 separate
workers, at 1/64 of the events. On multi-GPU servers a unit is a run of whole servers (all
their GPUs): 64 servers × 8 GPUs in lockstep are one unit of 512 workers over NICs with
``copies=64`` and fabric links with ``copies=512``. That is exact only while the members stay
in lockstep, so a unit is split wherever something breaks the symmetry:

* per-operation jitter (each worker draws its own noise) → every worker is its own unit, and
  the GPUs of one server share that server's NIC (one link object, ``copies=1``);
* ASP and SSP (a PS applies arrivals one at a time, so members would drift apart) → same;
* a colocated PS host (its first GPU also applies the shard's updates) → that GPU is a unit
  of its own, the server's other GPUs another, both on the server's NIC.

Units are consecutive worker ranges inside one :class:`~ddlperf.scenario.GroupPlan` (so the
ring of all-reduce, in worker order, crosses unit boundaries only between units), and either
whole servers or part of one server.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddlperf.scenario import GroupPlan, Scenario


@dataclass(frozen=True)
class Unit:
    """Workers ``first`` … ``first + count - 1`` of ``group``, simulated as one."""

    index: int
    group: GroupPlan
    first: int
    count: int
    hosts: int | None = None  # PS shard this (single) worker's host also runs

    @property
    def server(self) -> int:
        """Global index of the server of the first worker."""
        g = self.group
        return g.first_server + (self.first - g.first) // g.gpus

    @property
    def servers(self) -> int:
        """Whole servers this unit spans (0: it is part of one server)."""
        g = self.group
        whole = (self.first - g.first) % g.gpus == 0 and self.count % g.gpus == 0
        return self.count // g.gpus if whole else 0

    @property
    def names(self) -> list[str]:
        g = self.group
        return [g.worker_name(i - g.first) for i in range(self.first, self.first + self.count)]

    @property
    def label(self) -> str:
        """``w3``, ``w0–w63``, ``node0–node63`` (whole servers), ``node0/gpu1–node0/gpu7``."""
        if self.group.kind == "nodes" and self.servers:
            servers = self.server_names
            return servers[0] if len(servers) == 1 else f"{servers[0]}–{servers[-1]}"
        names = self.names
        return names[0] if self.count == 1 else f"{names[0]}–{names[-1]}"

    @property
    def server_names(self) -> list[str]:
        """The servers this unit's workers are on (for server tracks in the trace)."""
        g = self.group
        first = self.server - g.first_server
        last = (self.first + self.count - 1 - g.first) // g.gpus
        return [g.server_name(s) for s in range(first, last + 1)]


def make_units(sc: Scenario, individual: bool) -> list[Unit]:
    """Split the scenario's worker groups into units (see the module docstring)."""
    hosted = {s.host: s.index for s in sc.shards if s.host is not None}
    units: list[Unit] = []

    def add(group: GroupPlan, first: int, count: int) -> None:
        if count > 0:
            units.append(Unit(len(units), group, first, count, hosted.get(first)
                              if count == 1 else None))

    for group in sc.groups:
        start = group.first
        end = group.first + group.count
        if individual:
            for w in range(start, end):
                add(group, w, 1)
            continue
        run_start = start
        for w in range(start, end, group.gpus):  # a host is always a server's first GPU
            if w in hosted:
                add(group, run_start, w - run_start)
                add(group, w, 1)
                add(group, w + 1, group.gpus - 1)
                run_start = w + group.gpus
        add(group, run_start, end - run_start)
    return units
