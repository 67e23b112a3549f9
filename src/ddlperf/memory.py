"""Each worker's device memory: weights, gradients, optimizer state, activations.

Mixed precision (fp16/bf16) keeps float32 master weights, float32 gradients and float32
optimizer state (as PyTorch AMP does) plus a half-precision copy of the weights for the
kernels; activations are the tensors autograd keeps for backward (counted per layer on the
meta device), at the compute dtype. Workspace and allocator slack are not counted, so a
prediction that barely fits may still run out of memory.
"""

from __future__ import annotations

import math
from typing import Any

from ddlperf.compute import ELEMENT_BYTES, dtype_key
from ddlperf.hardware import Device
from ddlperf.workload import Workload

OPTIMIZER_STATE = {"sgd": 1, "adam": 2}  # float32 values kept per parameter


def parameter_count(workload: Workload) -> float:
    grad = str(workload.provenance.get("grad_dtype", workload.dtype))
    return workload.parameter_bytes / ELEMENT_BYTES[dtype_key(grad, "grad_dtype")]


def worker_memory(workload: Workload, device: Device | None, batch: int) -> dict[str, Any] | None:
    """Bytes per worker at ``batch`` (one micro-batch), against the device's memory.

    None when the workload does not say how many activation bytes its layers keep.
    """
    saved = [layer.activation_bytes for layer in workload.layers]
    if any(v is None for v in saved):
        return None
    params = parameter_count(workload)
    half = ELEMENT_BYTES[dtype_key(workload.dtype, "dtype")] == 2
    optimizer = str(workload.provenance.get("optimizer", "sgd")).split("-")[0]
    fixed = {
        "weights": params * (4 + (2 if half else 0)),
        "gradients": params * 4,
        "optimizer_state": params * 4 * OPTIMIZER_STATE.get(optimizer, 1),
    }
    per_sample = sum(saved) / workload.batch_size  # type: ignore[arg-type]
    report: dict[str, Any] = {**fixed, "activations": per_sample * batch}
    report["total"] = sum(report.values())
    capacity = device.memory_bytes if device is not None else None
    report["device_memory"] = capacity
    if capacity is not None:
        report["fits"] = report["total"] <= capacity
        room = capacity - sum(fixed.values())
        report["largest_batch"] = max(0, math.floor(room / per_sample)) if per_sample > 0 \
            else None
    return report


def memory_note(group: str, device: Device, report: dict[str, Any], batch: int) -> str | None:
    """A warning when a worker's memory does not fit its device, else None."""
    if report.get("fits", True):
        return None
    largest = report.get("largest_batch")
    fix = (f"the largest batch that fits is {largest}" if largest
           else "not even batch 1 fits")
    return (f"{group}: needs {report['total'] / 2**30:.1f} GiB per worker at batch {batch} "
            f"(activations {report['activations'] / 2**30:.1f} GiB) but {device.name} has "
            f"{report['device_memory'] / 2**30:.0f} GiB: does not fit; {fix}")
