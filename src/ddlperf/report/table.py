"""Readable tables of a Prediction or Measurement (the default ``predict``/``measure`` output).

They fit the console's width (80 columns in a pipe): what does not fit is dropped in a fixed
order and named, numbers are never cut. Everything is also in ``--json``.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ddlperf.prediction import Prediction, WorkerResult
from ddlperf.report.fit import Col, dropped_line, fit_table
from ddlperf.report.header import device_only, scenario_lines, speedup_note, speedup_text
from ddlperf.result_keys import LOCKSTEP_KEY
from ddlperf.units import format_duration

MAX_WORKER_ROWS = 16


def percent(share: float) -> str:
    """``0.182`` → ``18.2%``; small non-zero shares keep two significant digits."""
    value = 100 * share
    if value == 0 or abs(value) >= 0.1:
        return f"{value:.1f}%"
    return f"{value:.2g}%"


def samples_per_s(value: float) -> str:
    return f"{value:,.1f}"


def summary_table(p: Prediction, width: int) -> Table:
    title = (f"ddlperf prediction (method {p.method})" if p.kind == "prediction"
             else "ddlperf measurement")
    pct = p.percentiles or {}
    it = pct.get("iteration_time_s")
    band = f"p5 {format_duration(it['p5'])} – p95 {format_duration(it['p95'])}" if it else ""
    mean = (p.uncertainty or {}).get("iteration_time_s")
    if mean and p.iteration_time_s > 0:  # a measurement: how sure its mean is
        sure = f"mean ±{100 * mean['half_width_s'] / p.iteration_time_s:.1f}% (95%)"
        band = f"{sure}, {band}" if band else sure
    lockstep = (p.arrangement or {}).get(LOCKSTEP_KEY)
    if lockstep:  # ASP of identical workers: the arrangement measured runs took on some clusters
        together = (p.arrangement or {}).get("lockstep_of") == "server_gpus"
        steps = f"{'GPUs together' if together else 'in lockstep'} {format_duration(lockstep)}"
        band = f"{band}, {steps}" if band else steps
    single = p.single_worker
    total = p.iteration_time_s
    rows = [
        ("iteration time", format_duration(p.iteration_time_s), band),
        ("throughput", f"{samples_per_s(p.throughput_samples_per_s)} samples/s",
         "whole cluster"),
        ("speedup", speedup_text(p.speedup),
         f"vs {single.get('worker')} alone: "
         f"{samples_per_s(single.get('throughput_samples_per_s', 0))} samples/s"),
        ("scaling efficiency", percent(p.scaling_efficiency), "throughput / Σ standalone"),
    ]
    for key, label in (("compute", "compute"), ("communication", "exposed communication"),
                       ("wait", "synchronization wait")):
        value = p.breakdown_s.get(key, 0.0)
        rows.append((f"  {label}", format_duration(value),
                     percent(value / total) if total > 0 else "-"))
    rows.append(("bottleneck", p.bottleneck, ""))
    table, _ = fit_table([Col("metric", "left"), Col("value"),
                          Col("", "left", wrap=True, style="dim")], rows, width, title)
    return table


def _worker_rows(workers: list[WorkerResult]) -> list[tuple[str, WorkerResult, int]]:
    """Collapse runs of identical workers (same group and numbers) into one row."""
    rows: list[tuple[str, WorkerResult, int]] = []
    for w in workers:
        if rows:
            _label, first, count = rows[-1]
            same = (first.group, first.iteration_time_s, first.compute_s, first.wait_s) == (
                w.group, w.iteration_time_s, w.compute_s, w.wait_s)
            if same:
                rows[-1] = (_span(first.name, w.name), first, count + 1)
                continue
        rows.append((w.name, w, 1))
    return rows


def _span(first: str, last: str) -> str:
    """``w0–w7``; whole servers ``node0–3`` (all their GPUs); ``node0/gpu1–7``;
    ``node0/gpu5–node1/gpu2``."""
    if "/" not in first:
        return f"{first}–{last}"
    (server_a, gpu_a), (server_b, gpu_b) = first.split("/"), last.split("/")
    if server_a == server_b:
        return f"{server_a}/{gpu_a}–{gpu_b[3:]}"
    if gpu_a == "gpu0":  # whole servers (the scenario line says how many GPUs each)
        return f"{server_a}–{server_b[4:]}"
    return f"{first}–{last}"


def worker_table(p: Prediction, width: int) -> tuple[Table, list[str]]:
    rows = _worker_rows(list(p.workers))
    cells = [[label, w.group, device_only(w.device), str(w.batch_size),
              format_duration(w.iteration_time_s), samples_per_s(w.throughput_samples_per_s),
              format_duration(w.compute_s), format_duration(w.communication_s),
              format_duration(w.wait_s)] for label, w, _count in rows[:MAX_WORKER_ROWS]]
    if len(rows) > MAX_WORKER_ROWS:
        cells.append([f"… {len(rows) - MAX_WORKER_ROWS} more", *[""] * 8])
    columns = [Col("worker", "left"), Col("group", "left", drop=3), Col("device", "left", drop=2),
               Col("batch", drop=1), Col("iteration"), Col("samples/s"), Col("compute"),
               Col("comm"), Col("wait")]
    if {w.group for _l, w, _c in rows} == {"w"}:  # unnamed groups: the column says nothing
        columns.pop(1)
        cells = [[c for i, c in enumerate(row) if i != 1] for row in cells]
    return fit_table(columns, cells, width, "workers")


def resource_table(p: Prediction, width: int, limit: int = 6) -> Table:
    busiest = sorted(p.resources, key=lambda r: r.utilization, reverse=True)[:limit]
    rows = [(r.name, format_duration(r.busy_s), percent(r.utilization)) for r in busiest]
    table, _ = fit_table([Col("resource", "left"), Col("busy"), Col("utilization")], rows,
                         width, "busiest resources (per iteration)")
    return table


def render(p: Prediction, console: Console | None = None) -> None:
    """Print the scenario lines, summary, worker and resource tables, and notes."""
    console = console or Console()
    width = console.width
    parts: list[object] = [Text(line, style="cyan") for line in scenario_lines(p)]
    workers, dropped = worker_table(p, width)
    parts += [summary_table(p, width), workers]
    if p.resources:
        parts.append(resource_table(p, width))
    slower = speedup_note(p)
    hidden = dropped_line(dropped)
    for note in [*p.notes, *([slower] if slower else []), *([hidden] if hidden else [])]:
        parts.append(Text(f"note: {note}", style="dim"))
    console.print(Group(*parts))  # type: ignore[arg-type]
