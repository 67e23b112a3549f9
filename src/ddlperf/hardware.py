"""Device catalog (bundled JSON): datasheet figures per device, efficiencies per architecture.

A device holds what its datasheet says (peak FLOP/s per dtype, memory bandwidth and capacity,
SM count) plus two measured constants (achievable share of the memory bandwidth, fixed cost
per kernel). An architecture holds the achievable share of the math peak that cuDNN/cuBLAS
kernels reach on it, calibrated from public figures (``data/calibration.json``). The kernel
model that uses them is :mod:`ddlperf.compute`; :meth:`Device.layer_seconds` is the plain
roofline kept for inline devices and FLOP-only estimates.
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


class PathEfficiency(BaseModel):
    """Achievable share of one math path's peak for large dense convolutions and GEMMs."""

    model_config = ConfigDict(frozen=True)

    dense: float = Field(gt=0, le=1)
    winograd: float = Field(default=1.0, ge=1, description="3×3 stride-1 convolution gain")
    grouped: float = Field(default=1.0, gt=0, le=1, description=(
        "share of ``dense`` that grouped convolutions reach: cuDNN runs them as many small "
        "GEMMs of a few channels per group"))


class Architecture(BaseModel):
    """Kernel efficiencies shared by every device of one GPU generation."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    simt: PathEfficiency
    tensor: PathEfficiency | None = None
    tensor_tf32: PathEfficiency | None = Field(
        default=None, description="TF32 on tensor cores, where it differs from FP16/BF16")

    def path(self, tensor_cores: bool, dtype: str = "fp16") -> PathEfficiency:
        """The efficiencies of the math path a kernel of ``dtype`` runs on."""
        if not tensor_cores or self.tensor is None:
            return self.simt
        if dtype == "tf32" and self.tensor_tf32 is not None:
            return self.tensor_tf32
        return self.tensor


class Device(BaseModel):
    """A compute device: peak FLOP/s per dtype, memory bandwidth (bytes/s), efficiency."""

    model_config = ConfigDict(frozen=True)

    name: str
    peak_flops: dict[str, float]
    memory_bandwidth: float = Field(gt=0, description="bytes/s")
    efficiency: float = Field(default=0.5, gt=0, le=1)
    description: str = ""
    source: str = "given inline"
    architecture: str | None = None
    sms: int | None = Field(default=None, gt=0, description="streaming multiprocessors")
    memory_bytes: float | None = Field(default=None, gt=0, description="device memory, bytes")
    bandwidth_efficiency: float | None = Field(default=None, gt=0, le=1)
    kernel_overhead_s: float = Field(default=0.0, ge=0, description="fixed seconds per kernel")
    tensor_dtypes: tuple[str, ...] = ()

    @property
    def achievable_bandwidth_share(self) -> float:
        """Share of ``memory_bandwidth`` streaming kernels reach (measured, else efficiency)."""
        return self.bandwidth_efficiency or self.efficiency

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
        name: Device(name=name, **{k: v for k, v in spec.items() if k != "sources"})
        for name, spec in _catalog_data()["devices"].items()
    }


@cache
def architectures() -> dict[str, Architecture]:
    """Kernel efficiencies per GPU architecture (calibrated, see data/calibration.json)."""
    return {
        name: Architecture(name=name, **{k: v for k, v in spec.items() if k != "fitted"})
        for name, spec in _catalog_data()["architectures"].items()
    }


def architecture(name: str) -> Architecture:
    return architectures()[name]


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
