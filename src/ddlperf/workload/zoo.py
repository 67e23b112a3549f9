"""Bundled model zoo: per-layer FLOPs and bytes of well-known models, turned into Workloads.

Torch-free on purpose (the prediction path never imports torch): the numbers were counted once
by ``tools/gen_zoo.py`` and ship as ``data/zoo.json``. ``load`` turns them into seconds on a
catalog device with the roofline of :meth:`ddlperf.hardware.Device.layer_seconds`.

Assumptions (also in the README):
- backward ≈ 2 × forward: twice the FLOPs (gradients w.r.t. inputs and weights) and twice the
  memory traffic of the forward pass;
- the optimizer is SGD with momentum; per parameter byte it reads weight, gradient and momentum
  and writes weight and momentum — :data:`UPDATE_TRAFFIC` = 5 bytes moved per parameter byte
  (a fused kernel; it is purely memory bound). Adam: 7 (weight, grad, m, v in; weight, m, v
  out);
- in reduced precision (fp16/bf16) activations and parameter/gradient tensors shrink with the
  element size (gradients are exchanged in the training dtype).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from ddlperf.errors import InputError
from ddlperf.hardware import DTYPE_ALIASES, Device, device_from_spec, suggest
from ddlperf.workload.model import Layer, Tensor, Workload

ZOO_FORMAT = "ddlperf.zoo/1"
BACKWARD_FACTOR = 2.0
UPDATE_TRAFFIC = 5.0
ADAM_TRAFFIC = 7.0  # reads weight, grad, m, v; writes weight, m, v
ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}
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
) -> Workload:
    """The zoo model ``name`` as a Workload on ``device`` (roofline times) at ``batch_size``."""
    key, entry = _entry(name)
    batch = entry["default_batch_size"] if batch_size is None else batch_size
    if isinstance(batch, bool) or not isinstance(batch, int) or batch <= 0:
        raise InputError("batch_size", f"must be a whole number > 0, got {batch_size!r}")
    dev = device if isinstance(device, Device) else device_from_spec(device, "device")
    return Workload(
        name=key,
        batch_size=batch,
        layers=roofline_layers(entry["layers"], batch, dev, dtype),
        update_s_per_byte=update_seconds_per_byte(dev),
        device=dev.name,
        dtype=dtype_name(dtype),
        provenance={
            "source": "zoo",
            "model": key,
            "device": dev.name,
            "method": "roofline",
            "input": entry["input"],
            "backward_factor": BACKWARD_FACTOR,
            "optimizer": "sgd-momentum",
            "update_traffic_bytes_per_byte": UPDATE_TRAFFIC,
        },
    )


def dtype_name(dtype: str) -> str:
    """``fp16`` → ``float16`` (the Workload's spelling); unknown dtypes raise InputError."""
    key = DTYPE_ALIASES.get(dtype.lower())
    if key is None:
        raise InputError("dtype", f"unknown dtype {dtype!r}", "use fp32, tf32, fp16 or bf16")
    return DTYPE_NAMES[key]


def update_seconds_per_byte(device: Device, optimizer: str = "sgd") -> float:
    """Roofline optimizer cost: memory traffic per parameter byte over achievable bandwidth."""
    traffic = UPDATE_TRAFFIC if optimizer == "sgd" else ADAM_TRAFFIC
    return traffic / (device.memory_bandwidth * device.efficiency)


def roofline_layers(
    entries: list[dict[str, Any]], batch: int, device: Device, dtype: str = "fp32"
) -> tuple[Layer, ...]:
    """Layers with roofline times from zoo-style entries (per-sample work, float32 bytes).

    ``memory_bytes`` of a layer = activation traffic × batch + its parameter bytes (read once).
    """
    device.peak(dtype)  # unknown dtype → InputError
    scale = ELEMENT_BYTES[DTYPE_ALIASES[dtype.lower()]] / 4.0
    layers = []
    for spec in entries:
        tensors = tuple(
            Tensor(name=t["name"], bytes=max(1, round(t["bytes"] * scale))) for t in spec["tensors"]
        )
        flops = float(spec["flops"]) * batch
        memory = float(spec["memory_bytes"]) * scale * batch + sum(t.bytes for t in tensors)
        layers.append(
            Layer(
                name=spec["name"],
                type=spec["type"],
                forward_s=device.layer_seconds(flops, memory, dtype),
                backward_s=device.layer_seconds(
                    BACKWARD_FACTOR * flops, BACKWARD_FACTOR * memory, dtype
                ),
                tensors=tensors,
                flops=flops,
                memory_bytes=memory,
            )
        )
    return tuple(layers)
