"""The published-check file of ``ddlperf validate --published`` (YAML): schema and reading.

One entry per published number. ``setups:`` are named set-ups in ddlperf terms (a cluster
with ``nodes:``, a strategy, whether the source states the network, the assumptions the
source leaves open, or why ddlperf cannot express it yet); an entry names its set-up and how
many servers (and PS shards) it ran on. An entry without a set-up is one GPU alone: the
compute model's check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ddlperf.errors import InputError
from ddlperf.schema import load_named_file


class Source(BaseModel):
    """Where a group of published numbers comes from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str = Field(min_length=1)
    where: str = Field(min_length=1, description="repository and path, or address")
    date: str = Field(min_length=1)


class SetupStrategy(BaseModel):
    """How the set-up synchronizes (the keys of ``ddlperf predict``'s strategy flags)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    arch: Literal["ps", "allreduce"]
    sync: Literal["bsp", "asp", "ssp"] = "bsp"
    staleness: int | None = Field(default=None, ge=0)
    sharding: Literal["round_robin", "greedy", "even"] = "round_robin"
    overlap: bool = True
    bucket_size: str | float | None = None
    allreduce: Literal["ring", "hierarchical"] = "ring"
    local_aggregation: bool = False
    step_barrier: bool = False


class Setup(BaseModel):
    """A set-up the source ran, in ddlperf terms, or why ddlperf cannot express it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(min_length=1)
    what: str = Field(min_length=1, description="the set-up in the source's words")
    cluster: dict[str, Any] | None = Field(
        default=None, description="cluster YAML with one nodes: group (count set per entry)")
    strategy: SetupStrategy | None = None
    network_stated: bool
    assumptions: list[str] = Field(default_factory=list)
    unsupported: str | None = Field(default=None, min_length=1,
                                    description="why ddlperf cannot express it yet")


class Entry(BaseModel):
    """One published number: a single GPU (``device``) or a set-up on ``servers`` servers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=80)
    source: str | None = None
    setup: str | None = None
    model: str = Field(min_length=1)
    device: str | None = Field(default=None, description="single-GPU entries")
    batch_size: int = Field(gt=0, description="samples per GPU per iteration")
    dtype: str = Field(min_length=1)
    math: str | None = None
    servers: int | None = Field(default=None, gt=0)
    gpus: int | None = Field(default=None, gt=0, description="GPUs per server, if not the set-up's")
    ps: int | None = Field(default=None, ge=1, description="PS shards")
    published: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                    description="samples/s of the whole job")
    published_s: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                      description="seconds per iteration")
    baseline: str | None = Field(default=None, description="the single-GPU entry it scales from")
    note: str | None = None
    assumptions: list[str] = Field(default_factory=list)

    @property
    def single(self) -> bool:
        return self.setup is None


class Comparison(BaseModel):
    """Two entries the source compares on one cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    what: str = Field(min_length=1)
    entries: list[str] = Field(min_length=2, max_length=2)


class PublishedFile(BaseModel):
    """The whole file: sources, set-ups, entries, comparisons."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str | None = None
    description: str | None = None
    findings: str | None = None
    assumptions: list[str] = Field(default_factory=list)
    sources: dict[str, Source] = Field(min_length=1)
    setups: dict[str, Setup] = Field(default_factory=dict)
    entries: list[Entry] = Field(min_length=1)
    compare: list[Comparison] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> PublishedFile:
        for setup_name, setup in self.setups.items():
            _check_setup(f"setups.{setup_name}", setup)
        names: set[str] = set()
        for i, e in enumerate(self.entries):
            where = f"entries[{i}]"
            _check_entry(where, e)
            if e.name in names:
                raise InputError(f"{where}.name", f"{e.name!r} appears twice", "rename one")
            names.add(e.name)
            setup = self.setups.get(e.setup) if e.setup else None
            if e.setup and setup is None:
                raise InputError(f"{where}.setup", f"unknown set-up {e.setup!r}",
                                 f"known: {', '.join(self.setups)}")
            source = e.source or (setup.source if setup else None)
            if source not in self.sources:
                raise InputError(f"{where}.source", f"unknown source {source!r}",
                                 f"known: {', '.join(self.sources)}")
            if (setup and setup.unsupported is None and setup.strategy is not None
                    and setup.strategy.arch == "ps" and e.ps is None):
                raise InputError(f"{where}.ps", "is required with a PS set-up",
                                 "add ps: <shards> (state an assumption if the source does not)")
        for setup_name, setup in self.setups.items():
            if setup.source not in self.sources:
                raise InputError(f"setups.{setup_name}.source",
                                 f"unknown source {setup.source!r}",
                                 f"known: {', '.join(self.sources)}")
        for i, e in enumerate(self.entries):
            if e.baseline is not None and e.baseline not in names:
                raise InputError(f"entries[{i}].baseline", f"unknown entry {e.baseline!r}",
                                 "name a single-GPU entry")
        for i, c in enumerate(self.compare):
            for name in c.entries:
                if name not in names:
                    raise InputError(f"compare[{i}].entries", f"unknown entry {name!r}",
                                     "use an entry's name")
        return self

    def setup_of(self, entry: Entry) -> Setup | None:
        return self.setups.get(entry.setup) if entry.setup else None

    def source_of(self, entry: Entry) -> str:
        setup = self.setup_of(entry)
        return entry.source or (setup.source if setup else "")


def _check_setup(where: str, setup: Setup) -> None:
    """A supported set-up has a cluster of one group of servers and a strategy."""
    if setup.unsupported is not None:
        return
    if setup.cluster is None:
        raise InputError(f"{where}.cluster", "is required unless the set-up is unsupported",
                         "add the cluster, or unsupported: <why>")
    if setup.strategy is None:
        raise InputError(f"{where}.strategy", "is required unless the set-up is unsupported",
                         "add the strategy, or unsupported: <why>")
    nodes = setup.cluster.get("nodes")
    if not (isinstance(nodes, list) and len(nodes) == 1 and isinstance(nodes[0], dict)):
        raise InputError(f"{where}.cluster.nodes", "must be one group of servers",
                         "e.g. nodes: [{gpus: 8, device: V100, intra: NVLink2}]")


def _check_entry(where: str, e: Entry) -> None:
    """One published value; a single-GPU entry names its source and device, a set-up entry
    its servers."""
    if e.published is None and e.published_s is None:
        raise InputError(f"{where}.published", "is required (samples/s of the whole job), or "
                         "published_s (seconds per iteration)", "add the source's number")
    if e.published is not None and e.published_s is not None:
        raise InputError(f"{where}.published_s", "give published or published_s, not both",
                         "keep the one the source states")
    if e.setup is None:
        for key in ("source", "device"):
            if getattr(e, key) is None:
                raise InputError(f"{where}.{key}", "is required for a single-GPU entry "
                                 "(one without setup)", "add it")
    elif e.servers is None:
        raise InputError(f"{where}.servers", "is required with a setup", "add servers: N")


def load_published(path: str | Path, field: str = "--published") -> PublishedFile:
    """Read and check a published-check file; any problem is one InputError naming the key."""
    return load_named_file(path, field, PublishedFile, "entries", "'sources:' and 'entries:'")
