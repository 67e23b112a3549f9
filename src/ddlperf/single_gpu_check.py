"""Single-GPU compute against published numbers: per-row error, median and worst.

Rows come from a YAML file (``scenarios/published_single_gpu.yaml``): zoo model, catalog
device, batch, dtype, optional math, and the published samples/s (``published``) or seconds
per iteration (``published_s``). The prediction is one device alone (forward + backward +
optimizer step of the kernel model), as in :func:`ddlperf.workload.zoo.single_device_throughput`.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ddlperf.errors import InputError
from ddlperf.schema import read_structured
from ddlperf.workload import zoo

REQUIRED = ("id", "model", "device", "batch", "dtype")


def check_rows(path: str | Path) -> list[dict[str, Any]]:
    """One dict per row: the row's fields, ``published`` and ``predicted`` samples/s, error."""
    data = read_structured(path, "--rows")
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise InputError(str(path), "needs a non-empty 'rows' list")
    results = []
    for i, row in enumerate(rows):
        missing = [k for k in REQUIRED if k not in row]
        if missing or ("published" not in row and "published_s" not in row):
            name = missing[0] if missing else "published"
            raise InputError(f"rows[{i}].{name}", "is missing", "see the file's other rows")
        published = row.get("published") or row["batch"] / float(row["published_s"])
        predicted = zoo.single_device_throughput(row["model"], row["device"], row["batch"],
                                                 row["dtype"], row.get("math"))
        results.append({**row, "published": float(published), "predicted": predicted,
                        "error": predicted / float(published) - 1.0})
    return results


def summary(results: list[dict[str, Any]]) -> dict[str, float]:
    """Median and largest absolute error (fractions)."""
    errors = [abs(r["error"]) for r in results]
    return {"median_abs_error": statistics.median(errors), "max_abs_error": max(errors)}
