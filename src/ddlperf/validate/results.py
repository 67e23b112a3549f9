"""The results of a validation run: ``results.json`` / ``.csv`` / ``validation.png`` in the
output directory, written atomically after every scenario, and read back."""

from __future__ import annotations

import json
import math
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddlperf.errors import InputError
from ddlperf.io import prepare_output_dir, write_atomic
from ddlperf.validate.compare import summarize

#: Called with one event dict per step of a validation run (the CLI draws its bars from them).
Progress = Callable[[dict[str, Any]], None]

RESULTS_FORMAT = "ddlperf.validation/1"


@dataclass
class ValidationRun:
    """What :func:`validate` returns (and writes as ``OUT/results.json``)."""

    out: Path
    matrix: str
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"format": RESULTS_FORMAT, **self.meta, "matrix": self.matrix,
                "summary": self.summary, "scenarios": self.rows}


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {"cores": os.cpu_count(), "kernel": platform.release(),
                            "python": platform.python_version()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import torch

        info["torch"] = torch.__version__
    except ModuleNotFoundError:
        pass
    return info


def prepare_out(out: str | Path, resume: bool) -> Path:
    taken = () if resume else ("results.json",)
    return prepare_output_dir(out, "--out", taken, "validation results",
                              "add --resume to continue it, or choose a new directory")


def previous_rows(out: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads((out / "results.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    if data.get("format") != RESULTS_FORMAT:
        return {}
    return {r["name"]: r for r in data.get("scenarios", []) if isinstance(r, dict)}


def previous_runtime(out: Path) -> float:
    try:
        data = json.loads((out / "results.json").read_text())
        return float(data.get("runtime_s") or 0.0)
    except (OSError, ValueError, TypeError):
        return 0.0


def write_results(run: ValidationRun, plot: bool = True) -> None:
    """``results.json``, ``results.csv`` and ``validation.png`` in ``run.out``, atomically."""
    from ddlperf.report.validation_report import csv_text, plot_validation

    write_atomic(run.out / "results.json",
                 json.dumps(clean_json(run.to_dict()), indent=1, allow_nan=False) + "\n")
    write_atomic(run.out / "results.csv", csv_text(run.rows))
    if plot and any(r.get("status") == "ok" for r in run.rows):
        plot_validation(run.rows, run.out / "validation.png", run.summary)


def clean_json(value: Any) -> Any:
    """NaN/inf → None so results.json stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value


def load_results(path: str | Path, field: str = "--results") -> ValidationRun:
    """Read ``results.json`` (or a directory holding it) back."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    if not p.exists():
        raise InputError(field, f"no validation results at {str(p)!r}",
                         "run ddlperf validate first")
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        raise InputError(field, f"{str(p)!r} is not a readable results.json") from None
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise InputError(field, f"{str(p)!r} is not a {RESULTS_FORMAT} file")
    meta = {k: v for k, v in data.items() if k not in ("format", "matrix", "summary",
                                                       "scenarios")}
    rows = list(data.get("scenarios", []))
    return ValidationRun(p.parent, str(data.get("matrix", "")), rows, summarize(rows), meta)
