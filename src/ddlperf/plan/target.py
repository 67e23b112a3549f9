"""What a plan must reach: a throughput, or a number of samples before a deadline.

Throughput target: a candidate meets it when its predicted samples/s is at least the target;
its cost is its price per hour. Deadline target: the job is ``samples`` samples (epochs × data
set size); a candidate meets it when samples / throughput ≤ deadline, and its cost is that
time × its price per hour. A budget caps the price per hour (throughput target) or the cost of
the job (deadline target).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ddlperf.errors import InputError
from ddlperf.units import format_long_duration


@dataclass(frozen=True)
class Target:
    throughput: float | None = None  # samples/s
    deadline_s: float | None = None
    samples: float | None = None
    budget: float | None = None  # per hour (throughput target) or per job (deadline target)

    def __post_init__(self) -> None:
        if (self.throughput is None) == (self.deadline_s is None):
            raise InputError("--throughput", "give a target: either --throughput or --deadline",
                             "e.g. --throughput 5000, or --deadline 8h --epochs 90 "
                             "--dataset-size 1281167")
        for name, value in (("--throughput", self.throughput), ("--deadline", self.deadline_s),
                            ("--samples", self.samples), ("--budget", self.budget)):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise InputError(name, f"must be a positive number, got {value!r}")
        if self.deadline_s is not None and self.samples is None:
            raise InputError("--deadline", "needs the size of the job",
                             "add --samples N, or --epochs E with --dataset-size N")

    @property
    def kind(self) -> str:
        return "throughput" if self.throughput is not None else "deadline"

    def measures(self, row: dict[str, Any]) -> dict[str, Any]:
        """``meets``, ``job_s`` and ``cost`` (per hour, or of the job) of a predicted row."""
        throughput = row.get("throughput_samples_per_s")
        price = row["price_per_hour"]
        if not throughput:
            return {"meets": False, "job_s": None, "cost": None}
        if self.throughput is not None:
            meets = throughput >= self.throughput
            cost = price
            job = None
        else:
            job = self.samples / throughput  # type: ignore[operator]
            meets = job <= self.deadline_s  # type: ignore[operator]
            cost = price * job / 3600.0
        within = self.budget is None or cost <= self.budget
        return {"meets": bool(meets and within), "job_s": job, "cost": cost,
                "within_budget": within}

    def describe(self) -> str:
        if self.throughput is not None:
            text = f"at least {self.throughput:,.0f} samples/s"
        else:
            text = (f"{self.samples:,.0f} samples within "  # type: ignore[str-format]
                    f"{format_long_duration(self.deadline_s)}")  # type: ignore[arg-type]
        if self.budget is not None:
            text += f", budget {self.budget:,.2f}" + (
                " per hour" if self.throughput is not None else " for the job")
        return text
