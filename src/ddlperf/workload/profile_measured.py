"""Measured workloads: hooked training steps on this machine, the optimizer step per byte,
and the analytic shares calibrated to a measured step. Imported through
:mod:`ddlperf.workload.profile`, which reports a missing torch in one line.
"""

from __future__ import annotations

import gc
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ddlperf.errors import InputError
from ddlperf.hardware import Device, catalog, device_from_spec
from ddlperf.workload import layer_flops, zoo
from ddlperf.workload.layer_timing import HookedStep, LayerRecorder, attribute, synchronizer
from ddlperf.workload.model import Layer, Tensor, Workload
from ddlperf.workload.profile_analytic import analytic_workload, calibrated, layer_counts
from ddlperf.workload.profile_inputs import OPTIMIZERS, Subject


def calibrate_measured(subject: Subject, where: torch.device, dtype: str, warmup: int,
                       repetitions: int, optimizer: str, threads: int | None) -> Workload:
    """Analytic shares on the catalog device matching ``where``, scaled to a measured step."""
    dev = _catalog_device(where)
    analytic = analytic_workload(subject, dev, dtype, optimizer)
    steps = _plain_steps(subject, warmup, repetitions, where)
    update = _optimizer_seconds_per_byte(subject.model, repetitions, where)
    step = statistics.median(steps)
    workload = calibrated(analytic, step, {
        "step_s_cv": _cv(steps), "measured_on": _device_label(where),
        **_environment(where, threads, warmup, repetitions),
        "update_s_per_byte": update,
    })
    return workload.with_updates(device=_device_label(where),
                                 update_s_per_byte=update[optimizer])


def _catalog_device(where: torch.device) -> Device:
    if where.type == "cpu":
        return catalog()["cpu"]
    gpu = torch.cuda.get_device_name(where)
    for name, dev in sorted(catalog().items(), key=lambda kv: -len(kv[0])):
        if name.lower() in gpu.lower():
            return dev
    return device_from_spec("V100")


def _device_label(where: torch.device) -> str:
    if where.type == "cpu":
        return "cpu"
    gpu = torch.cuda.get_device_name(where)
    for name in sorted(catalog(), key=len, reverse=True):
        if name.lower() in gpu.lower():
            return name
    return gpu


def _cv(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else 0.0


def measure(subject: Subject, where: torch.device, dtype: str, warmup: int,
            repetitions: int, optimizer: str, threads: int | None) -> Workload:
    counts = layer_counts(subject)
    names = layer_flops.parameter_names(subject.model)
    by_name = dict(subject.model.named_parameters())
    owner_of_param = {
        id(by_name[tensor]): (c.name, tensor) for c in counts for tensor, _ in c.tensors
    }
    recorder = LayerRecorder(subject.model, owner_of_param, where)
    steps: list[HookedStep] = []
    try:
        _run_checked(lambda: [recorder.run(subject) for _ in range(warmup)])
        gc.collect()
        gc_was = gc.isenabled()
        gc.disable()
        try:
            for _ in range(repetitions):
                steps.append(_run_checked(lambda: recorder.run(subject)))
        finally:
            if gc_was:
                gc.enable()
    finally:
        recorder.close()
    update = _optimizer_seconds_per_byte(subject.model, repetitions, where)
    return _measured_workload(subject, counts, steps, names, update, optimizer, where, dtype,
                              {**_environment(where, threads, warmup, repetitions)})


def _run_checked(run: Callable[[], Any]) -> Any:
    """Run training steps; a failure the user can fix (shape, memory) becomes one line."""
    try:
        return run()
    except RuntimeError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError("model", f"the training step failed: {first[:300]}",
                         "check --input-shape, --batch-size and the loss") from None


def _measured_workload(subject: Subject, counts: list[layer_flops.LayerCount],
                       steps: list[HookedStep], names: dict[int, str], update: dict[str, float],
                       optimizer: str, where: torch.device, dtype: str,
                       environment: dict[str, Any]) -> Workload:
    splits = [attribute(step) for step in steps]
    order = [c.name for c in counts]
    known = set(order)
    # timed layers that own no tensor record (rare) fold into the nearest earlier record
    fold = {name: _nearest_record(name, order) for split in splits
            for part in split[:2] for name in part if name not in known}
    fwd_samples = {name: [0.0] * len(steps) for name in order}
    bwd_samples = {name: [0.0] * len(steps) for name in order}
    for i, (forward, backward, _) in enumerate(splits):
        for part, samples in ((forward, fwd_samples), (backward, bwd_samples)):
            for name, seconds in part.items():
                samples[fold.get(name, name)][i] += seconds
    step_times = [s.end - s.start for s in steps]
    layers = []
    for c in counts:
        fwd, bwd = fwd_samples[c.name], bwd_samples[c.name]
        layers.append(Layer(
            name=c.name, type=c.type,
            forward_s=statistics.median(fwd), backward_s=statistics.median(bwd),
            forward_cv=_cv(fwd), backward_cv=_cv(bwd),
            tensors=tuple(Tensor(name=n, bytes=b) for n, b in c.tensors),
            flops=c.flops, memory_bytes=c.memory_bytes,
        ))
    step = statistics.median(step_times)
    residual = step - sum(layer.forward_s + layer.backward_s for layer in layers)
    all_tensors = [t.name for layer in layers for t in layer.tensors]
    order_seen = list(dict.fromkeys(steps[-1].grad_order)) if steps else []
    missing = [n for n in reversed(all_tensors) if n not in set(order_seen)]
    return Workload(
        name=subject.name,
        batch_size=subject.batch_size,
        layers=tuple(layers),
        update_s_per_byte=update[optimizer],
        unattributed_s=max(0.0, residual),
        gradient_order=tuple(order_seen + missing),
        device=_device_label(where),
        dtype=zoo.dtype_name(dtype),
        provenance={
            "source": "profile", "method": "measured", "model": subject.source,
            "input": subject.input_desc, "optimizer": optimizer,
            "step_s_median": step, "step_s_cv": _cv(step_times),
            "unattributed_s_median": statistics.median(s[2] for s in splits),
            "unattributed_clamped": residual < 0,
            "update_s_per_byte": update,
            "tensors_without_gradient": missing,
            "backward_method": "output/input tensor hooks + post-accumulate-grad hooks",
            **environment,
        },
    )


def _nearest_record(name: str, order: list[str]) -> str:
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        if ".".join(parts[:i]) in order:
            return ".".join(parts[:i])
    return order[-1]


def _environment(where: torch.device, threads: int | None, warmup: int,
                 repetitions: int) -> dict[str, Any]:
    env: dict[str, Any] = {
        "torch": torch.__version__, "threads": torch.get_num_threads()
        if where.type == "cpu" else threads, "warmup": warmup, "repetitions": repetitions,
        "platform": platform.platform(),
    }
    if where.type == "cpu":
        env["cpu_model"] = _cpu_model()
    else:
        env["gpu_model"] = torch.cuda.get_device_name(where)
        env["cuda"] = torch.version.cuda
    return env


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _plain_steps(subject: Subject, warmup: int, repetitions: int,
                 where: torch.device) -> list[float]:
    """Whole-step times (forward + loss + backward) without any hooks."""
    sync = synchronizer(where)

    def one() -> float:
        subject.model.zero_grad(set_to_none=True)
        sync()
        start = time.perf_counter()
        subject.loss_fn(subject.model(*subject.inputs), subject.target).backward()
        sync()
        return time.perf_counter() - start

    _run_checked(lambda: [one() for _ in range(warmup)])
    return [_run_checked(one) for _ in range(repetitions)]


def _optimizer_seconds_per_byte(model: nn.Module, repetitions: int,
                                where: torch.device) -> dict[str, float]:
    """Median ``optimizer.step()`` seconds per parameter byte, SGD(momentum 0.9) and Adam.

    Uses the gradients left by the last step; a tiny learning rate keeps weights sane. The
    weights change slightly, which does not matter for synthetic profiling.
    """
    params = [p for p in model.parameters() if p.grad is not None]
    if not params:
        return {"sgd": 0.0, "adam": 0.0}
    total = sum(p.nelement() * p.element_size() for p in params)
    sync = synchronizer(where)
    result = {}
    for kind in OPTIMIZERS:
        opt: torch.optim.Optimizer
        if kind == "sgd":
            opt = torch.optim.SGD(params, lr=1e-12, momentum=0.9)
        else:
            opt = torch.optim.Adam(params, lr=1e-12)
        opt.step()  # creates the optimizer state
        times = []
        for _ in range(max(3, repetitions)):
            sync()
            start = time.perf_counter()
            opt.step()
            sync()
            times.append(time.perf_counter() - start)
        result[kind] = statistics.median(times) / total
        del opt
    return result
