"""``ddlperf explain`` on a terminal: the answer first, then the numbers behind it.

Sections: headline and bottleneck in words, a bar per resource (busy share of the iteration),
PS shards, waits, the critical path (simulate), what-ifs sorted by gain and how far to trust
the numbers. Every table fits 80 columns (long names wrap inside their cell).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ddlperf.explain import Explanation
from ddlperf.report.header import scenario_lines, speedup_text
from ddlperf.units import format_bandwidth, format_duration, format_size

BAR_WIDTH = 20
MAX_RESOURCES = 10
MAX_PATH_ROWS = 14


def bar(share: float, width: int = BAR_WIDTH) -> str:
    """``██████░░░░`` for a share in [0, 1] (eighth-blocks for the partial cell)."""
    share = min(max(share, 0.0), 1.0)
    eighths = round(share * width * 8)
    full, part = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[part] if part else ""
    return ("█" * full + partial).ljust(width, "░")[:width]


def _table(title: str) -> Table:
    return Table(title=title, title_justify="left", header_style="bold", box=None,
                 pad_edge=False, title_style="bold")


def resources_table(e: Explanation) -> Table:
    table = _table("Busy share of the iteration, per resource")
    table.add_column("resource", overflow="fold")
    table.add_column("busy", no_wrap=True)
    table.add_column("", justify="right", no_wrap=True)
    table.add_column("per iteration", overflow="fold")
    for r in e.resources[:MAX_RESOURCES]:
        detail = format_duration(r.busy_s)
        if r.bytes is not None and r.rate_bytes_per_s:
            detail += f", {format_size(r.bytes)} at {format_bandwidth(r.rate_bytes_per_s * 8)}"
        table.add_row(r.name, bar(r.utilization), f"{100 * r.utilization:.0f}%", detail)
    if len(e.resources) > MAX_RESOURCES:
        table.add_row(f"… {len(e.resources) - MAX_RESOURCES} more (see --json)", "", "", "")
    return table


def shards_table(e: Explanation) -> Table:
    table = _table(f"PS shards (heaviest / even share: {e.shard_imbalance:.2f})")
    table.add_column("shard")
    table.add_column("bytes", justify="right")
    table.add_column("share", justify="right")
    table.add_column("tensors", justify="right")
    table.add_column("largest tensors", overflow="fold")
    for s in e.shards:
        top = "; ".join(f"{t['name']} {format_size(t['bytes'])}" for t in s.top_tensors)
        table.add_row(s.name, format_size(s.bytes), f"{100 * s.share:.0f}%", str(s.tensors), top)
    return table


def waits_table(e: Explanation) -> Table:
    table = _table("Waits per iteration")
    table.add_column("workers", overflow="fold")
    table.add_column("compute", justify="right")
    table.add_column("wait", justify="right")
    table.add_column("", justify="right")
    table.add_column("why", overflow="fold")
    for w in e.waits:
        table.add_row(w.workers, format_duration(w.compute_s), format_duration(w.wait_s),
                      f"{100 * w.share:.0f}%", w.reason)
    return table


def critical_path_table(path: dict[str, Any]) -> Table:
    shares = ", ".join(f"{k} {100 * v / path['length_s']:.0f}%"
                       for k, v in sorted(path["by_kind_s"].items(), key=lambda kv: -kv[1]))
    table = _table(f"Critical path of iteration {path['iteration']} on {path['worker']} "
                   f"({format_duration(path['length_s'])}): {shares}")
    table.add_column("at", justify="right", no_wrap=True)
    table.add_column("for", justify="right", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("where", overflow="fold")
    table.add_column("what", overflow="fold")
    segments = path["segments"]
    shown = segments if len(segments) <= MAX_PATH_ROWS else sorted(
        sorted(segments, key=lambda s: -s["duration_s"])[:MAX_PATH_ROWS],
        key=lambda s: s["start_s"])
    for s in shown:
        what = s["what"] + (f" ({s['operations']} ops)" if s["operations"] > 1 else "")
        table.add_row(format_duration(s["start_s"]), format_duration(s["duration_s"]),
                      s["kind"], s["where"], what)
    if len(shown) < len(segments):
        table.add_row("", "", "", "", f"… {len(segments) - len(shown)} shorter segments "
                      "(see --json)")
    return table


def what_if_table(e: Explanation) -> Table:
    method = e.prediction.method
    table = _table(f"What-ifs, each re-predicted ({method}), by gain in samples/s")
    table.add_column("gain", justify="right", no_wrap=True)
    table.add_column("iteration", justify="right", no_wrap=True)
    table.add_column("what if", overflow="fold")
    table.add_column("how", overflow="fold", style="dim")
    for w in e.what_ifs:
        if w.gain is None:
            continue
        what = Text(w.title + (" *" if w.changes_convergence else ""))
        if w.bottleneck != e.prediction.bottleneck:
            what.append(f"\n→ bottleneck {w.bottleneck}", style="dim")
        table.add_row(f"{100 * w.gain:+.0f}%", format_duration(w.iteration_time_s or 0.0),
                      what, w.how)
    return table


def render(e: Explanation, console: Console | None = None) -> None:
    """Print the explanation (see the module docstring)."""
    console = console or Console()
    p = e.prediction
    parts: list[Any] = [Text(line, style="cyan") for line in scenario_lines(p)]
    headline = (f"Iteration {format_duration(p.iteration_time_s)}, "
                f"{p.throughput_samples_per_s:,.1f} samples/s, speedup {speedup_text(p.speedup)}, "
                f"scaling efficiency {100 * p.scaling_efficiency:.0f}%.")
    parts += [Text(headline, style="bold"), Text(e.bottleneck), Text("")]
    if e.resources:
        parts += [resources_table(e), Text("")]
    if e.shards:
        parts += [shards_table(e), Text("")]
    if any(w.wait_s > 0 for w in e.waits):
        parts += [waits_table(e), Text("")]
    if e.critical_path:
        parts += [critical_path_table(e.critical_path), Text("")]
    if e.what_ifs:
        parts.append(what_if_table(e))
        if any(w.changes_convergence for w in e.what_ifs if w.gain is not None):
            parts.append(Text("* changes the training algorithm (staleness): convergence per "
                              "iteration differs, so more samples/s need not mean a shorter "
                              "time to accuracy", style="dim"))
        for w in e.what_ifs:
            if w.error is not None:
                parts.append(Text(f"not predicted: {w.title}: {w.error}", style="dim"))
        parts.append(Text(""))
    parts.append(Text("How far to trust this", style="bold"))
    parts.append(Text(e.trust.get("text", "")))
    for note in p.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    console.print(Group(*parts))
