"""Kernel-level compute model: per operation class, per dtype and math mode, batch-aware.

Every layer's work is a list of kernel rows (from ``data/zoo.json`` or a profile):
``[pass, class, count, flops, bytes, fixed_bytes, out_elements]`` — pass ``f``/``b``; FLOPs,
bytes moved and output elements per sample; ``fixed_bytes`` per iteration (weights, weight
gradients). One kernel takes

    t = max(F / (peak · e_class · u), M / (BW · e_bw)) + count · t_kernel

- ``peak``: the device's peak for the math the kernel runs in (:func:`math_plan`);
- ``e_class``: the architecture's achievable share of that peak for large kernels (dense
  convolution and GEMM alike); 3×3 stride-1 convolutions in FP32 run Winograd kernels and get
  the architecture's Winograd gain on top (fewer multiplies than the FLOPs counted); grouped
  convolutions (ResNeXt) reach only a share of it (many small GEMMs of a few channels each);
- ``u``: wave utilisation. A GEMM-like kernel runs ``ceil(out / TILE)`` thread blocks of
  ``TILE`` output elements, one per SM at a time; the last wave is partly empty, and a
  kernel with fewer blocks than SMs leaves SMs idle. Kernels whose output does not grow with
  the batch (weight gradients) split their reduction over the batch and fill the device;
- memory-bound kernels (element-wise, normalisation, pooling, embedding) only move bytes:
  ``M / (BW · e_bw)``; normalisation reads its input twice (statistics, then normalise):
  forward traffic × 3/2, backward × 5/3;
- ``t_kernel``: fixed cost per kernel (launch, ramp-up and drain), per device.

Devices without an architecture (inline ``name=X,peak=…,bw=…,eff=…``) use their single
``efficiency`` for every class and for bandwidth, with no waves and no per-kernel cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ddlperf.errors import InputError
from ddlperf.hardware import DTYPE_ALIASES, Architecture, Device, architecture

MATH_MODES = ("default", "tf32", "ieee")
DTYPES = ("fp32", "tf32", "fp16", "bf16")
CLASSES = ("conv", "conv3x3", "conv_grouped", "conv_depthwise", "matmul", "norm",
           "elementwise", "embedding")
COMPUTE_CLASSES = CLASSES[:5]
CONV_CLASSES = CLASSES[:4]
CLASS_INDEX = {name: i for i, name in enumerate(CLASSES)}
ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}
TILE_ELEMENTS = 128 * 128  # output elements per thread block (CUTLASS/cuBLAS 128×128 tiles)
NORM_TRAFFIC = {"f": 1.5, "b": 5.0 / 3.0}  # two passes over the input: statistics, normalise


def dtype_key(dtype: str, field: str = "--dtype") -> str:
    """``float16`` → ``fp16``; an unknown dtype is an InputError."""
    key = DTYPE_ALIASES.get(str(dtype).lower())
    if key is None:
        raise InputError(field, f"unknown dtype {dtype!r}", "use fp32, tf32, fp16 or bf16")
    return key


def math_key(math_mode: str | None) -> str:
    mode = "default" if math_mode is None else str(math_mode).lower()
    if mode not in MATH_MODES:
        raise InputError("--math", f"unknown math mode {math_mode!r}",
                         "use default (PyTorch: TF32 convolutions, FP32 matmuls), tf32 or ieee")
    return mode


def _require_peak(device: Device, key: str, field: str, what: str) -> None:
    if key not in device.peak_flops:
        have = ", ".join(k for k in DTYPES if k in device.peak_flops)
        raise InputError(field, f"{device.name} has no {key} peak in the catalog ({what})",
                         f"use one of: {have}")


def math_plan(device: Device, dtype: str = "fp32", math_mode: str | None = None) -> dict[str, str]:
    """The peak (dtype key) each compute class runs at.

    ``fp32`` with ``default`` math follows PyTorch ≥ 1.12: convolutions in TF32 where the
    device has TF32 (``torch.backends.cudnn.allow_tf32`` is True by default), matmuls in
    IEEE FP32 (``torch.backends.cuda.matmul.allow_tf32`` is False). ``tf32`` math (or
    ``--dtype tf32``): both in TF32. ``ieee``: both in FP32. ``fp16``/``bf16``: both at that
    dtype (mixed precision); ``--math`` applies only to fp32 compute.
    """
    key = dtype_key(dtype)
    mode = math_key(math_mode)
    if key in ("fp16", "bf16", "tf32"):
        if mode != "default" and not (key == "tf32" and mode == "tf32"):
            raise InputError("--math", f"applies to fp32 compute only, not --dtype {key}",
                             "drop --math or use --dtype fp32")
        _require_peak(device, key, "--dtype", "mixed precision needs it")
        return dict.fromkeys(COMPUTE_CLASSES, key)
    if mode == "tf32":
        _require_peak(device, "tf32", "--math", "TF32 needs Ampere or later")
        return dict.fromkeys(COMPUTE_CLASSES, "tf32")
    conv = "tf32" if mode == "default" and "tf32" in device.peak_flops else "fp32"
    return {**dict.fromkeys(CONV_CLASSES, conv), "matmul": "fp32"}


@dataclass(frozen=True)
class DeviceRates:
    """Per-class achievable FLOP/s and the device constants the kernel formula needs."""

    flops: np.ndarray  # (classes,) achievable FLOP/s at full waves; inf for memory classes
    bandwidth: float  # achievable bytes/s
    slots: int  # concurrent thread blocks (0: no wave model)
    kernel_s: float
    element_scale: float  # bytes relative to float32


def rates(device: Device, dtype: str = "fp32", math_mode: str | None = None,
          arch: Architecture | None = None) -> DeviceRates:
    """What one device does per second for each class at ``dtype`` / ``math_mode``.

    ``arch`` replaces the catalog's efficiencies (the calibration tool fits them this way).
    """
    plan = math_plan(device, dtype, math_mode)
    if arch is None and device.architecture:
        arch = architecture(device.architecture)
    flops = np.full(len(CLASSES), np.inf)
    for cls, key in plan.items():
        peak = device.peak_flops.get(key, device.peak_flops["fp32"])
        if arch is None:
            eff = device.efficiency
        else:
            path = arch.path(key in device.tensor_dtypes, key)
            eff = path.dense * (path.winograd if cls == "conv3x3" else 1.0)
            eff *= path.grouped if cls == "conv_grouped" else 1.0
        flops[CLASS_INDEX[cls]] = peak * eff
    bandwidth = device.memory_bandwidth * device.achievable_bandwidth_share
    return DeviceRates(flops=flops, bandwidth=bandwidth, slots=device.sms or 0,
                       kernel_s=device.kernel_overhead_s,
                       element_scale=ELEMENT_BYTES[dtype_key(dtype)] / 4.0)


@dataclass(frozen=True)
class KernelTable:
    """Kernel rows of a whole model as arrays (built once per model, priced many times)."""

    layer: np.ndarray  # owning layer index
    backward: np.ndarray  # bool
    cls: np.ndarray  # class index
    count: np.ndarray
    flops: np.ndarray  # per sample
    bytes: np.ndarray  # per sample, float32
    fixed_bytes: np.ndarray  # per iteration, float32
    out: np.ndarray  # output elements per sample (0: fills the device)
    layers: int

    @classmethod
    def from_layers(cls, rows_per_layer: Sequence[Sequence[Sequence[Any]]]) -> KernelTable:
        rows = [(i, *row) for i, layer in enumerate(rows_per_layer) for row in layer]
        if not rows:
            empty = np.zeros(0)
            return cls(empty.astype(int), empty.astype(bool), empty.astype(int), empty, empty,
                       empty, empty, empty, len(rows_per_layer))
        columns = list(zip(*rows))
        return cls(
            layer=np.array(columns[0], dtype=int),
            backward=np.array([p == "b" for p in columns[1]]),
            cls=np.array([CLASS_INDEX[c] for c in columns[2]], dtype=int),
            count=np.array(columns[3], dtype=float),
            flops=np.array(columns[4], dtype=float),
            bytes=np.array(columns[5], dtype=float),
            fixed_bytes=np.array(columns[6], dtype=float),
            out=np.array(columns[7], dtype=float),
            layers=len(rows_per_layer),
        )

    def seconds(self, r: DeviceRates, batch: float) -> tuple[np.ndarray, np.ndarray]:
        """Per-layer forward and backward seconds at ``batch`` on a device's rates."""
        norm = self.cls == CLASS_INDEX["norm"]
        traffic = (self.bytes * batch + self.fixed_bytes) * r.element_scale
        traffic = np.where(norm, traffic * np.where(self.backward, NORM_TRAFFIC["b"],
                                                    NORM_TRAFFIC["f"]), traffic)
        utilisation = np.ones_like(self.flops)
        if r.slots > 0:
            blocks = np.ceil(self.out * batch / TILE_ELEMENTS)
            waves = np.ceil(blocks / r.slots)
            utilisation = np.where(self.out > 0, blocks / np.maximum(waves, 1) / r.slots, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            compute = np.where(self.flops > 0,
                               self.flops * batch / (r.flops[self.cls] * utilisation), 0.0)
        t = np.maximum(compute, traffic / r.bandwidth) + self.count * r.kernel_s
        forward = np.bincount(self.layer[~self.backward], t[~self.backward],
                              minlength=self.layers)
        backward = np.bincount(self.layer[self.backward], t[self.backward],
                               minlength=self.layers)
        return forward, backward


LAYER_TYPE_CLASS = {
    "Conv1d": "conv", "Conv2d": "conv", "Conv3d": "conv", "ConvTranspose2d": "conv",
    "Linear": "matmul", "Conv1D": "matmul", "MultiheadAttention": "matmul",
    "BatchNorm1d": "norm", "BatchNorm2d": "norm", "LayerNorm": "norm", "GroupNorm": "norm",
    "Embedding": "embedding",
}


def synthetic_rows(layer_type: str | None, flops: float, activation_bytes: float,
                   parameter_bytes: float) -> list[list[Any]]:
    """Kernel rows for a layer known only by type, FLOPs and bytes (per sample).

    One forward kernel of the class its type suggests, and a backward of twice the work.
    """
    cls = LAYER_TYPE_CLASS.get(layer_type or "", "matmul" if flops > 0 else "elementwise")
    if cls in COMPUTE_CLASSES and flops <= 0:
        cls = "elementwise"
    if cls not in COMPUTE_CLASSES and flops > 0:
        cls = "matmul"
    return [["f", cls, 1, flops, activation_bytes, parameter_bytes, 0],
            ["b", cls, 2, 2 * flops, 2 * activation_bytes, 2 * parameter_bytes, 0]]
