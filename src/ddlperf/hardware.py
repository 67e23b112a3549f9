"""Device catalog (bundled JSON) and the roofline that turns FLOPs and bytes into seconds.

Why a roofline: a layer is either compute bound (FLOPs / peak) or memory bound
(bytes moved / memory bandwidth); the slower of the two, divided by an achievable-efficiency
factor, is a good first estimate when nothing was measured on the target device.
"""

from __future__ import annotations

import difflib
import json
import re
from functools import cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ddlperf.errors import InputError
from ddlperf.units import parse_bandwidth

DTYPE_ALIASES = {
    "float32": "fp32", "fp32": "fp32", "tf32": "tf32", "float16": "fp16", "fp16": "fp16",
    "half": "fp16", "bfloat16": "bf16", "bf16": "bf16",
}


class Device(BaseModel):
    """A compute device: peak FLOP/s per dtype, memory bandwidth (bytes/s), efficiency."""

    model_config = ConfigDict(frozen=True)

    name: str
    peak_flops: dict[str, float]
    memory_bandwidth: float = Field(gt=0, description="bytes/s")
    efficiency: float = Field(default=0.5, gt=0, le=1)
    description: str = ""
    source: str = "given inline"

    def peak(self, dtype: str = "fp32") -> float:
        """Peak FLOP/s for ``dtype``; falls back to fp32 where a dtype has no faster path."""
        key = DTYPE_ALIASES.get(dtype.lower())
        if key is None:
            raise InputError("dtype", f"unknown dtype {dtype!r}", "use fp32, tf32, fp16 or bf16")
        return self.peak_flops.get(key, self.peak_flops["fp32"])

    def layer_seconds(self, flops: float, memory_bytes: float, dtype: str = "fp32") -> float:
        """Roofline time of one kernel-sized piece of work on this device."""
        compute = flops / self.peak(dtype)
        memory = memory_bytes / self.memory_bandwidth
        return max(compute, memory) / self.efficiency


@cache
def _catalog_data() -> dict[str, Any]:
    text = resources.files("ddlperf").joinpath("data/devices.json").read_text(encoding="utf-8")
    return json.loads(text)


@cache
def catalog() -> dict[str, Device]:
    """All bundled devices by name."""
    return {
        name: Device(name=name, **spec) for name, spec in _catalog_data()["devices"].items()
    }


def suggest(name: str, options: list[str] | tuple[str, ...]) -> str:
    """'did you mean …' text for an unknown name."""
    lowered = {o.lower(): o for o in options}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.4)
    if close:
        return "did you mean " + " or ".join(repr(lowered[c]) for c in close) + "?"
    return "known: " + ", ".join(options)


_INLINE_RE = re.compile(r"^\s*([A-Za-z_]+)\s*=\s*([^,]+?)\s*$")
_FLOPS_RE = re.compile(
    r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kMGTP]?)(?:FLOPS|FLOP/s|flops)?\s*$"
)


def parse_flops_rate(text: str | float, field: str) -> float:
    """``125TFLOPS`` / ``125T`` / ``1.25e14`` → FLOP/s."""
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        match = _FLOPS_RE.match(text)
        if not match:
            raise InputError(field, f"cannot read {text!r}", "write it like 125TFLOPS or 1.25e14")
        scale = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}[match.group(2)]
        value = float(match.group(1)) * scale
    if not value > 0:
        raise InputError(field, "peak FLOP/s must be > 0")
    return value


def device_from_spec(spec: str | dict[str, Any], field: str = "device") -> Device:
    """A catalog name (``V100``), or inline ``name=X,peak=50TFLOPS,bw=900GB/s[,eff=0.5]``."""
    if isinstance(spec, dict):
        return _inline_device(spec, field)
    if "=" in spec:
        parts: dict[str, str] = {}
        for chunk in spec.split(","):
            match = _INLINE_RE.match(chunk)
            if not match:
                raise InputError(field, f"cannot read {chunk!r}",
                                 "use key=value pairs, e.g. peak=50TFLOPS,bw=900GB/s")
            parts[match.group(1).lower()] = match.group(2)
        return _inline_device(parts, field)
    devices = catalog()
    for name, device in devices.items():
        if name.lower() == spec.strip().lower():
            return device
    raise InputError(field, f"unknown device {spec!r}", suggest(spec, list(devices)))


def _inline_device(spec: dict[str, Any], field: str) -> Device:
    known = {"name", "peak", "peak_flops", "bw", "memory_bandwidth", "eff", "efficiency"}
    unknown = set(spec) - known
    if unknown:
        raise InputError(f"{field}.{sorted(unknown)[0]}", "is not a device field",
                         f"use {sorted(known)}")
    peak = spec.get("peak", spec.get("peak_flops"))
    bw = spec.get("bw", spec.get("memory_bandwidth"))
    if peak is None or bw is None:
        raise InputError(field, "an inline device needs peak and bw",
                         "e.g. name=X,peak=50TFLOPS,bw=900GB/s")
    if isinstance(peak, dict):
        peaks = {DTYPE_ALIASES.get(k, k): parse_flops_rate(v, f"{field}.peak.{k}")
                 for k, v in peak.items()}
        if "fp32" not in peaks:
            raise InputError(f"{field}.peak", "needs an fp32 entry")
    else:
        peaks = {"fp32": parse_flops_rate(peak, f"{field}.peak")}
    eff = float(spec.get("eff", spec.get("efficiency", 0.5)))
    if not 0 < eff <= 1:
        raise InputError(f"{field}.efficiency", f"must be in (0, 1], got {eff}")
    # memory bandwidth is given like network bandwidth (900GB/s); store bytes/s
    bytes_per_s = parse_bandwidth(bw, f"{field}.bw") / 8.0
    return Device(
        name=str(spec.get("name", "custom")), peak_flops=peaks, memory_bandwidth=bytes_per_s,
        efficiency=eff,
    )


# Common NIC line rates (bits/s). Accepted wherever a bandwidth is.
NIC_PRESETS: dict[str, float] = {
    "1GbE": 1e9,
    "10GbE": 10e9,
    "25GbE": 25e9,
    "40GbE": 40e9,
    "100GbE": 100e9,
    "200GbE": 200e9,
    "400GbE": 400e9,
    "IB-EDR": 100e9,
    "IB-HDR": 200e9,
    "IB-NDR": 400e9,
}


def parse_link_rate(text: str | float, field: str = "bandwidth") -> float:
    """A bandwidth like ``10Gbps`` or a NIC preset name like ``25GbE`` → bits/s."""
    if isinstance(text, str):
        for name, rate in NIC_PRESETS.items():
            if name.lower() == text.strip().lower():
                return rate
    return parse_bandwidth(text, field)
