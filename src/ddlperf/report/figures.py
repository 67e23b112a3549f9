"""Figures of one prediction for the HTML report: breakdown, resource busy shares, what-if
gains and a timeline excerpt of one steady-state iteration (matplotlib, Agg, no screen).

Each builder returns a matplotlib figure; :func:`data_uri` turns it into an inline PNG so the
report needs no file next to it and no network to show it.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from ddlperf.explain import Explanation
from ddlperf.predictors.simulate.tracks import TrackLog

COLORS = {"compute": "#4e79a7", "communication": "#f28e2b", "wait": "#bab0ac",
          "push": "#f28e2b", "pull": "#59a14f", "update": "#e15759", "all-reduce": "#b07aa1",
          "latency": "#9c755f"}
MAX_ROWS = 24  # timeline rows shown


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def data_uri(fig: Any, dpi: int = 110) -> str:
    """``data:image/png;base64,…`` of the figure (closed afterwards)."""
    plt = pyplot()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def breakdown_figure(e: Explanation) -> Any:
    """Per run of identical workers: compute, exposed communication and wait (stacked)."""
    plt = pyplot()
    waits = e.waits
    labels = [w.workers for w in waits]
    by_name = {w.name: w for w in e.prediction.workers}
    comm = [by_name[w.workers.split("–")[0]].communication_s for w in waits]
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.4 * len(labels)))
    left = [0.0] * len(labels)
    for name, values in (("compute", [w.compute_s for w in waits]), ("communication", comm),
                         ("wait", [w.wait_s for w in waits])):
        ax.barh(labels, values, left=left, color=COLORS[name], label=name)
        left = [a + b for a, b in zip(left, values)]
    ax.invert_yaxis()
    ax.set_xlabel("seconds per iteration")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Iteration breakdown per worker")
    return fig


def resources_figure(e: Explanation, limit: int = 12) -> Any:
    """Busy share of the iteration of the busiest resources."""
    plt = pyplot()
    loads = e.resources[:limit]
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.35 * len(loads)))
    names = [r.name for r in loads]
    shares = [100 * r.utilization for r in loads]
    colors = ["#e15759" if r.name == e.prediction.bottleneck else "#4e79a7" for r in loads]
    ax.barh(names, shares, color=colors)
    ax.set_xlim(0, max(100.0, *shares))
    ax.invert_yaxis()
    ax.set_xlabel("% of the iteration busy")
    ax.set_title("Resources (the bottleneck in red)")
    return fig


def what_if_figure(e: Explanation) -> Any:
    """Gain in samples/s of each predicted what-if (hatched: changes convergence)."""
    plt = pyplot()
    items = [w for w in e.what_ifs if w.gain is not None]
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.35 * len(items)))
    bars = ax.barh([w.title for w in items], [100 * (w.gain or 0.0) for w in items],
                   color=["#59a14f" if (w.gain or 0) >= 0 else "#e15759" for w in items])
    for bar, w in zip(bars, items):
        if w.changes_convergence:
            bar.set_hatch("//")
    ax.axvline(0, color="black", linewidth=0.8)
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("gain in samples/s (%)")
    ax.set_title("What-ifs (hatched: changes convergence)")
    return fig


def timeline_figure(log: TrackLog, path: dict[str, Any]) -> Any:
    """Operations of every stream during one steady-state iteration; the critical path's
    operations outlined in black."""
    plt = pyplot()
    begin = path["start_s"]
    end = begin + path["length_s"]
    rows = _rows(log, path["worker"])[:MAX_ROWS]
    fig, ax = plt.subplots(figsize=(9, 0.6 + 0.3 * len(rows)))
    for y, (_label, category, records) in enumerate(rows):
        spans = [(max(r[1], begin) - begin, min(r[2], end) - max(r[1], begin))
                 for r in records if r[2] > begin and r[1] < end and r[2] > r[1]]
        if not spans:
            continue
        ax.broken_barh([(s * 1e3, d * 1e3) for s, d in spans], (y - 0.4, 0.8),
                       facecolors=COLORS.get(category, "#76b7b2"), linewidth=0)
    row_of = {label: y for y, (label, _c, _r) in enumerate(rows)}
    for segment in path["segments"]:
        y = row_of.get(segment["track"])
        if y is None:
            continue
        ax.broken_barh([(segment["start_s"] * 1e3, segment["duration_s"] * 1e3)],
                       (y - 0.45, 0.9), facecolors="none", edgecolors="black", linewidth=1.2)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, path["length_s"] * 1e3)
    ax.set_xlabel(f"ms into iteration {path['iteration']} (outlined in black: the critical "
                  "path)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[k])
               for k in ("compute", "push", "update", "pull", "all-reduce")]
    ax.legend(handles, ["compute", "push", "update", "pull", "all-reduce"], fontsize=7,
              loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=5, frameon=False)
    ax.set_title("Timeline of one steady-state iteration", pad=22)
    return fig


def _rows(log: TrackLog, worker: str) -> list[tuple[str, str, list]]:
    """One row per record list: the critical worker's server first, then shards, then others."""
    server = worker.split("/")[0]
    seen: set[int] = set()
    rows: list[tuple[int, str, str, list]] = []
    for track in log.tracks:
        if id(track.records) in seen:
            continue
        seen.add(id(track.records))
        names = track.processes
        span = names[0] if len(names) == 1 else f"{names[0]}–{names[-1]}"
        mine = any(p == worker or p.split("/")[0] == server for p in names)
        rank = 0 if mine else 1 if names[0].startswith("ps") else 2
        rows.append((rank, f"{span} {track.thread}", track.category, track.records))
    rows.sort(key=lambda r: r[0])
    return [(label, category, records) for _rank, label, category, records in rows]
