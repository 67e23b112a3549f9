"""Plot a sweep: a result against one axis, one line per combination of the others.

Axes with units (bandwidth, latency, bucket size) are placed by value, not by their text, and
labelled in the units the tables use; categorical axes (model, arch, …) keep the order given.
Against the worker count, throughput, speedup and efficiency get an ideal-scaling line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddlperf.errors import InputError
from ddlperf.hardware import parse_link_rate
from ddlperf.io import write_atomic
from ddlperf.result_keys import LOCKSTEP_KEY
from ddlperf.units import (
    format_bandwidth,
    format_duration,
    format_size,
    parse_duration,
    parse_size,
)

MAX_LINES = 12
# Results a plot can show: key → (axis label, short names accepted by --y).
RESULTS = {
    "throughput_samples_per_s": ("throughput (samples/s)", ("throughput",)),
    "iteration_time_s": ("iteration time", ("iteration_time", "time")),
    "speedup": ("speedup (×)", ()),
    "scaling_efficiency": ("scaling efficiency (%)", ("efficiency",)),
}
FORMATS = {".png": "png", ".pdf": "pdf", ".svg": "svg"}
# Axes given with units: parsed to base units so that they are placed (and sorted) by value.
PARSERS: dict[str, Callable[[Any, str], float]] = {
    "bandwidth": parse_link_rate, "latency": parse_duration, "bucket_size": parse_size}
FORMATTERS: dict[str, Callable[[float], str]] = {
    "bandwidth": format_bandwidth, "latency": format_duration, "bucket_size": format_size,
    "iteration_time_s": format_duration}
LOG_AXES = {"workers": 2, "batch_size": 2, "bandwidth": 10, "latency": 10, "bucket_size": 10}


def result_key(y: str) -> str:
    """The result ``--y`` names (full key or short name), or a one-line error."""
    for key, (_label, aliases) in RESULTS.items():
        if y == key or y in aliases:
            return key
    names = ", ".join(a[0] if a else k for k, (_l, a) in RESULTS.items())
    raise InputError("--y", f"{y!r} is not a result", f"use one of {names}")


def plot_format(path: str | Path) -> str:
    """The file format ``path`` asks for (by suffix), or a one-line error."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise InputError("--plot", f"cannot write {Path(path).suffix or 'a file without suffix'}"
                         f" ({Path(path).name})", "name it .png, .pdf or .svg")
    return fmt


def axis_value(name: str, value: Any) -> Any:
    """A swept value as a number where the axis has units (``10Gbps`` → 1e10), else as is."""
    parse = PARSERS.get(name)
    if parse is None or value is None or isinstance(value, bool):
        return value
    try:
        return parse(value, f"--{name.replace('_', '-')}")
    except InputError:
        return value


def value_label(name: str, value: Any) -> str:
    """A value as the tables show it (``1e10`` → ``10Gbps``)."""
    value = axis_value(name, value)
    if name in FORMATTERS and isinstance(value, (int, float)) and not isinstance(value, bool):
        return FORMATTERS[name](value)
    return str(value)


def series(
    rows: list[dict[str, Any]], x: str, y: str
) -> dict[str, list[tuple[Any, float, float | None]]]:
    """Label → (x, y, one worker's throughput) points: one series per combination of the
    other swept axes.

    Numeric x values are sorted by value; text values keep the order they were given in.
    Rows without a result (errors) are left out.
    """
    others = [k for k in rows[0]
              if k not in (x, "error", "bottleneck", LOCKSTEP_KEY) and k not in RESULTS]
    varying = [k for k in others if len({str(r.get(k)) for r in rows}) > 1]
    out: dict[str, list[tuple[Any, float, float | None]]] = {}
    for row in rows:
        if row.get(y) is None:
            continue
        label = ", ".join(f"{k}={value_label(k, row.get(k))}" for k in varying)
        value = axis_value(x, row[x])
        if not _is_number(value):
            value = str(value)
        speedup = row.get("speedup")
        single = row["throughput_samples_per_s"] / speedup if speedup else None
        out.setdefault(label or RESULTS[y][0], []).append((value, row[y], single))
    for points in out.values():
        if all(_is_number(p[0]) for p in points):
            points.sort(key=lambda p: p[0])
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def sweep_figure(rows: list[dict[str, Any]], x: str, y: str, title: str | None = None) -> Any:
    """The matplotlib Figure of ``y`` against ``x`` (Agg backend; nothing is shown)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator, PercentFormatter

    lines = series(rows, x, y)
    fig, ax = plt.subplots(figsize=(8, 5))
    scale = 100.0 if y == "scaling_efficiency" else 1.0
    shown = list(lines.items())[:MAX_LINES]
    colors = []
    for label, points in shown:
        (line,) = ax.plot([p[0] for p in points], [p[1] * scale for p in points], marker="o",
                          label=label)
        colors.append(line.get_color())
    if x == "workers" and y in ("throughput_samples_per_s", "speedup", "scaling_efficiency"):
        _ideal(ax, y, shown, colors)
    xs = sorted({p[0] for _l, points in shown for p in points if _is_number(p[0])})
    if xs and len(xs) == len({p[0] for _l, pts in shown for p in pts}):
        if x in LOG_AXES and xs[0] > 0:
            ax.set_xscale("log", base=LOG_AXES[x])
        if len(xs) <= 16:
            ax.xaxis.set_major_locator(FixedLocator(xs))
            ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(
            lambda v, _pos: value_label(x, v) if x in FORMATTERS else f"{v:g}"))
    if y == "iteration_time_s":
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: format_duration(v)))
    elif y == "scaling_efficiency":
        ax.yaxis.set_major_formatter(PercentFormatter())
    elif y == "throughput_samples_per_s":
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    heading = f"{RESULTS[y][0]} vs {x.replace('_', ' ')}"
    if title:
        heading = f"{title}\n{heading}"
    if len(lines) > MAX_LINES:
        heading += f" (first {MAX_LINES} of {len(lines)} series)"
    ax.set_title(heading, fontsize=10)
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel(RESULTS[y][0])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    plt.close(fig)
    return fig


def _ideal(ax: Any, y: str, shown: list[tuple[str, list[tuple[Any, float, float]]]],
           colors: list[str]) -> None:
    """Linear scaling from one worker: N × its throughput, speedup N, efficiency 100%."""
    ns = sorted({p[0] for _l, points in shown for p in points if _is_number(p[0])})
    if not ns:
        return
    style = {"linestyle": "--", "linewidth": 1, "color": "0.5"}
    if y == "speedup":
        ax.plot(ns, ns, label="ideal (linear)", **style)
    elif y == "scaling_efficiency":
        ax.plot(ns, [100.0] * len(ns), label="ideal (100%)", **style)
    else:
        for i, ((_label, points), color) in enumerate(zip(shown, colors)):
            one = next((single for _x, _y, single in points if single), None)
            if one is None:
                continue
            ax.plot(ns, [n * one for n in ns], color=color, linestyle="--", linewidth=1,
                    alpha=0.6, label="ideal (N × one worker)" if i == 0 else None)


def plot_sweep(rows: list[dict[str, Any]], x: str, y: str, path: str | Path,
               title: str | None = None) -> Path:
    """Write ``y`` against ``x`` as PNG, PDF or SVG (by suffix), atomically; returns the path."""
    import io

    fmt = plot_format(path)
    key = result_key(y)
    fig = sweep_figure(rows, x, key, title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=110)
    return write_atomic(path, buffer.getvalue())
