"""The clusters ``ddlperf plan`` searches, and what each costs per hour.

A candidate is a number of servers of one instance type (or, with ``mixes``, of two), a
synchronization architecture — PS with K dedicated shards on priced PS hosts, or all-reduce
(ring, or hierarchical on multi-GPU servers) — a sync mode and, on multi-GPU servers with a PS,
local aggregation on or off; a BSP PS with or without the step barrier of TensorFlow 1.x's
synchronous PS (``step_barrier``: off unless asked for, as it only describes that framework).
Each candidate knows the :func:`ddlperf.api.predict` keywords of its scenario (an explicit
cluster mapping), so any answer can be re-predicted directly.

PS hosts: each shard runs on the cheapest PS host of the table whose NIC is at least as fast
as the workers' NICs (so the shard is not slower than in the model, which gives it that rate);
where none is that fast, the fastest one, at its own rate.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ddlperf.errors import InputError
from ddlperf.plan.prices import Instance, PriceTable, PSHost

MIX_FRACTIONS = (0.25, 0.5, 0.75)  # share of the servers of the first instance type in a mix


@dataclass(frozen=True)
class Candidate:
    """One cluster of the search (``parts``: (instance, servers) of each server group)."""

    parts: tuple[tuple[Instance, int], ...]
    arch: str
    ps: int
    sync: str = "bsp"
    staleness: int | None = None
    allreduce: str = "ring"
    local_aggregation: bool = False
    ps_host: PSHost | None = None
    step_barrier: bool = False

    @property
    def servers(self) -> int:
        return sum(n for _i, n in self.parts)

    @property
    def workers(self) -> int:
        return sum(i.gpus * n for i, n in self.parts)

    @property
    def instance(self) -> str:
        return "+".join(f"{n}×{i.name}" if len(self.parts) > 1 else i.name
                        for i, n in self.parts)

    @property
    def price_per_hour(self) -> float:
        hosts = self.ps * self.ps_host.price_per_hour if self.ps_host is not None else 0.0
        return sum(i.price_per_hour * n for i, n in self.parts) + hosts

    @property
    def batchable(self) -> bool:
        """One group of one-GPU, one-NIC servers: the batched analytic path applies."""
        (inst, _n), *rest = self.parts
        return not rest and inst.gpus == 1 and inst.nics == 1

    @property
    def family(self) -> tuple[Any, ...]:
        """What candidates that differ only in their server count share."""
        return (tuple(i.name for i, _n in self.parts), self.arch, self.ps, self.sync,
                self.staleness, self.allreduce, self.local_aggregation, self.step_barrier,
                None if self.ps_host is None else self.ps_host.name,
                tuple(n for _i, n in self.parts) if len(self.parts) > 1 else None)

    def cluster(self, servers: int | None = None) -> dict[str, Any]:
        """The cluster mapping (``servers`` overrides the count of a one-group candidate)."""
        groups = []
        for inst, n in self.parts:
            group: dict[str, Any] = {"name": inst.name, "count": servers or n,
                                     "device": inst.device, "bandwidth": inst.bandwidth}
            if inst.gpus > 1 or len(self.parts) > 1 or inst.nics > 1:
                group.update({"gpus": inst.gpus, "nics": inst.nics})
                if inst.intra is not None:
                    group["intra"] = inst.intra
            groups.append(group)
        key = "workers" if all("gpus" not in g for g in groups) else "nodes"
        data: dict[str, Any] = {key: groups, "ps": {"count": self.ps}}
        if self.ps_host is not None:
            data["ps"]["bandwidth"] = self.ps_host.bandwidth
        return data

    def kwargs(self, fixed: dict[str, Any], servers: int | None = None) -> dict[str, Any]:
        """:func:`ddlperf.api.predict` keywords of this candidate's scenario."""
        strategy: dict[str, Any] = {"arch": self.arch, "sync": self.sync,
                                    "staleness": self.staleness}
        if self.arch == "allreduce":
            strategy["allreduce"] = self.allreduce
        else:
            strategy["local_aggregation"] = self.local_aggregation
            strategy["step_barrier"] = self.step_barrier
        device = self.parts[0][0].device if fixed.get("workload") is None else None
        return {**fixed, **strategy, "device": device, "cluster": self.cluster(servers)}

    def describe(self) -> dict[str, Any]:
        """Table and CSV columns of the candidate (not of its prediction)."""
        return {
            "instance": self.instance, "servers": self.servers, "workers": self.workers,
            "arch": self.arch if self.arch == "ps" else f"allreduce-{self.allreduce}",
            "ps": self.ps, "ps_host": None if self.ps_host is None else self.ps_host.name,
            "sync": self.sync if self.sync != "ssp" else f"ssp({self.staleness})",
            "local_aggregation": self.local_aggregation,
            "step_barrier": self.step_barrier,
            "price_per_hour": self.price_per_hour,
        }


@dataclass
class SearchSpace:
    """What to search; every list non-empty (checked by :meth:`check`)."""

    instances: Sequence[Instance]
    servers: Sequence[int]
    ps: Sequence[int] = (1, 2, 4, 8)
    arch: Sequence[str] = ("ps", "allreduce")
    allreduce: Sequence[str] = ("ring", "hierarchical")
    sync: Sequence[str] = ("bsp",)
    staleness: int = 3
    step_barrier: Sequence[bool] = (False,)  # for BSP PS candidates
    mixes: bool = False
    max_workers: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        for name in ("instances", "servers", "arch", "step_barrier"):
            if not list(getattr(self, name)):
                raise InputError(f"--{name}", "is empty", "give at least one value")
        if "ps" in self.arch and not list(self.ps):
            raise InputError("--ps", "is empty while --arch includes ps", "give a range, e.g. 1..8")
        if any(n <= 0 for n in self.servers):
            raise InputError("--servers", "server counts must be at least 1")
        if any(k <= 0 for k in self.ps):
            raise InputError("--ps", "shard counts must be at least 1 (all-reduce has none)")


def candidates(space: SearchSpace, table: PriceTable) -> Iterator[Candidate]:
    """Every candidate of the space, one family (all server counts) after another."""
    space.check()
    for inst in space.instances:
        for family in _families(space, table, [inst]):
            for n in space.servers:
                if space.max_workers is None or n * inst.gpus <= space.max_workers:
                    yield _with(family, ((inst, n),))
    if space.mixes:
        for a, b in itertools.combinations(space.instances, 2):
            for n in space.servers:
                for share in MIX_FRACTIONS:
                    first = n * share
                    if first != int(first) or not 0 < first < n:
                        continue
                    parts = ((a, int(first)), (b, n - int(first)))
                    workers = sum(i.gpus * c for i, c in parts)
                    if space.max_workers is not None and workers > space.max_workers:
                        continue
                    for family in _families(space, table, [a, b], mix=True):
                        yield _with(family, parts)


def _with(template: Candidate, parts: tuple[tuple[Instance, int], ...]) -> Candidate:
    return Candidate(parts, template.arch, template.ps, template.sync, template.staleness,
                     template.allreduce, template.local_aggregation, template.ps_host,
                     template.step_barrier)


def _families(space: SearchSpace, table: PriceTable, insts: list[Instance],
              mix: bool = False) -> Iterator[Candidate]:
    """Architecture × shards × sync × algorithm templates (parts filled in by the caller)."""
    multi = any(i.gpus > 1 for i in insts)
    same_gpus = len({i.gpus for i in insts}) == 1
    if "allreduce" in space.arch:
        for algorithm in space.allreduce:
            if algorithm == "hierarchical" and not (multi and same_gpus):
                continue
            yield Candidate((), "allreduce", 0, allreduce=algorithm)
    if "ps" in space.arch:
        fastest_nic = max(i.bandwidth for i in insts)
        host = table.ps_host_for(fastest_nic) or max(
            table.ps_hosts, key=lambda h: h.bandwidth, default=None)
        if host is None:
            raise InputError("--prices", "the price table has no ps_hosts, so PS shards cannot "
                             "be priced", "add ps_hosts to it or search --arch allreduce")
        for k in space.ps:
            for sync in space.sync:
                staleness = space.staleness if sync == "ssp" else None
                barriers = space.step_barrier if sync == "bsp" else (False,)
                for barrier in barriers:
                    yield Candidate((), "ps", k, sync, staleness, ps_host=host,
                                    step_barrier=barrier)
                    if multi and sync == "bsp" and not mix:
                        yield Candidate((), "ps", k, sync, None, local_aggregation=True,
                                        ps_host=host, step_barrier=barrier)
