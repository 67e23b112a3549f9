"""Price tables for ``ddlperf plan``: what each kind of server costs per hour.

A table lists ``instances`` (servers of identical GPUs: device, GPUs, intra-node fabric, NICs
and their line rate) and ``ps_hosts`` (CPU servers for parameter-server shards), each with its
price per hour and where that price comes from (``source``, ``date``). The bundled
``prices_example.yaml`` is an example with dated public list prices, marked ``example: true``:
plans made with it say so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ddlperf.cluster import _rate as line_rate
from ddlperf.errors import InputError
from ddlperf.fabrics import parse_intra
from ddlperf.hardware import device_from_spec
from ddlperf.schema import read_structured, validate

EXAMPLE = Path(__file__).resolve().parent.parent / "data" / "prices_example.yaml"
FORMAT = "ddlperf.prices/1"


class _Priced(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    bandwidth: float = Field(description="line rate of each NIC, bits/s")
    price_per_hour: float = Field(gt=0, allow_inf_nan=False)
    source: str = Field(min_length=1, description="where the price was read")
    date: str = Field(min_length=4, description="the date the source gives for it")

    _parse_rate = field_validator("bandwidth", mode="before")(line_rate)

    @field_validator("date", mode="before")
    @classmethod
    def _date(cls, value: Any) -> Any:
        return str(value)


class Instance(_Priced):
    """A server of ``gpus`` identical GPUs (``device`` from the catalog)."""

    device: str = Field(min_length=1)
    gpus: int = Field(default=1, gt=0)
    intra: float | None = Field(default=None, description="fabric per GPU, bits/s")
    nics: int = Field(default=1, gt=0)

    @field_validator("intra", mode="before")
    @classmethod
    def _intra(cls, value: Any) -> Any:
        return None if value is None else parse_intra(value, "intra")

    @field_validator("device")
    @classmethod
    def _known(cls, value: str) -> str:
        device_from_spec(value, "device")
        return value

    @model_validator(mode="after")
    def _fabric(self) -> Instance:
        if self.gpus > 1 and self.intra is None:
            raise InputError(f"instance {self.name}", f"has {self.gpus} GPUs but no intra "
                             "fabric", "add intra: NVLink2 (see 'ddlperf fabrics') or a rate")
        return self


class PSHost(_Priced):
    """A CPU server that runs one parameter-server shard."""


class PriceTable(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format: str = FORMAT
    example: bool = False
    currency: str = "USD"
    note: str | None = None
    instances: tuple[Instance, ...] = Field(min_length=1)
    ps_hosts: tuple[PSHost, ...] = ()

    @model_validator(mode="after")
    def _unique(self) -> PriceTable:
        names = [i.name for i in (*self.instances, *self.ps_hosts)]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InputError("prices", f"{twice[0]!r} is listed twice", "give each a new name")
        return self

    def ps_host_for(self, bandwidth: float) -> PSHost | None:
        """The cheapest PS host whose NIC is at least ``bandwidth`` (bits/s)."""
        fast = [h for h in self.ps_hosts if h.bandwidth >= bandwidth * (1 - 1e-9)]
        return min(fast, key=lambda h: h.price_per_hour, default=None)


def load_prices(path: str | Path | None = None, field: str = "--prices") -> PriceTable:
    """The table in ``path`` (YAML or JSON), or the bundled example."""
    data = read_structured(str(path or EXAMPLE), field)
    if not isinstance(data, dict):
        raise InputError(field, "a price table is a mapping with 'instances'",
                         f"see {EXAMPLE.name} in the package data for an example")
    if data.get("format", FORMAT) != FORMAT:
        raise InputError(field, f"unknown format {data.get('format')!r}", f"use {FORMAT}")
    return validate(PriceTable, data, prefix=str(path) if path else EXAMPLE.name)
