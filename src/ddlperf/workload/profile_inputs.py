"""What :func:`ddlperf.workload.profile.profile` profiles, checked and made ready to run.

The options, the model with one synthetic batch and its loss (:class:`Subject`), the device to
measure on, and the torch settings (threads, TF32) held for the measurement. Imported through
:mod:`ddlperf.workload.profile`, which reports a missing torch in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_map

from ddlperf import compute
from ddlperf.errors import InputError, MissingExtraError
from ddlperf.hardware import Device
from ddlperf.workload import torch_models, zoo

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


def check_options(batch_size: int | None, warmup: int, repetitions: int, threads: int | None,
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


def measure_device(device: str | Device | None) -> torch.device:
    text = "cpu" if device is None else (device.name if isinstance(device, Device) else device)
    if text.lower() == "cpu":
        return torch.device("cpu")
    if text.lower().startswith("cuda"):
        if not torch.cuda.is_available():
            raise InputError("--device", "CUDA is not available here", "measure on --device cpu")
        return torch.device(text.lower())
    raise InputError("--device", f"cannot measure on {text!r} here",
                     "use cpu or cuda to measure, or --analytic for a catalog device")


def make_subject(model: nn.Module | str, example_input: Any, batch_size: int | None,
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


class torch_threads:
    """Set torch's intra-op thread count for the measurement and restore it afterwards."""

    def __init__(self, threads: int | None, where: torch.device) -> None:
        self.threads = threads if where.type == "cpu" else None
        self.saved = torch.get_num_threads()

    def __enter__(self) -> None:
        if self.threads is not None:
            torch.set_num_threads(self.threads)

    def __exit__(self, *exc: object) -> None:
        torch.set_num_threads(self.saved)


class matmul_precision:
    """TF32 matmuls only when asked for (``--dtype tf32`` on CUDA)."""

    def __init__(self, dtype: str) -> None:
        self.tf32 = dtype.lower() == "tf32"
        self.saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)

    def __enter__(self) -> None:
        torch.backends.cuda.matmul.allow_tf32 = self.tf32
        torch.backends.cudnn.allow_tf32 = self.tf32

    def __exit__(self, *exc: object) -> None:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self.saved


def prepare(subject: Subject, where: torch.device, dtype: str) -> None:
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
