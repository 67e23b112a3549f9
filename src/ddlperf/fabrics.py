"""Intra-node fabrics (bundled catalog): how fast a GPU talks to the rest of its server.

A server's GPUs reach each other and the server's NICs over a fabric (PCIe, NVLink, NVSwitch,
or host shared memory for CPU ranks). ddlperf models it as one link per GPU and direction at
the catalog's rate: every byte a GPU sends or receives crosses its own link, so GPU-to-GPU
traffic is limited by the sender's and the receiver's links and traffic to the NIC by the
sender's link and the NIC. Rates are bits/s like every other rate; no goodput factor applies.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ddlperf.errors import InputError
from ddlperf.units import parse_bandwidth


class Fabric(BaseModel):
    """A catalog fabric: per-GPU rate per direction (bits/s) and where the figure comes from."""

    model_config = ConfigDict(frozen=True)

    name: str
    rate_bps: float = Field(gt=0)
    description: str
    source: str


@cache
def _catalog_data() -> dict[str, Any]:
    text = resources.files("ddlperf").joinpath("data/fabrics.json").read_text(encoding="utf-8")
    return json.loads(text)


@cache
def fabric_catalog() -> dict[str, Fabric]:
    """Every bundled fabric by name."""
    return {name: Fabric(name=name, **spec) for name, spec in _catalog_data()["fabrics"].items()}


def fabric_notes() -> str:
    """What the catalog figures mean (shown under ``ddlperf fabrics``)."""
    return str(_catalog_data()["notes"])


def parse_intra(value: Any, field: str = "intra") -> float:
    """A fabric name (``NVLink2``, case-insensitive) or a rate (``150GB/s``) → bits/s."""
    if isinstance(value, str):
        for name, fabric in fabric_catalog().items():
            if name.lower() == value.strip().lower():
                return fabric.rate_bps
        try:
            return parse_bandwidth(value, field)
        except InputError:
            if value.strip()[:1] in "+-.0123456789":  # a rate, out of range: say so
                raise
            from ddlperf.hardware import suggest

            raise InputError(
                field, f"unknown fabric {value!r}",
                f"{suggest(value, list(fabric_catalog()))} (or a rate such as 150GB/s; "
                "see 'ddlperf fabrics')",
            ) from None
    return parse_bandwidth(value, field)
