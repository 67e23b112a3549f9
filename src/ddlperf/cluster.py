"""The cluster: heterogeneous worker groups, parameter-server nodes, links.

Rates are line rates in bits/s; ``goodput`` (default 0.956 = 1448/1514 payload bytes per
Ethernet frame under TCP) turns them into the payload bytes/s every model uses.
Human units (``10Gbps``, ``50us``, ``25GbE``) are accepted here and converted at once.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ddlperf.errors import InputError
from ddlperf.hardware import Device, device_from_spec, parse_link_rate
from ddlperf.schema import read_structured, validate
from ddlperf.units import parse_duration

TCP_ETHERNET_GOODPUT = 1448 / 1514  # 0.956: payload per full-size frame (TCP/IP + Ethernet)


@lru_cache(maxsize=256)
def _catalog_device(spec: str) -> Device:
    return device_from_spec(spec, "device")


def _rate(value: Any, info: Any) -> Any:
    return None if value is None else parse_link_rate(value, info.field_name)


class WorkerGroup(BaseModel):
    """``count`` identical workers. Missing link rates default to the cluster's bandwidth."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(default="w", min_length=1)
    count: int = Field(default=1, gt=0)
    device: str | dict[str, Any] | None = Field(
        default=None, description="catalog name or inline spec; default: the workload's device"
    )
    speed: float = Field(default=1.0, gt=0, allow_inf_nan=False, description="relative speed")
    batch_size: int | None = Field(default=None, gt=0)
    bandwidth: float | None = Field(default=None, description="bits/s, both directions")
    uplink: float | None = Field(default=None, description="bits/s, sending")
    downlink: float | None = Field(default=None, description="bits/s, receiving")

    _parse_rates = field_validator("bandwidth", "uplink", "downlink", mode="before")(_rate)

    @field_validator("device", mode="after")
    @classmethod
    def _known_device(cls, value: Any) -> Any:
        if value is not None:
            device_from_spec(value, "device")  # raises InputError naming the fix
        return value

    def resolved_device(self) -> Device | None:
        if self.device is None:
            return None
        if isinstance(self.device, str):
            return _catalog_device(self.device)
        return device_from_spec(self.device, "device")


class PSGroup(BaseModel):
    """``count`` parameter-server shards; ``colocated`` puts shard k on worker k's host."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    count: int = Field(default=1, ge=0)
    placement: Literal["dedicated", "colocated"] = "dedicated"
    bandwidth: float | None = Field(default=None, description="bits/s, both directions")
    uplink: float | None = None
    downlink: float | None = None
    update_s_per_byte: float | None = Field(
        default=None, ge=0, description="PS optimizer seconds per byte; default: the workload's"
    )

    _parse_rates = field_validator("bandwidth", "uplink", "downlink", mode="before")(_rate)


class Cluster(BaseModel):
    """Workers (possibly mixed), optional PS shards, per-message latency and goodput."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workers: tuple[WorkerGroup, ...] = Field(min_length=1)
    ps: PSGroup = PSGroup(count=0)
    bandwidth: float = Field(default=10e9, description="default line rate of every NIC, bits/s")
    latency: float = Field(default=50e-6, ge=0, description="seconds per message (alpha)")
    goodput: float = Field(default=TCP_ETHERNET_GOODPUT, gt=0, le=1)

    @field_validator("bandwidth", mode="before")
    @classmethod
    def _bandwidth(cls, value: Any) -> Any:
        return parse_link_rate(value, "bandwidth")

    @field_validator("latency", mode="before")
    @classmethod
    def _latency(cls, value: Any) -> Any:
        return parse_duration(value, "latency")

    @model_validator(mode="after")
    def _possible(self) -> Cluster:
        if self.ps.placement == "colocated" and self.ps.count > self.worker_count:
            raise InputError(
                "ps.placement",
                f"{self.ps.count} colocated PS shards need at least as many workers "
                f"(have {self.worker_count})", "use dedicated placement or fewer shards",
            )
        return self

    @property
    def worker_count(self) -> int:
        return sum(group.count for group in self.workers)

    @property
    def heterogeneous(self) -> bool:
        first = self.workers[0]
        return any(
            (g.device, g.speed, g.batch_size, self.worker_up(g), self.worker_down(g))
            != (first.device, first.speed, first.batch_size, self.worker_up(first),
                self.worker_down(first))
            for g in self.workers[1:]
        )

    def worker_up(self, group: WorkerGroup) -> float:
        return group.uplink or group.bandwidth or self.bandwidth

    def worker_down(self, group: WorkerGroup) -> float:
        return group.downlink or group.bandwidth or self.bandwidth

    def ps_up(self) -> float:
        return self.ps.uplink or self.ps.bandwidth or self.bandwidth

    def ps_down(self) -> float:
        return self.ps.downlink or self.ps.bandwidth or self.bandwidth

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    @classmethod
    def from_dict(cls, data: Any, field: str = "cluster") -> Cluster:
        if not isinstance(data, dict):
            raise InputError(field, "must be a mapping with 'workers' (and optionally 'ps')")
        data = dict(data)
        workers = data.get("workers")
        if isinstance(workers, dict):  # a single group written as a mapping
            data["workers"] = [workers]
        elif isinstance(workers, int):
            data["workers"] = [{"count": workers}]
        ps = data.get("ps")
        if isinstance(ps, int):
            data["ps"] = {"count": ps}
        return validate(cls, data, prefix=field)


def load_cluster(path: str, field: str = "--config") -> Cluster:
    """Read a cluster YAML (or JSON) file."""
    data = read_structured(path, field)
    if isinstance(data, dict) and "cluster" in data:
        data = data["cluster"]
    return Cluster.from_dict(data, field=path)
