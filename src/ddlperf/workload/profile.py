"""``ddlperf.profile``: a Workload from a real PyTorch model, measured here or estimated.

Three methods:
- **measured** (default): run training steps (forward, loss, backward) on this machine's CPU or
  a CUDA device and time every layer with module hooks; time no layer owns is kept as
  ``unattributed_s``. The optimizer step (SGD with momentum 0.9 and Adam) is timed separately
  and stored per parameter byte.
- **analytic**: count FLOPs and bytes per layer on the meta device and turn them into seconds
  with the device catalog's roofline (backward ≈ 2 × forward, as the zoo does).
- **calibrated**: the analytic per-layer times scaled so they sum to one measured step (or to
  a step time you know for the target hardware).

The measured method times layers as :mod:`ddlperf.workload.layer_timing` describes. What gets
profiled and how it is prepared: :mod:`.profile_inputs`; the estimates: :mod:`.profile_analytic`;
the measurements: :mod:`.profile_measured`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ddlperf.errors import InputError, MissingExtraError

try:
    import torch
    from torch import nn
except ModuleNotFoundError as exc:  # pragma: no cover - exercised via subprocess in tests
    raise MissingExtraError("ddlperf.profile", "torch", exc.name or "torch") from exc

from ddlperf.hardware import Device, device_from_spec
from ddlperf.workload.model import Workload
from ddlperf.workload.profile_analytic import analytic_workload, calibrated
from ddlperf.workload.profile_inputs import (
    check_options,
    make_subject,
    matmul_precision,
    measure_device,
    prepare,
    torch_threads,
)
from ddlperf.workload.profile_measured import calibrate_measured, measure


def profile(
    model: nn.Module | str,
    example_input: Any = None,
    *,
    batch_size: int | None = None,
    input_shape: Sequence[int] | None = None,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None,
    target: Any = None,
    analytic: bool = False,
    calibrate: bool = False,
    device: str | Device | None = None,
    dtype: str = "fp32",
    step_time: float | None = None,
    warmup: int = 3,
    repetitions: int = 10,
    threads: int | None = 1,
    optimizer: str = "sgd",
    name: str | None = None,
) -> Workload:
    """Profile ``model`` (an ``nn.Module`` or a zoo name) into a :class:`Workload`.

    ``example_input``: a tensor or tuple of positional tensors for one batch (first dimension =
    batch); for a zoo name it is synthesised from ``batch_size`` and ``input_shape`` (per
    sample; a sequence length for language models). ``loss_fn(output, target)`` defaults to the
    zoo task's loss, else the mean of the first floating output.

    ``device``: where to measure (``cpu``, ``cuda``, ``cuda:1``) for measured and calibrated
    runs; a catalog device (``V100``) or inline spec for ``analytic`` (default V100) and for
    ``calibrate`` with a known ``step_time`` (seconds of forward + loss + backward there).
    """
    check_options(batch_size, warmup, repetitions, threads, optimizer, step_time, dtype)
    if analytic and calibrate:
        raise InputError("--calibrate", "cannot be combined with --analytic",
                         "calibrate already starts from the analytic estimate")
    if analytic or (calibrate and step_time is not None):
        dev = device_from_spec(device or "V100", "--device") if not isinstance(device, Device) \
            else device
        subject = make_subject(model, example_input, batch_size, input_shape, loss_fn, target,
                               name, "cpu", meta=True)
        workload = analytic_workload(subject, dev, dtype, optimizer)
        if calibrate:
            workload = calibrated(workload, float(step_time), {"step_time_given": step_time})
        return workload
    if step_time is not None:
        raise InputError("--step-time", "only applies with --calibrate")
    where = measure_device(device)
    subject = make_subject(model, example_input, batch_size, input_shape, loss_fn, target, name,
                           where, meta=False)
    with torch_threads(threads, where), matmul_precision(dtype):
        prepare(subject, where, dtype)
        if calibrate:
            return calibrate_measured(subject, where, dtype, warmup, repetitions, optimizer,
                                      threads)
        return measure(subject, where, dtype, warmup, repetitions, optimizer, threads)
