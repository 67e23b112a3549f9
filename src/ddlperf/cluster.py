"""The cluster: servers (groups of identical multi-GPU nodes, or one-GPU workers), racks,
parameter-server nodes, links.

Two ways to list the workers, one per file:

* ``workers:`` groups of one-GPU hosts, each with its own NIC on one non-blocking switch
  (named ``w0, w1, …``);
* ``nodes:`` groups of identical servers with ``gpus`` workers each (named ``node0/gpu3``),
  which share the server's ``nics`` NICs and talk to each other over an intra-node fabric
  (:mod:`ddlperf.fabrics`). A server with one GPU has no fabric and is exactly a worker host.

``racks:`` puts the worker servers, in order, into racks of ``servers`` behind a top-of-rack
switch whose uplink (to the core switch) may be oversubscribed. Dedicated PS hosts sit on the
core switch, outside every rack.

Rates are line rates in bits/s; ``goodput`` (default 0.956 = 1448/1514 payload bytes per
Ethernet frame under TCP) turns NIC and rack rates into the payload bytes/s every model uses
(fabric rates are data rates already). Human units (``10Gbps``, ``50us``, ``25GbE``,
``NVLink2``) are accepted here and converted at once.

``transport`` says how the framework moves tensors between processes (:mod:`ddlperf.transport`):
a per-connection payload cap (TensorFlow 1.x's gRPC: ``grpc-tf1``) and a per-message cost.
None (the default) is plain TCP: no cap, the links decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ddlperf.errors import InputError
from ddlperf.fabrics import parse_intra
from ddlperf.hardware import Device, device_from_spec, parse_link_rate
from ddlperf.schema import read_structured, validate
from ddlperf.transport import Transport, parse_transport
from ddlperf.units import parse_duration

TCP_ETHERNET_GOODPUT = 1448 / 1514  # 0.956: payload per full-size frame (TCP/IP + Ethernet)


@lru_cache(maxsize=256)
def _catalog_device(spec: str) -> Device:
    return device_from_spec(spec, "device")


def _rate(value: Any, info: Any) -> Any:
    return None if value is None else parse_link_rate(value, info.field_name)


class _Hosts(BaseModel):
    """What worker groups and server groups share: compute per GPU and NIC rates."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    device: str | dict[str, Any] | None = Field(
        default=None, description="catalog name or inline spec; default: the workload's device"
    )
    speed: float = Field(default=1.0, gt=0, allow_inf_nan=False, description="relative speed")
    batch_size: int | None = Field(default=None, gt=0)
    bandwidth: float | None = Field(default=None, description="bits/s, both directions")
    uplink: float | None = Field(default=None, description="bits/s, sending")
    downlink: float | None = Field(default=None, description="bits/s, receiving")
    cpu_cap: float | None = Field(
        default=None, gt=0, allow_inf_nan=False,
        description="cores one worker's processes may use (a CPU quota); None: uncapped")
    comm_cpu_s_per_byte: float | None = Field(
        default=None, ge=0, allow_inf_nan=False,
        description="host CPU seconds per byte a worker sends or receives over its NIC; "
                    "charged only under cpu_cap (ddlperf.host_cpu)")

    _parse_rates = field_validator("bandwidth", "uplink", "downlink", mode="before")(_rate)

    @property
    def comm_cpu_wall_s_per_byte(self) -> float:
        """Wall seconds per byte sent or received that the cap costs the worker's compute
        (0 when uncapped: its communication CPU runs on other cores)."""
        if self.cpu_cap is None or not self.comm_cpu_s_per_byte:
            return 0.0
        return self.comm_cpu_s_per_byte / self.cpu_cap

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


class WorkerGroup(_Hosts):
    """``count`` identical one-GPU hosts. Missing link rates default to the cluster's bandwidth."""

    name: str = Field(default="w", min_length=1)
    count: int = Field(default=1, gt=0)


class NodeGroup(_Hosts):
    """``count`` identical servers of ``gpus`` workers each, sharing ``nics`` NICs.

    ``bandwidth``/``uplink``/``downlink`` are per NIC; ``intra`` is the fabric between a GPU and
    the rest of its server, per GPU and direction (a catalog name or a rate). ``device``,
    ``speed`` and ``batch_size`` describe each GPU.
    """

    name: str = Field(default="node", min_length=1)
    count: int = Field(default=1, gt=0, description="servers")
    gpus: int = Field(default=1, gt=0, description="workers per server")
    intra: float | None = Field(default=None, description="bits/s per GPU and direction")
    nics: int = Field(default=1, gt=0, description="NICs per server")
    intra_cpu_s_per_byte: float | None = Field(
        default=None, ge=0, allow_inf_nan=False,
        description="host CPU seconds per byte a GPU sends or receives over the fabric (TCP "
                    "over a host's loopback; none for NVLink or PCIe peer copies); charged "
                    "only under cpu_cap (ddlperf.host_cpu)")

    @property
    def intra_cpu_wall_s_per_byte(self) -> float:
        """Wall seconds per fabric byte that the cap costs a GPU's compute (0 uncapped)."""
        if self.cpu_cap is None or not self.intra_cpu_s_per_byte:
            return 0.0
        return self.intra_cpu_s_per_byte / self.cpu_cap

    @field_validator("intra", mode="before")
    @classmethod
    def _intra(cls, value: Any) -> Any:
        return None if value is None else parse_intra(value, "intra")

    @model_validator(mode="after")
    def _fabric_given(self) -> NodeGroup:
        if self.gpus > 1 and self.intra is None:
            raise InputError(
                "intra", f"servers with {self.gpus} GPUs need an intra-node fabric",
                "add intra: NVLink2 (or --intra; 'ddlperf fabrics' lists them) or a rate "
                "such as 150GB/s",
            )
        return self


class Racks(BaseModel):
    """Worker servers, in order, in racks of ``servers`` behind a top-of-rack uplink."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    servers: int = Field(gt=0, description="servers per rack")
    uplink: float = Field(description="bits/s, rack → core switch")
    downlink: float | None = Field(default=None, description="bits/s, core → rack; default uplink")

    _parse_rates = field_validator("uplink", "downlink", mode="before")(_rate)

    @property
    def down(self) -> float:
        return self.downlink or self.uplink


@dataclass(frozen=True)
class ServerGroup:
    """One view of either kind of group: ``count`` servers × ``gpus`` workers (rates bits/s).

    ``intra`` is None for one-GPU servers (no fabric at all); ``up``/``down`` are per NIC.
    """

    name: str
    count: int
    gpus: int
    intra: float | None
    nics: int
    up: float
    down: float
    source: WorkerGroup | NodeGroup

    @property
    def workers(self) -> int:
        return self.count * self.gpus


class PSGroup(BaseModel):
    """``count`` parameter-server shards; ``colocated`` puts shard k on worker server k."""

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
    """Workers or servers (possibly mixed), racks, PS shards, per-message latency and goodput."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workers: tuple[WorkerGroup, ...] = ()
    nodes: tuple[NodeGroup, ...] = ()
    racks: Racks | None = None
    ps: PSGroup = PSGroup(count=0)
    bandwidth: float = Field(default=10e9, description="default line rate of every NIC, bits/s")
    latency: float = Field(default=50e-6, ge=0, description="seconds per message (alpha)")
    goodput: float = Field(default=TCP_ETHERNET_GOODPUT, gt=0, le=1)
    transport: Transport | None = Field(
        default=None, description="per-connection cap and message cost; None: TCP, no cap")

    @field_validator("bandwidth", mode="before")
    @classmethod
    def _bandwidth(cls, value: Any) -> Any:
        return parse_link_rate(value, "bandwidth")

    @field_validator("latency", mode="before")
    @classmethod
    def _latency(cls, value: Any) -> Any:
        return parse_duration(value, "latency")

    @field_validator("transport", mode="before")
    @classmethod
    def _transport(cls, value: Any) -> Any:
        return None if value is None else parse_transport(value, "transport")

    @model_validator(mode="after")
    def _possible(self) -> Cluster:
        if self.workers and self.nodes:
            raise InputError("nodes", "a cluster lists either workers or nodes, not both",
                             "write one-GPU hosts as nodes with gpus: 1, or drop one section")
        if not self.workers and not self.nodes:
            raise InputError("workers", "the cluster has no workers",
                             "add workers: N or a nodes: section")
        if self.ps.placement == "colocated" and self.ps.count > self.server_count:
            raise InputError(
                "ps.placement",
                f"{self.ps.count} colocated PS shards need at least as many worker servers "
                f"(have {self.server_count})", "use dedicated placement or fewer shards",
            )
        return self

    def servers(self) -> tuple[ServerGroup, ...]:
        """Every group as servers × GPUs (``workers:`` groups: one GPU, no fabric)."""
        return self._servers

    @cached_property
    def _servers(self) -> tuple[ServerGroup, ...]:
        if self.workers:
            return tuple(
                ServerGroup(g.name, g.count, 1, None, 1, self.worker_up(g), self.worker_down(g),
                            g)
                for g in self.workers
            )
        return tuple(
            ServerGroup(g.name, g.count, g.gpus, g.intra if g.gpus > 1 else None, g.nics,
                        self.worker_up(g), self.worker_down(g), g)
            for g in self.nodes
        )

    @property
    def worker_count(self) -> int:
        return sum(g.workers for g in self.servers())

    @property
    def server_count(self) -> int:
        return sum(g.count for g in self.servers())

    @property
    def multi_gpu(self) -> bool:
        """Some server holds more than one GPU (an intra-node fabric is in play)."""
        return any(g.gpus > 1 for g in self.servers())

    @property
    def heterogeneous(self) -> bool:
        groups = self.servers()
        first = groups[0]

        def key(g: ServerGroup) -> tuple[Any, ...]:
            s = g.source
            return (s.device, s.speed, s.batch_size, g.up, g.down, g.gpus, g.intra, g.nics,
                    s.comm_cpu_wall_s_per_byte, getattr(s, "intra_cpu_wall_s_per_byte", 0.0))

        return any(key(g) != key(first) for g in groups[1:])

    def worker_up(self, group: WorkerGroup | NodeGroup) -> float:
        """One NIC's sending line rate (bits/s)."""
        return group.uplink or group.bandwidth or self.bandwidth

    def worker_down(self, group: WorkerGroup | NodeGroup) -> float:
        """One NIC's receiving line rate (bits/s)."""
        return group.downlink or group.bandwidth or self.bandwidth

    def ps_up(self) -> float:
        return self.ps.uplink or self.ps.bandwidth or self.bandwidth

    def ps_down(self) -> float:
        return self.ps.downlink or self.ps.bandwidth or self.bandwidth

    def to_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude_none=True)
        if self.transport is not None:
            data["transport"] = self.transport.spec()
        for key in ("workers", "nodes"):
            if not data[key]:
                del data[key]
        return data

    @classmethod
    def from_dict(cls, data: Any, field: str = "cluster") -> Cluster:
        if not isinstance(data, dict):
            raise InputError(field, "must be a mapping with 'workers' or 'nodes' (and "
                             "optionally 'racks', 'ps')")
        data = dict(data)
        for key in ("workers", "nodes"):
            groups = data.get(key)
            if isinstance(groups, dict):  # a single group written as a mapping
                data[key] = [groups]
            elif isinstance(groups, int) and not isinstance(groups, bool):
                data[key] = [{"count": groups}]
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
