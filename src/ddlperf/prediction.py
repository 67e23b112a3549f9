"""Result types shared by predictors and measurements, with one JSON shape.

Keys and units (also in the README):
- ``iteration_time_s``: mean over workers of each worker's steady-state step period (s).
- ``throughput_samples_per_s``: Σ_i batch_i / iteration_time_i over all workers.
- ``speedup``: cluster throughput / throughput of the fastest worker alone, no communication.
- ``scaling_efficiency``: cluster throughput / Σ_i (worker i's throughput alone).
- ``breakdown_s``: mean over workers of compute, exposed communication and sync wait (s).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class WorkerResult:
    """One worker's steady state; compute + communication + wait = iteration time."""

    name: str
    group: str
    device: str | None
    batch_size: int
    iteration_time_s: float
    throughput_samples_per_s: float
    compute_s: float
    communication_s: float
    wait_s: float


@dataclass(frozen=True)
class ResourceUse:
    """A link or processor: seconds busy per iteration and its utilization (busy / period)."""

    name: str
    busy_s: float
    utilization: float


@dataclass
class Prediction:
    """What a predictor (or, with ``kind='measurement'``, a real run) says about a scenario."""

    method: str
    iteration_time_s: float
    throughput_samples_per_s: float
    speedup: float
    scaling_efficiency: float
    bottleneck: str
    breakdown_s: dict[str, float]
    workers: list[WorkerResult]
    single_worker: dict[str, Any]
    resources: list[ResourceUse] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    percentiles: dict[str, dict[str, float]] | None = None
    kind: str = "prediction"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["percentiles"] is None:
            del data["percentiles"]
        return data

    def summary(self) -> dict[str, Any]:
        """The headline numbers only (for tables and sweeps)."""
        return {
            "iteration_time_s": self.iteration_time_s,
            "throughput_samples_per_s": self.throughput_samples_per_s,
            "speedup": self.speedup,
            "scaling_efficiency": self.scaling_efficiency,
            "bottleneck": self.bottleneck,
        }
