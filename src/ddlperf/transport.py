"""How a framework moves tensors between processes (bundled catalog): per-connection and
per-receiving-process caps.

A link says how fast bytes can cross the wire; the transport says how fast the software on
either end can hand them over. TensorFlow 1.x's gRPC copied and (de)serialised every tensor on
one thread per connection, so one connection moved 100–800 MB/s whatever the link
(docs/transport.md). ddlperf models that as a cap on each connection's payload rate: a stream's
rate is the smaller of its fair share of the links it crosses and the cap. Which transfers are
connections: a PS connection is a (worker process, shard) pair per direction — every GPU's own
without local aggregation, one per server with it — inside servers too; a ring edge where it
leaves its server. ``receive_bps`` caps what one process takes in over all its connections
together: TensorFlow 1.x parsed every tensor a process received on one thread (its
``GrpcWorkerCache`` polling thread; docs/transport.md) — a shard's process for pushes, a worker's
(a server's, with local aggregation) for pulls. ``message_s`` is a per-message software cost,
added to the cluster's latency.

Spellings (YAML ``transport:`` or ``--transport``): a catalog name (``grpc-tf1``), a cap alone
(``200MB/s``), or a mapping ``{name: grpc-tf1, cap: 300MB/s, receive: 1GB/s, message: 20us}`` (a
name from the catalog with fields overridden, or a name of your own with its fields). Caps are
bits/s like every rate, payload already (no goodput factor).
"""

from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ddlperf.errors import InputError
from ddlperf.units import (
    format_bandwidth,
    format_duration,
    format_size,
    parse_bandwidth,
    parse_duration,
)

DEFAULT_TRANSPORT = "tcp"
CUSTOM_NAME = "custom"


class Transport(BaseModel):
    """A transport: its name, per-connection payload cap (bits/s, None: no cap), per-receiving-
    process payload cap (bits/s, None: none), per-message cost (seconds) and, for catalog
    entries, what it is and where the figures come from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    cap_bps: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    receive_bps: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    message_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    description: str = ""
    source: str = ""
    date: str = ""

    @property
    def cap_bytes_per_s(self) -> float:
        """Payload bytes/s one connection may carry (``math.inf``: no cap)."""
        return math.inf if self.cap_bps is None else self.cap_bps / 8.0

    @property
    def receive_bytes_per_s(self) -> float:
        """Payload bytes/s one process may take in over all its connections (``math.inf``)."""
        return math.inf if self.receive_bps is None else self.receive_bps / 8.0

    def spec(self) -> dict[str, Any]:
        """The compact form written into predictions' inputs (base units; reads back)."""
        out: dict[str, Any] = {"name": self.name}
        base = transport_catalog().get(self.name)  # a cap the catalog entry has, removed: None
        if self.cap_bps is not None or (base is not None and base.cap_bps is not None):
            out["cap"] = self.cap_bps
        if self.receive_bps is not None or (base is not None and base.receive_bps is not None):
            out["receive"] = self.receive_bps
        if self.message_s:
            out["message"] = self.message_s
        return out

    def summary(self) -> str:
        """``grpc-tf1: each connection ≤ 200MB/s, each receiving process ≤ 900MB/s`` (what the
        notes and set-up texts say)."""
        parts = []
        if self.cap_bps is not None:
            parts.append(f"each connection ≤ {format_size(self.cap_bps / 8)}/s")
        if self.receive_bps is not None:
            parts.append(f"each receiving process ≤ {format_size(self.receive_bps / 8)}/s")
        if self.message_s:
            parts.append(f"+{format_duration(self.message_s)} per message")
        return f"{self.name}: " + (", ".join(parts) if parts else "no per-connection limit")


@cache
def _catalog_data() -> dict[str, Any]:
    text = resources.files("ddlperf").joinpath("data/transports.json").read_text(
        encoding="utf-8")
    return json.loads(text)


@cache
def transport_catalog() -> dict[str, Transport]:
    """Every bundled transport by name."""
    return {name: Transport(name=name, **spec)
            for name, spec in _catalog_data()["transports"].items()}


def transport_notes() -> str:
    """What the catalog figures mean (shown under ``ddlperf transports``)."""
    return str(_catalog_data()["notes"])


def _catalog_entry(name: str, field: str) -> Transport:
    for known, transport in transport_catalog().items():
        if known.lower() == name.strip().lower():
            return transport
    from ddlperf.hardware import suggest

    raise InputError(field, f"unknown transport {name!r}",
                     f"{suggest(name, list(transport_catalog()))} (or a per-connection cap "
                     "such as 200MB/s; see 'ddlperf transports')")


def _cap(value: Any, field: str, what: str = "per-connection cap") -> float:
    """A per-connection (or per-process) cap → bits/s (> 0: a negative or zero one says so)."""
    negative = (value <= 0 if isinstance(value, (int, float)) and not isinstance(value, bool)
                else str(value).strip().startswith("-"))
    if not negative:
        try:
            return parse_bandwidth(value, field)
        except InputError as exc:
            problem = exc.problem
    else:
        problem = f"got {value!r}"
    raise InputError(field, f"the {what} must be a positive rate: {problem}",
                     "give a payload rate such as 200MB/s or 1.6Gbps")


def parse_transport(value: Any, field: str = "transport") -> Transport:
    """A catalog name, a cap (``200MB/s``) or a mapping (see the module docstring)."""
    if isinstance(value, Transport):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text and (text[0].isdigit() or text[0] in "-+."):
            return Transport(name=CUSTOM_NAME, cap_bps=_cap(text, field))
        return _catalog_entry(text, field)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Transport(name=CUSTOM_NAME, cap_bps=_cap(value, field))
    if not isinstance(value, dict):
        raise InputError(field, f"cannot read transport {value!r}",
                         "give a name ('ddlperf transports'), a cap such as 200MB/s, or "
                         "{name: ..., cap: ..., message: ...}")
    unknown = sorted(set(value) - {"name", "cap", "receive", "message"})
    if unknown:
        raise InputError(field, f"{unknown[0]!r} is not a transport field",
                         "use name, cap (e.g. 200MB/s), receive (e.g. 900MB/s) and message "
                         "(e.g. 20us)")
    name = value.get("name")
    if name is not None and not isinstance(name, str):
        raise InputError(f"{field}.name", f"must be text, got {name!r}")
    base = None
    if name is not None and name.strip().lower() in {n.lower() for n in transport_catalog()}:
        base = _catalog_entry(name, f"{field}.name")
    elif not {"cap", "receive", "message"} & set(value):
        base = _catalog_entry(str(name), f"{field}.name")  # an unknown name alone
    fields: dict[str, Any] = {} if base is None else base.model_dump()
    fields["name"] = (name or CUSTOM_NAME).strip() if base is None else base.name
    if "cap" in value:
        fields["cap_bps"] = None if value["cap"] is None else _cap(value["cap"], f"{field}.cap")
    if "receive" in value:
        fields["receive_bps"] = (None if value["receive"] is None else
                                 _cap(value["receive"], f"{field}.receive",
                                      "per-process receive cap"))
    if "message" in value:
        fields["message_s"] = parse_duration(value["message"], f"{field}.message")
    transport = Transport(**fields)
    if base is not None and ((transport.cap_bps, transport.receive_bps, transport.message_s)
                             != (base.cap_bps, base.receive_bps, base.message_s)):
        transport = transport.model_copy(update={"source": f"{base.name}, overridden"})
    return transport


def describe_cap(transport: Transport) -> str:
    """``1.6Gbps (200MB/s)`` or ``none``."""
    if transport.cap_bps is None:
        return "none"
    return f"{format_size(transport.cap_bps / 8)}/s ({format_bandwidth(transport.cap_bps)})"
