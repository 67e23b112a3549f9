"""The scenario matrix file of ``ddlperf validate`` (YAML): its schema and reading it.

``defaults:`` holds the same keys as each scenario; a scenario names one workload source
(a zoo ``model``, a ``workload`` JSON or a ``synthetic`` block of layers).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ddlperf.errors import InputError
from ddlperf.schema import load_named_file
from ddlperf.workload import Workload

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
SOURCE_KEYS = ("model", "workload", "synthetic")


class SyntheticLayer(BaseModel):
    """``count`` identical layers: forward/backward milliseconds and the tensors each owns."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, min_length=1)
    count: int = Field(default=1, ge=1, le=1000)
    forward_ms: float = Field(ge=0, allow_inf_nan=False)
    backward_ms: float = Field(ge=0, allow_inf_nan=False)
    tensor_mb: float | list[float] = Field(
        default_factory=list, description="MB (10⁶ bytes) of each parameter tensor it owns")
    cv: float = Field(default=0.0, ge=0, le=3, allow_inf_nan=False,
                      description="coefficient of variation of its forward and backward times")

    @field_validator("tensor_mb")
    @classmethod
    def _sizes(cls, value: float | list[float]) -> float | list[float]:
        for size in value if isinstance(value, list) else [value]:
            if not math.isfinite(size) or size < 0:
                raise ValueError(f"tensor sizes must be finite and ≥ 0 MB, got {size!r}")
        return value

    def sizes(self) -> list[int]:
        values = self.tensor_mb if isinstance(self.tensor_mb, list) else [self.tensor_mb]
        return [round(mb * 1e6) for mb in values if round(mb * 1e6) > 0]


class Synthetic(BaseModel):
    """A hand-made workload (emulated device time): layers in forward order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="synthetic", min_length=1)
    batch_size: int = Field(default=32, gt=0)
    device: str | None = Field(default=None, description="label only (what the times stand for)")
    unattributed_ms: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    update_ns_per_byte: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    layers: list[SyntheticLayer] = Field(min_length=1)

    def workload(self) -> Workload:
        layers = []
        for spec in self.layers:
            for _ in range(spec.count):
                i = len(layers)
                name = spec.name if spec.name and spec.count == 1 else (
                    f"{spec.name}{len(layers)}" if spec.name else f"l{i}")
                layers.append({
                    "name": name, "forward_s": spec.forward_ms / 1e3,
                    "backward_s": spec.backward_ms / 1e3,
                    "forward_cv": spec.cv, "backward_cv": spec.cv,
                    "tensors": [{"name": f"{name}.t{j}", "bytes": b}
                                for j, b in enumerate(spec.sizes())],
                })
        if not any(layer["tensors"] for layer in layers):
            raise InputError("synthetic.layers", "no layer owns a tensor (tensor_mb)",
                             "give at least one layer a tensor_mb > 0")
        data: dict[str, Any] = {
            "format": "ddlperf.workload/1", "name": self.name, "batch_size": self.batch_size,
            "layers": layers, "unattributed_s": self.unattributed_ms / 1e3,
            "update_s_per_byte": self.update_ns_per_byte * 1e-9,
            "provenance": {"source": "synthetic (ddlperf validate)"},
        }
        if self.device:
            data["device"] = self.device
        return Workload.from_dict(data, field="synthetic")


class Params(BaseModel):
    """Scenario parameters; ``defaults:`` holds the same keys as each scenario."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    note: str | None = Field(default=None, description="what the scenario checks (free text)")
    model: str | None = Field(default=None, description="zoo model")
    workload: str | None = Field(default=None, description="workload JSON, relative to the file")
    synthetic: Synthetic | None = None
    batch_size: int | None = Field(default=None, gt=0)
    device: str | None = None
    workers: int | None = Field(default=None, ge=1)
    ps: int | None = Field(default=None, ge=0)
    placement: Literal["dedicated", "colocated"] | None = None
    arch: Literal["ps", "allreduce"] | None = None
    sync: Literal["bsp", "asp", "ssp"] | None = None
    staleness: int | None = Field(default=None, ge=0)
    sharding: Literal["round_robin", "greedy", "even"] | None = None
    overlap: bool | None = None
    bucket_size: str | float | None = None
    accumulation: int | None = Field(default=None, ge=1,
                                     description="micro-batches per synchronisation")
    bandwidth: str | float | None = None
    latency: str | float | None = None
    cluster: dict[str, Any] | None = None
    gpus_per_node: int | None = Field(default=None, ge=1, description="GPUs per server")
    intra: str | float | None = Field(default=None, description="intra-node fabric per GPU")
    nics: int | None = Field(default=None, ge=1)
    rack_size: int | None = Field(default=None, ge=1, description="servers per rack")
    rack_uplink: str | float | None = None
    allreduce: Literal["ring", "hierarchical"] | None = None
    local_aggregation: bool | None = None
    compute: Literal["emulated", "real"] | None = None
    cpu_quota: dict[str, float] | None = None
    iterations: int | None = Field(default=None, ge=1, le=100_000)
    warmup: int | None = Field(default=None, ge=0, le=100_000)
    timeout: float | None = Field(default=None, ge=1, le=86_400)
    probe_seconds: float | None = Field(default=None, gt=0, le=60)
    profile_repetitions: int | None = Field(default=None, ge=1, le=1000)

    def given(self) -> dict[str, Any]:
        """The keys the file set (objects kept as they are)."""
        return {key: getattr(self, key) for key in self.model_fields_set}


class ScenarioEntry(Params):
    name: str = Field(pattern=NAME_PATTERN, max_length=80)


class MatrixFile(BaseModel):
    """``defaults:`` (optional) and ``scenarios:`` (a list; each needs a unique ``name``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str | None = None
    description: str | None = None
    findings: str | None = Field(
        default=None, description="Markdown: what the errors show (published as a section)")
    defaults: Params = Params()
    scenarios: list[ScenarioEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> MatrixFile:
        seen: set[str] = set()
        for entry in self.scenarios:
            if entry.name in seen:
                raise ValueError(f"scenario name {entry.name!r} appears twice")
            seen.add(entry.name)
        return self


def load_matrix(path: str | Path, field: str = "--matrix") -> MatrixFile:
    """Read and check a matrix file; any problem is one :class:`InputError` naming the key."""
    return load_named_file(path, field, MatrixFile, "scenarios",
                           "'scenarios:' (and 'defaults:')")
