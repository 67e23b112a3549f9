"""Bundled model zoo: per-layer kernels of well-known models, turned into Workloads.

Torch-free on purpose (the prediction path never imports torch): the numbers were counted once
by ``tools/gen_zoo.py`` and ship as ``data/zoo.json``. ``load`` prices every forward and
backward kernel on a catalog device with :mod:`ddlperf.compute` (per operation class, dtype,
math mode and batch size).

Assumptions (also in the README and docs/compute.md):
- the backward pass is the kernels autograd runs (counted on the meta device), not a factor;
- the optimizer is SGD with momentum; per parameter it reads weight, gradient and momentum
  and writes weight and momentum (:data:`UPDATE_TRAFFIC` = 5 float32 values, a fused
  memory-bound kernel). Adam: 7 (weight, grad, m, v in; weight, m, v out);
- in mixed precision (fp16/bf16) activations shrink with the element size; master weights,
  and optimizer state stay float32; gradients are exchanged in ``grad_dtype`` (default: the
  compute dtype).
"""

from __future__ import annotations

import json
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from ddlperf import compute
from ddlperf.compute import ELEMENT_BYTES, KernelTable
from ddlperf.errors import InputError
from ddlperf.hardware import Architecture, Device, device_from_spec, suggest
from ddlperf.workload.model import Layer, Tensor, Workload

ZOO_FORMAT = "ddlperf.zoo/2"
UPDATE_TRAFFIC = 5.0
ADAM_TRAFFIC = 7.0  # reads weight, grad, m, v; writes weight, m, v
DTYPE_NAMES = {"fp32": "float32", "tf32": "tf32", "fp16": "float16", "bf16": "bfloat16"}


@cache
def _data() -> dict[str, Any]:
    text = resources.files("ddlperf").joinpath("data/zoo.json").read_text(encoding="utf-8")
    data = json.loads(text)
    if data.get("format") != ZOO_FORMAT:
        raise RuntimeError(f"bundled zoo.json has format {data.get('format')!r}, not {ZOO_FORMAT}")
    return data


def names() -> list[str]:
    """Model names in the zoo, sorted."""
    return sorted(_data()["models"])


def _entry(name: str) -> tuple[str, dict[str, Any]]:
    models = _data()["models"]
    if name in models:
        return name, models[name]
    for key in models:
        if key.lower() == name.strip().lower():
            return key, models[key]
    raise InputError("model", f"unknown model {name!r}", suggest(name, names()))


def info(name: str) -> dict[str, Any]:
    """Summary of one model: source, task, input, default batch, parameters, FLOPs/sample."""
    key, entry = _entry(name)
    layers = entry["layers"]
    flops = sum(layer["flops"] for layer in layers)
    return {
        "name": key,
        "source": entry["source"],
        "task": entry["task"],
        "input": entry["input"],
        "default_batch_size": entry["default_batch_size"],
        "parameters": entry["parameters"],
        "parameter_bytes": sum(t["bytes"] for layer in layers for t in layer["tensors"]),
        "layers": len(layers),
        "flops_per_sample": flops,
        "gflops_per_sample": flops / 1e9,
        "flop_convention": _data()["flop_convention"],
    }


def versions() -> dict[str, str]:
    """Library versions the zoo was counted with."""
    return dict(_data()["versions"])


def load(
    name: str,
    batch_size: int | None = None,
    device: str | Device = "V100",
    dtype: str = "fp32",
    math: str | None = None,
    grad_dtype: str | None = None,
    accumulation: int = 1,
) -> Workload:
    """The zoo model ``name`` as a Workload on ``device`` at ``batch_size`` (per micro-batch).

    ``dtype``/``math``: what the kernels compute in (:func:`ddlperf.compute.math_plan`);
    ``grad_dtype``: what gradients are exchanged in (default: ``dtype``); ``accumulation``:
    micro-batches per synchronisation.
    """
    key, entry = _entry(name)
    batch = entry["default_batch_size"] if batch_size is None else batch_size
    if isinstance(batch, bool) or not isinstance(batch, int) or batch <= 0:
        raise InputError("batch_size", f"must be a whole number > 0, got {batch_size!r}")
    named = (device, dtype, math, grad_dtype, accumulation)
    if all(isinstance(v, (str, int, type(None))) for v in named) and isinstance(device, str):
        # the same inputs give the same (frozen) Workload: build it once
        return _load_named(key, batch, *named)
    return _build(key, entry, batch, device, dtype, math, grad_dtype, accumulation)


@lru_cache(maxsize=64)
def _load_named(key: str, batch: int, device: str, dtype: str, math: str | None,
                grad_dtype: str | None, accumulation: int) -> Workload:
    """:func:`load` for a device given by name or spec string, once per process: ``explain``
    re-predicts ~10 what-ifs of one model, each pricing every layer with the kernel model."""
    return _build(key, _entry(key)[1], batch, device_from_spec(device, "device"), dtype, math,
                  grad_dtype, accumulation)


def _build(key: str, entry: dict[str, Any], batch: int, dev: Device, dtype: str,
           math: str | None, grad_dtype: str | None, accumulation: int) -> Workload:
    layers = priced_layers(entry["layers"], batch, dev, dtype, math, grad_dtype,
                           table=_table(key))
    return Workload(
        name=key,
        batch_size=batch,
        layers=layers,
        update_s_per_byte=update_seconds_per_byte(dev, grad_dtype=grad_dtype or dtype),
        device=dev.name,
        dtype=dtype_name(dtype),
        accumulation=check_accumulation(accumulation),
        provenance={
            "source": "zoo",
            "model": key,
            "device": dev.name,
            "method": "kernel model",
            "math": compute.math_key(math),
            "grad_dtype": dtype_name(grad_dtype or dtype),
            "input": entry["input"],
            "optimizer": "sgd-momentum",
            "update_traffic_bytes_per_byte": UPDATE_TRAFFIC,
        },
    )


def check_accumulation(accumulation: int) -> int:
    if isinstance(accumulation, bool) or not isinstance(accumulation, int) or accumulation < 1:
        raise InputError("--accumulation", f"must be a whole number ≥ 1, got {accumulation!r}",
                         "micro-batches per synchronisation, e.g. 4")
    return accumulation


def dtype_name(dtype: str) -> str:
    """``fp16`` → ``float16`` (the Workload's spelling); unknown dtypes raise InputError."""
    return DTYPE_NAMES[compute.dtype_key(dtype)]


def update_seconds_per_byte(device: Device, optimizer: str = "sgd",
                            grad_dtype: str = "fp32") -> float:
    """Optimizer cost per gradient byte: float32 traffic over achievable bandwidth."""
    traffic = UPDATE_TRAFFIC if optimizer == "sgd" else ADAM_TRAFFIC
    per_grad_byte = 4.0 / ELEMENT_BYTES[compute.dtype_key(grad_dtype, "--grad-dtype")]
    return traffic * per_grad_byte / (device.memory_bandwidth
                                       * device.achievable_bandwidth_share)


@cache
def _table(key: str) -> KernelTable:
    return KernelTable.from_layers([layer["kernels"] for layer in _entry(key)[1]["layers"]])


def layer_kernels(spec: dict[str, Any]) -> list[list[Any]]:
    """A zoo-style entry's kernel rows, synthesised from its FLOPs and bytes if it has none."""
    if spec.get("kernels"):
        return spec["kernels"]
    params = float(sum(t["bytes"] for t in spec.get("tensors", [])))
    return compute.synthetic_rows(spec.get("type"), float(spec.get("flops") or 0.0),
                                  float(spec.get("memory_bytes") or 0.0), params)


def priced_layers(
    entries: list[dict[str, Any]], batch: int, device: Device, dtype: str = "fp32",
    math: str | None = None, grad_dtype: str | None = None, table: KernelTable | None = None,
) -> tuple[Layer, ...]:
    """Layers with kernel-model times from zoo-style entries (per-sample work, float32 bytes).

    ``memory_bytes`` of a layer = forward activation traffic × batch + its parameter bytes.
    """
    rates = compute.rates(device, dtype, math)
    grad_scale = ELEMENT_BYTES[compute.dtype_key(grad_dtype or dtype, "--grad-dtype")] / 4.0
    table = table or KernelTable.from_layers([layer_kernels(e) for e in entries])
    forward, backward = table.seconds(rates, batch)
    layers = []
    for i, spec in enumerate(entries):
        tensors = tuple(
            Tensor(name=t["name"], bytes=max(1, round(t["bytes"] * grad_scale)))
            for t in spec["tensors"]
        )
        params = float(sum(t["bytes"] for t in spec["tensors"]))
        layers.append(
            Layer(
                name=spec["name"],
                type=spec["type"],
                forward_s=float(forward[i]),
                backward_s=float(backward[i]),
                tensors=tensors,
                flops=float(spec["flops"]) * batch,
                memory_bytes=(float(spec["memory_bytes"]) * batch + params)
                * rates.element_scale,
                activation_bytes=float(spec.get("saved_bytes", 0.0)) * batch
                * rates.element_scale,
                kernels=spec.get("kernels") or layer_kernels(spec),
            )
        )
    return tuple(layers)


def single_device_throughput(
    name: str, device: str | Device, batch_size: int, dtype: str = "fp32",
    math: str | None = None, arch: Architecture | None = None,
) -> float:
    """Samples/s of one device training ``name`` alone: batch / (forward + backward + update).

    ``arch`` replaces the device's architecture efficiencies (for calibration).
    """
    key, entry = _entry(name)
    dev = device if isinstance(device, Device) else device_from_spec(device, "device")
    forward, backward = _table(key).seconds(compute.rates(dev, dtype, math, arch), batch_size)
    params = sum(t["bytes"] for layer in entry["layers"] for t in layer["tensors"])
    update = update_seconds_per_byte(dev) * params
    return batch_size / (float(forward.sum() + backward.sum()) + update)
