"""Plot a sweep: a result against one axis, one line per combination of the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddlperf.io import write_atomic
from ddlperf.units import format_bandwidth, format_duration

MAX_LINES = 12
LABELS = {
    "throughput_samples_per_s": "throughput (samples/s)",
    "iteration_time_s": "iteration time (s)",
    "speedup": "speedup (×)",
    "scaling_efficiency": "scaling efficiency",
}


def _value_label(name: str, value: Any) -> str:
    if name == "bandwidth" and isinstance(value, (int, float)):
        return format_bandwidth(value)
    if name == "latency" and isinstance(value, (int, float)):
        return format_duration(value)
    return str(value)


def plot_sweep(rows: list[dict[str, Any]], x: str, y: str, path: str | Path) -> Path:
    """Write a PNG of ``y`` against ``x``; returns the path (written atomically)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = [k for k in rows[0] if k not in (x, y) and k not in LABELS
              and k not in ("bottleneck", "error")]
    series: dict[str, list[tuple[Any, float]]] = {}
    for row in rows:
        if row.get(y) is None:
            continue
        label = ", ".join(f"{k}={_value_label(k, row[k])}" for k in others
                          if len({str(r.get(k)) for r in rows}) > 1)
        series.setdefault(label or y, []).append((row[x], row[y]))
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, points in list(series.items())[:MAX_LINES]:
        points.sort(key=lambda p: p[0])
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    if len(series) > MAX_LINES:
        ax.set_title(f"first {MAX_LINES} of {len(series)} series")
    numeric = all(isinstance(r[x], (int, float)) for r in rows)
    if numeric and x in ("workers", "bandwidth", "batch_size"):
        ax.set_xscale("log", base=2 if x == "workers" else 10)
    ax.set_xlabel(x)
    ax.set_ylabel(LABELS.get(y, y))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return write_atomic(path, buffer.getvalue())
