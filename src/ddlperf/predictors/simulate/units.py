"""Simulation units: runs of identical workers simulated as one.

Why: 64 identical workers doing identical things at identical times are one worker whose flows
have weight 64 over NICs with ``copies=64`` (see :mod:`.network`); the max-min fair rates, the
PS's "all N gradients arrived" counts and every timestamp are the same as with 64 separate
workers, at 1/64 of the events. That is exact only while the members stay in lockstep, so a unit
is split (down to single workers) wherever something breaks the symmetry:

* per-operation jitter (each worker draws its own noise) → every worker is its own unit;
* ASP and SSP (a PS applies arrivals one at a time, so members would drift apart) → same;
* a colocated PS host (it also runs a shard) → a unit of its own.

Units are consecutive worker ranges inside one :class:`~ddlperf.scenario.GroupPlan`, so the
ring of all-reduce (worker order) crosses unit boundaries only between units.
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
    def label(self) -> str:
        """``w3`` or ``w0–w63`` (a range for a group)."""
        last = self.first + self.count - 1
        return f"w{self.first}" if self.count == 1 else f"w{self.first}–w{last}"

    @property
    def names(self) -> list[str]:
        return [f"w{i}" for i in range(self.first, self.first + self.count)]


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
        for w in range(start, end):
            if w in hosted:
                add(group, run_start, w - run_start)
                add(group, w, 1)
                run_start = w + 1
        add(group, run_start, end - run_start)
    return units
