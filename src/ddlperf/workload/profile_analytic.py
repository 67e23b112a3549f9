"""Analytic and calibrated workloads of a profiled model: counted, not timed.

Per-layer FLOPs and bytes are counted on the meta device and priced with the device catalog's
roofline (backward ≈ 2 × forward, as the zoo does); calibrated scales those times to one step
time. Imported through :mod:`ddlperf.workload.profile`, which reports a missing torch in one
line.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_map

from ddlperf.errors import InputError
from ddlperf.hardware import Device
from ddlperf.workload import layer_flops, zoo
from ddlperf.workload.model import Workload
from ddlperf.workload.profile_inputs import Subject


def layer_counts(subject: Subject) -> list[layer_flops.LayerCount]:
    """Per-layer FLOPs/bytes/tensors on the meta device (for the whole example batch).

    Falls back to a real forward pass (no grad) when an op has no meta implementation.
    """
    try:
        meta_model = _meta_copy(subject)
        meta_inputs = tree_map(
            lambda v: v.to("meta") if isinstance(v, torch.Tensor) else v, subject.inputs
        )
        return layer_flops.count_layers(meta_model, meta_inputs)
    except Exception as meta_exc:  # any failure: retry for real
        if all(t.device.type == "meta" for t in tree_flatten(subject.inputs)[0]
               if isinstance(t, torch.Tensor)):
            raise _does_not_fit(meta_exc) from None
        try:
            return layer_flops.count_layers(subject.model, subject.inputs)
        except Exception as exc:
            raise _does_not_fit(exc) from None


def _does_not_fit(exc: BaseException) -> InputError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return InputError("--input-shape", f"the input does not fit the model: {first[:300]}",
                      "give the per-sample shape the model expects (batch dimension excluded)")


def _meta_copy(subject: Subject) -> nn.Module:
    """The model with every parameter and buffer on meta; tied parameters stay tied."""
    model = subject.model
    if subject.meta_builder is not None:
        with torch.device("meta"):
            built = subject.meta_builder()
        dtype = next(model.parameters()).dtype
        return built if dtype == torch.float32 else built.to(dtype)  # meta→meta keeps ties
    memo: dict[int, Any] = {}
    for p in model.parameters():
        memo[id(p)] = nn.Parameter(torch.empty_like(p, device="meta"), p.requires_grad)
    for b in model.buffers():
        memo[id(b)] = torch.empty_like(b, device="meta")
    return copy.deepcopy(model, memo)


def _entries(counts: list[layer_flops.LayerCount], scale_bytes: float,
             batch: int = 1) -> list[dict[str, Any]]:
    """LayerCounts (whole batch) → zoo-style per-sample entries with float32 bytes."""
    return [
        {"name": c.name, "type": c.type, "flops": c.flops / batch,
         "memory_bytes": c.memory_bytes * scale_bytes / batch,
         "tensors": [{"name": n, "bytes": b * scale_bytes} for n, b in c.tensors]}
        for c in counts
    ]


def analytic_workload(subject: Subject, dev: Device, dtype: str, optimizer: str) -> Workload:
    counts = layer_counts(subject)
    to_fp32 = 4.0 / next(subject.model.parameters()).element_size()  # roofline rescales to dtype
    batch = subject.batch_size
    layers = zoo.priced_layers(_entries(counts, to_fp32, batch), batch, dev, dtype)
    return Workload(
        name=subject.name,
        batch_size=subject.batch_size,
        layers=layers,
        update_s_per_byte=zoo.update_seconds_per_byte(dev, optimizer, dtype),
        device=dev.name,
        dtype=zoo.dtype_name(dtype),
        provenance={
            "source": "profile", "method": "analytic", "model": subject.source,
            "input": subject.input_desc, "device": dev.name, "torch": torch.__version__,
            "backward": "kernel model by layer type (ddlperf.compute)", "optimizer": optimizer,
            "flop_convention": layer_flops.FLOP_CONVENTION,
        },
    )


def calibrated(workload: Workload, step_s: float, extra: dict[str, Any]) -> Workload:
    """Scale layer times so Σ(forward + backward) equals ``step_s``; shares stay analytic."""
    total = workload.compute_s
    if total <= 0:
        raise InputError("--calibrate", "the analytic estimate is zero; nothing to scale")
    factor = step_s / total
    scaled = workload.scaled(factor)
    provenance = {**workload.provenance, "method": "calibrated", "step_s_median": step_s,
                  "calibration_factor": factor, "analytic_device": workload.device, **extra}
    return scaled.with_updates(provenance=provenance)
