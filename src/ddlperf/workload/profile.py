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

How layer times are measured (and the limits of it):
- A layer is a module that directly owns parameters, as in :mod:`layer_flops`. Forward:
  timestamps at every layer's forward pre-hook and forward hook. Each interval between two
  timestamps belongs to the layer of the earlier one, so parameter-free ops (ReLU, pooling,
  residual adds) are folded into the preceding layer; ops before the first layer fold into it.
- Backward: timestamps when the gradient w.r.t. a layer's output arrives (tensor hook set in
  the forward hook: the layer's backward starts), when its parameters' gradients are
  accumulated (``register_post_accumulate_grad_hook``, which also gives the gradient-ready
  order) and when the gradient w.r.t. its input is ready (its backward ended). Intervals after
  the first two belong to the layer; after the third to the layer that preceded it in the
  forward pass (whose folded ops run next).
- Unattributed: the loss forward, the loss backward and the backward of parameter-free ops
  after the last layer, hook overhead. ``unattributed_s = median step − Σ layer medians``, so
  Σ layers + unattributed = the measured step by construction; if the difference is negative
  (noise), it is clamped to 0 and ``provenance.unattributed_clamped`` says so.
- Autograd runs backward ops in dependency order, not layer by layer, for branches (Inception,
  DenseNet, residual shortcuts): layer boundaries there are approximate; totals are not.
- Each hook costs a few microseconds; on CUDA every hook synchronises the device, which removes
  the overlap between kernel launch and execution: trust layers of ≥ 1 ms.
"""

from __future__ import annotations

import copy
import gc
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from ddlperf.errors import InputError, MissingExtraError

try:
    import torch
    from torch import nn
    from torch.utils._pytree import tree_flatten, tree_map
except ModuleNotFoundError as exc:  # pragma: no cover - exercised via subprocess in tests
    raise MissingExtraError("ddlperf.profile", "torch", exc.name or "torch") from exc

from ddlperf import compute
from ddlperf.hardware import Device, catalog, device_from_spec
from ddlperf.workload import layer_flops, torch_models, zoo
from ddlperf.workload.model import Layer, Tensor, Workload

OPTIMIZERS = ("sgd", "adam")
TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
                "bf16": torch.bfloat16}


@dataclass
class Subject:
    """What gets profiled: a model, one synthetic batch, its loss."""

    name: str
    model: nn.Module
    inputs: tuple[Any, ...]
    target: Any
    loss_fn: Callable[[Any, Any], torch.Tensor]
    batch_size: int
    source: str
    meta_builder: Callable[[], nn.Module] | None = None
    input_desc: dict[str, Any] = field(default_factory=dict)


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
    _check_options(batch_size, warmup, repetitions, threads, optimizer, step_time, dtype)
    if analytic and calibrate:
        raise InputError("--calibrate", "cannot be combined with --analytic",
                         "calibrate already starts from the analytic estimate")
    if analytic or (calibrate and step_time is not None):
        dev = device_from_spec(device or "V100", "--device") if not isinstance(device, Device) \
            else device
        subject = _subject(model, example_input, batch_size, input_shape, loss_fn, target,
                           name, "cpu", meta=True)
        workload = _analytic(subject, dev, dtype, optimizer)
        if calibrate:
            workload = _calibrated(workload, float(step_time), {"step_time_given": step_time})
        return workload
    if step_time is not None:
        raise InputError("--step-time", "only applies with --calibrate")
    where = _measure_device(device)
    subject = _subject(model, example_input, batch_size, input_shape, loss_fn, target, name,
                       where, meta=False)
    with _threads(threads, where), _precision(dtype):
        _prepare(subject, where, dtype)
        if calibrate:
            return _calibrate_measured(subject, where, dtype, warmup, repetitions, optimizer,
                                       threads)
        return _measured(subject, where, dtype, warmup, repetitions, optimizer, threads)


# ---------------------------------------------------------------- inputs and options


def _check_options(batch_size: int | None, warmup: int, repetitions: int, threads: int | None,
                   optimizer: str, step_time: float | None, dtype: str) -> None:
    if batch_size is not None and (isinstance(batch_size, bool) or batch_size <= 0):
        raise InputError("--batch-size", f"must be a whole number > 0, got {batch_size}")
    if warmup < 0:
        raise InputError("--warmup", f"must be ≥ 0, got {warmup}")
    if repetitions < 1:
        raise InputError("--repetitions", f"must be ≥ 1, got {repetitions}")
    if threads is not None and threads < 1:
        raise InputError("--threads", f"must be ≥ 1, got {threads}")
    if optimizer not in OPTIMIZERS:
        raise InputError("--optimizer", f"unknown optimizer {optimizer!r}", "use sgd or adam")
    if step_time is not None and not step_time > 0:
        raise InputError("--step-time", f"must be > 0, got {step_time}")
    zoo.dtype_name(dtype)


def _measure_device(device: str | Device | None) -> torch.device:
    text = "cpu" if device is None else (device.name if isinstance(device, Device) else device)
    if text.lower() == "cpu":
        return torch.device("cpu")
    if text.lower().startswith("cuda"):
        if not torch.cuda.is_available():
            raise InputError("--device", "CUDA is not available here", "measure on --device cpu")
        return torch.device(text.lower())
    raise InputError("--device", f"cannot measure on {text!r} here",
                     "use cpu or cuda to measure, or --analytic for a catalog device")


def _subject(model: nn.Module | str, example_input: Any, batch_size: int | None,
             input_shape: Sequence[int] | None, loss_fn: Any, target: Any, name: str | None,
             where: torch.device | str, meta: bool) -> Subject:
    shape = tuple(int(s) for s in input_shape) if input_shape is not None else None
    if shape is not None and (not shape or any(s <= 0 for s in shape)):
        raise InputError("--input-shape", f"sizes must be > 0, got {shape}", "e.g. 3,224,224")
    if isinstance(model, str):
        return _zoo_subject(model, batch_size, shape, loss_fn, name, where, meta)
    if not isinstance(model, nn.Module):
        raise InputError("model", f"expected a torch.nn.Module or a zoo name, got "
                         f"{type(model).__name__}")
    if next(model.parameters(), None) is None:
        raise InputError("model", "has no parameters", "profile a model that trains something")
    if example_input is None:
        if shape is None:
            raise InputError("--input-shape", "is required for your own model",
                             "give the per-sample input shape, e.g. 3,224,224")
        example_input = torch.randn((batch_size or 1, *shape),
                                    generator=torch.Generator().manual_seed(0))
    inputs = example_input if isinstance(example_input, tuple) else (example_input,)
    first = next((t for t in tree_flatten(inputs)[0] if isinstance(t, torch.Tensor)), None)
    if first is None or first.dim() == 0:
        raise InputError("example_input", "needs a tensor with a batch dimension first")
    return Subject(
        name=name or type(model).__name__,
        model=model,
        inputs=inputs,
        target=target,
        loss_fn=loss_fn or torch_models.default_loss,
        batch_size=int(first.shape[0]),
        source=f"{type(model).__module__}.{type(model).__qualname__}",
        input_desc={"shape": list(first.shape[1:])},
    )


def _zoo_subject(model: str, batch_size: int | None, shape: tuple[int, ...] | None,
                 loss_fn: Any, name: str | None, where: torch.device | str,
                 meta: bool) -> Subject:
    spec = torch_models.spec(model)
    batch = batch_size or spec.default_batch_size
    device = "meta" if meta else where
    try:
        with torch.device("meta" if meta else "cpu"):
            built = spec.build()
    except ModuleNotFoundError as exc:
        raise MissingExtraError(f"model {spec.name}", "torch", exc.name or "?") from exc
    inputs, target = torch_models.make_batch(spec, batch, device=device, shape=shape)
    return Subject(
        name=name or spec.name, model=built, inputs=inputs, target=target,
        loss_fn=loss_fn or torch_models.loss_function(spec), batch_size=batch,
        source=spec.source, meta_builder=spec.build,
        input_desc=torch_models.input_override(spec, shape),
    )


class _threads:
    """Set torch's intra-op thread count for the measurement and restore it afterwards."""

    def __init__(self, threads: int | None, where: torch.device) -> None:
        self.threads = threads if where.type == "cpu" else None
        self.saved = torch.get_num_threads()

    def __enter__(self) -> None:
        if self.threads is not None:
            torch.set_num_threads(self.threads)

    def __exit__(self, *exc: object) -> None:
        torch.set_num_threads(self.saved)


class _precision:
    """TF32 matmuls only when asked for (``--dtype tf32`` on CUDA)."""

    def __init__(self, dtype: str) -> None:
        self.tf32 = dtype.lower() == "tf32"
        self.saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)

    def __enter__(self) -> None:
        torch.backends.cuda.matmul.allow_tf32 = self.tf32
        torch.backends.cudnn.allow_tf32 = self.tf32

    def __exit__(self, *exc: object) -> None:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self.saved


def _prepare(subject: Subject, where: torch.device, dtype: str) -> None:
    """Move model and batch to the measuring device and dtype; training mode."""
    tdtype = TORCH_DTYPES[compute.dtype_key(dtype)]
    subject.model.to(device=where, dtype=tdtype)
    subject.model.train()

    def move(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        if value.is_floating_point():
            return value.to(device=where, dtype=tdtype)
        return value.to(where)

    subject.inputs = tree_map(move, subject.inputs)
    subject.target = tree_map(lambda v: v.to(where) if isinstance(v, torch.Tensor) else v,
                              subject.target)


# ---------------------------------------------------------------- analytic


def _count(subject: Subject) -> list[layer_flops.LayerCount]:
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


def _analytic(subject: Subject, dev: Device, dtype: str, optimizer: str) -> Workload:
    counts = _count(subject)
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


def _calibrated(workload: Workload, step_s: float, extra: dict[str, Any]) -> Workload:
    """Scale layer times so Σ(forward + backward) equals ``step_s``; shares stay analytic."""
    total = workload.compute_s
    if total <= 0:
        raise InputError("--calibrate", "the analytic estimate is zero; nothing to scale")
    factor = step_s / total
    scaled = workload.scaled(factor)
    provenance = {**workload.provenance, "method": "calibrated", "step_s_median": step_s,
                  "calibration_factor": factor, "analytic_device": workload.device, **extra}
    return scaled.with_updates(provenance=provenance)


def _calibrate_measured(subject: Subject, where: torch.device, dtype: str, warmup: int,
                        repetitions: int, optimizer: str, threads: int | None) -> Workload:
    """Analytic shares on the catalog device matching ``where``, scaled to a measured step."""
    dev = _catalog_device(where)
    analytic = _analytic(subject, dev, dtype, optimizer)
    steps = _plain_steps(subject, warmup, repetitions, where)
    update = _optimizer_seconds_per_byte(subject.model, repetitions, where)
    step = statistics.median(steps)
    workload = _calibrated(analytic, step, {
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


# ---------------------------------------------------------------- measured


def _sync(where: torch.device) -> Callable[[], None]:
    if where.type == "cuda":
        return lambda: torch.cuda.synchronize(where)
    return lambda: None


@dataclass
class _Step:
    """Timestamps of one hooked step."""

    start: float = 0.0
    forward_end: float = 0.0
    backward_start: float = 0.0
    end: float = 0.0
    events: list[tuple[float, str, str]] = field(default_factory=list)  # (t, kind, layer)
    grad_order: list[str] = field(default_factory=list)


class _Recorder:
    """Module and tensor hooks that timestamp layer boundaries (see the module docstring)."""

    def __init__(self, model: nn.Module, owner_of_param: dict[int, tuple[str, str]],
                 where: torch.device) -> None:
        self.sync = _sync(where)
        self.step = _Step()
        self.handles: list[Any] = []
        for name, module in layer_flops.layer_modules(model).items():
            self.handles.append(module.register_forward_pre_hook(self._pre(name)))
            self.handles.append(module.register_forward_hook(self._post(name)))
        for p in model.parameters():
            if p.requires_grad and id(p) in owner_of_param:
                layer, tensor = owner_of_param[id(p)]
                self.handles.append(p.register_post_accumulate_grad_hook(self._acc(layer, tensor)))

    def mark(self, kind: str, layer: str) -> None:
        self.sync()
        self.step.events.append((time.perf_counter(), kind, layer))

    def _pre(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any) -> None:
            self.mark("pre", name)
            for t in tree_flatten(args)[0]:
                if isinstance(t, torch.Tensor) and t.requires_grad:
                    t.register_hook(lambda grad: self.mark("in_grad", name))

        return hook

    def _post(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            self.mark("post", name)
            for t in tree_flatten(output)[0]:
                if isinstance(t, torch.Tensor) and t.requires_grad:
                    t.register_hook(lambda grad: self.mark("out_grad", name))

        return hook

    def _acc(self, layer: str, tensor: str) -> Callable[[torch.Tensor], None]:
        def hook(param: torch.Tensor) -> None:
            self.mark("param", layer)
            self.step.grad_order.append(tensor)

        return hook

    def run(self, subject: Subject) -> _Step:
        self.step = _Step()
        step = self.step
        subject.model.zero_grad(set_to_none=True)
        self.sync()
        step.start = time.perf_counter()
        output = subject.model(*subject.inputs)
        self.sync()
        step.forward_end = time.perf_counter()
        loss = subject.loss_fn(output, subject.target)
        self.sync()
        step.backward_start = time.perf_counter()
        loss.backward()
        self.sync()
        step.end = time.perf_counter()
        return step

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def _attribute(step: _Step) -> tuple[dict[str, float], dict[str, float], float]:
    """Split one step's wall time into per-layer forward, backward and unattributed seconds."""
    forward: dict[str, float] = {}
    backward: dict[str, float] = {}
    fwd = [event for event in step.events if event[1] in ("pre", "post")]
    bwd = [(t, kind, layer) for t, kind, layer in step.events
           if kind not in ("pre", "post")]
    prev_of: dict[str, str] = {}
    unattributed = step.backward_start - step.forward_end  # the loss
    if fwd:
        forward[fwd[0][2]] = fwd[0][0] - step.start
        ends = [t for t, _, _ in fwd[1:]] + [step.forward_end]
        for (t, _, layer), t_next in zip(fwd, ends, strict=True):
            forward[layer] = forward.get(layer, 0.0) + t_next - t
        for (_, _, before), (_, kind, layer) in pairwise(fwd):
            if kind == "pre" and layer != before:
                prev_of.setdefault(layer, before)
    else:
        unattributed += step.forward_end - step.start
    if bwd:
        unattributed += bwd[0][0] - step.backward_start
        ends = [t for t, _, _ in bwd[1:]] + [step.end]
        for (t, kind, layer), t_next in zip(bwd, ends, strict=True):
            owner = prev_of.get(layer, layer) if kind == "in_grad" else layer
            backward[owner] = backward.get(owner, 0.0) + t_next - t
    else:
        unattributed += step.end - step.backward_start
    return forward, backward, unattributed


def _cv(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else 0.0


def _measured(subject: Subject, where: torch.device, dtype: str, warmup: int,
              repetitions: int, optimizer: str, threads: int | None) -> Workload:
    counts = _count(subject)
    names = layer_flops.parameter_names(subject.model)
    by_name = dict(subject.model.named_parameters())
    owner_of_param = {
        id(by_name[tensor]): (c.name, tensor) for c in counts for tensor, _ in c.tensors
    }
    recorder = _Recorder(subject.model, owner_of_param, where)
    steps: list[_Step] = []
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
                       steps: list[_Step], names: dict[int, str], update: dict[str, float],
                       optimizer: str, where: torch.device, dtype: str,
                       environment: dict[str, Any]) -> Workload:
    splits = [_attribute(step) for step in steps]
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
    sync = _sync(where)

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
    sync = _sync(where)
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
