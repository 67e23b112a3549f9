"""The Workload type and its JSON form (``ddlperf.workload/1``).

A Workload is the single-node profile every predictor starts from: per-layer forward and
backward seconds on a reference device at one batch size, the parameter tensors each layer owns
(their gradients are what gets communicated), and the optimizer's cost per parameter byte.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ddlperf.errors import InputError
from ddlperf.io import write_atomic
from ddlperf.schema import read_structured, validate

WORKLOAD_FORMAT = "ddlperf.workload/1"


class Tensor(BaseModel):
    """A parameter tensor; its gradient has the same size and is what workers exchange."""

    model_config = ConfigDict(frozen=True, extra="allow")

    name: str = Field(min_length=1)
    bytes: int = Field(gt=0, description="size in bytes (parameters and gradients alike)")


class Layer(BaseModel):
    """One unit of compute that owns parameters (parameter-free ops are folded into it)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    name: str = Field(min_length=1)
    forward_s: float = Field(ge=0, allow_inf_nan=False, description="forward seconds, whole batch")
    backward_s: float = Field(ge=0, allow_inf_nan=False, description="backward seconds")
    tensors: tuple[Tensor, ...] = ()
    flops: float | None = Field(
        default=None, ge=0, description="forward FLOPs for the whole batch (2 per multiply-add)"
    )
    memory_bytes: float | None = Field(
        default=None, ge=0, description="forward memory traffic for the whole batch, bytes"
    )
    activation_bytes: float | None = Field(
        default=None, ge=0, description="activations kept for backward, whole batch, bytes"
    )
    kernels: list[Any] | None = Field(
        default=None, description="kernel rows per sample (ddlperf.compute), for rescaling"
    )
    forward_cv: float = Field(default=0.0, ge=0, description="coefficient of variation")
    backward_cv: float = Field(default=0.0, ge=0, description="coefficient of variation")

    @property
    def parameter_bytes(self) -> int:
        return sum(t.bytes for t in self.tensors)


class Workload(BaseModel):
    """Per-iteration work of one worker, on the device named in ``device``."""

    model_config = ConfigDict(frozen=True, extra="allow")

    format: Literal["ddlperf.workload/1"] = WORKLOAD_FORMAT
    name: str = Field(min_length=1)
    batch_size: int = Field(gt=0)
    layers: tuple[Layer, ...] = Field(min_length=1)
    update_s_per_byte: float = Field(
        default=0.0, ge=0, allow_inf_nan=False,
        description="optimizer step seconds per parameter byte on this device",
    )
    unattributed_s: float = Field(
        default=0.0, ge=0, allow_inf_nan=False,
        description="per-iteration compute no layer owns (loss, autograd, hooks)",
    )
    gradient_order: tuple[str, ...] | None = Field(
        default=None, description="tensor names in the order gradients become ready"
    )
    device: str | None = Field(default=None, description="device the times were taken for")
    accumulation: int = Field(default=1, ge=1, description="micro-batches per synchronisation")
    dtype: str = "float32"
    provenance: dict[str, Any] = Field(default_factory=lambda: {"source": "file"})

    @field_validator("format", mode="before")
    @classmethod
    def _known_format(cls, value: Any) -> Any:
        if value != WORKLOAD_FORMAT:
            raise ValueError(f"unknown format tag; expected {WORKLOAD_FORMAT!r}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        names = [t.name for layer in self.layers for t in layer.tensors]
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise ValueError(f"tensor {name!r} appears twice; each tensor belongs to one layer")
            seen.add(name)
        if self.gradient_order is not None and sorted(self.gradient_order) != sorted(names):
            raise ValueError("gradient_order must list every tensor name exactly once")
        return self

    # ---- derived views (cached: predictors call these thousands of times per second) ----

    @cached_property
    def forward_array(self) -> np.ndarray:
        return np.array([layer.forward_s for layer in self.layers], dtype=float)

    @cached_property
    def backward_array(self) -> np.ndarray:
        return np.array([layer.backward_s for layer in self.layers], dtype=float)

    @cached_property
    def compute_s(self) -> float:
        """Seconds of compute per iteration: forward + backward + unattributed."""
        return float(self.forward_array.sum() + self.backward_array.sum() + self.unattributed_s)

    @cached_property
    def parameter_bytes(self) -> int:
        return sum(layer.parameter_bytes for layer in self.layers)

    @cached_property
    def tensor_layer(self) -> dict[str, int]:
        """Index of the layer that owns each tensor."""
        return {t.name: i for i, layer in enumerate(self.layers) for t in layer.tensors}

    @cached_property
    def gradient_tensors(self) -> tuple[Tensor, ...]:
        """Tensors in gradient-ready order (given order, else reverse layer order)."""
        by_name = {t.name: t for layer in self.layers for t in layer.tensors}
        if self.gradient_order is not None:
            return tuple(by_name[name] for name in self.gradient_order)
        return tuple(t for layer in reversed(self.layers) for t in reversed(layer.tensors))

    @cached_property
    def derived_cache(self) -> dict[Any, Any]:
        """Scratch space for per-device / per-batch views computed by predictors."""
        return {}

    @property
    def flops(self) -> float | None:
        """Forward FLOPs of the whole batch, if every layer knows its FLOPs."""
        values = [layer.flops for layer in self.layers]
        return None if any(v is None for v in values) else float(sum(values))  # type: ignore[arg-type]

    # ---- transformations ----

    def scaled(self, factor: float) -> Workload:
        """All compute times multiplied by ``factor`` (e.g. 1/speed for a faster device)."""
        layers = tuple(
            layer.model_copy(
                update={
                    "forward_s": layer.forward_s * factor,
                    "backward_s": layer.backward_s * factor,
                }
            )
            for layer in self.layers
        )
        return self.with_updates(
            layers=layers,
            unattributed_s=self.unattributed_s * factor,
            update_s_per_byte=self.update_s_per_byte * factor,
        )

    def with_updates(self, **changes: Any) -> Workload:
        """A validated copy with ``changes``; cached derived views are not carried over."""
        data = {name: getattr(self, name) for name in type(self).model_fields}
        data.update(self.model_extra or {})
        data.update(changes)
        return type(self).model_validate(data)

    # ---- I/O ----

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def save(self, path: str | Path) -> Path:
        """Write atomically as ``ddlperf.workload/1`` JSON."""
        return write_atomic(path, self.to_json() + "\n")

    @classmethod
    def from_dict(cls, data: Any, field: str = "workload") -> Workload:
        if not isinstance(data, dict):
            raise InputError(field, "must be a JSON object with 'format', 'name', 'layers'")
        return validate(cls, data, prefix=field)


CLUSTER_KEYS = ("workers", "ps", "bandwidth", "latency", "goodput")


def load_workload(path: str | Path, field: str = "--workload") -> Workload:
    """Read a workload JSON file, or raise one line that says what is wrong."""
    data = read_structured(path, field)
    if isinstance(data, dict) and "layers" not in data:
        found = [k for k in (*CLUSTER_KEYS, "cluster") if k in data]
        if found:
            raise InputError(field, f"{Path(path).name} is a cluster file (it has "
                             f"'{found[0]}'), not a workload", "give it with --config")
    return Workload.from_dict(data, field=Path(path).name)
