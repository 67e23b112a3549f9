"""Readable rich tables of a Prediction (the default ``ddlperf predict`` output)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ddlperf.prediction import Prediction, WorkerResult
from ddlperf.units import format_bandwidth, format_duration, format_size

MAX_WORKER_ROWS = 16


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole > 0 else "-"


def _scenario_line(p: Prediction) -> str:
    inputs = p.inputs
    w = inputs.get("workload", {})
    c = inputs.get("cluster", {})
    s = inputs.get("strategy", {})
    ps = c.get("ps", {}).get("count", 0)
    sync = s.get("sync", "?")
    if sync == "ssp":
        sync += f"({s.get('staleness')})"
    arch = "ring all-reduce" if s.get("arch") == "allreduce" else f"PS ×{ps}"
    if s.get("arch") != "allreduce" and c.get("ps", {}).get("placement") == "colocated":
        arch += " colocated"
    if s.get("arch") == "allreduce" and s.get("allreduce") == "hierarchical":
        arch = "hierarchical all-reduce"
    if s.get("local_aggregation"):
        arch += " (local aggregation)"
    parts = [
        f"{w.get('name')} batch {w.get('batch_size')}/worker on {w.get('device') or '?'}",
        _workers_text(c),
        arch,
        sync.upper() if sync != "ssp" else f"SSP s={s.get('staleness')}",
        f"{format_bandwidth(c.get('bandwidth', 0))} links",
        f"latency {format_duration(c.get('latency', 0))}",
        f"params {format_size(w.get('parameter_bytes', 0))}",
        f"overlap {'on' if s.get('overlap', True) else 'off'}",
        f"method {p.method}",
    ]
    return " · ".join(parts)


def _workers_text(cluster: dict) -> str:
    """``8 workers`` or ``32 workers on 4 servers × 8 GPUs (150GB/s intra, 2 NICs)``."""
    if "nodes" not in cluster:
        return f"{sum(g.get('count', 1) for g in cluster.get('workers', []))} workers"
    nodes = cluster["nodes"]
    n = sum(g.get("count", 1) * g.get("gpus", 1) for g in nodes)
    shapes = []
    for g in nodes:
        extra = []
        if g.get("gpus", 1) > 1 and g.get("intra"):
            extra.append(f"{format_size(g['intra'] / 8)}/s intra")
        if g.get("nics", 1) > 1:
            extra.append(f"{g['nics']} NICs")
        shape = f"{g.get('count', 1)} servers × {g.get('gpus', 1)} GPUs"
        shapes.append(shape + (f" ({', '.join(extra)})" if extra else ""))
    racks = cluster.get("racks")
    text = f"{n} workers on " + " + ".join(shapes)
    if racks:
        text += (f", racks of {racks['servers']} ({format_bandwidth(racks['uplink'])} "
                 "uplink)")
    return text


def summary_table(p: Prediction) -> Table:
    table = Table(title="ddlperf prediction" if p.kind == "prediction" else "ddlperf measurement",
                  show_header=True, header_style="bold", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("", style="dim")
    pct = p.percentiles or {}
    it = pct.get("iteration_time_s")
    band = f"p5 {format_duration(it['p5'])} – p95 {format_duration(it['p95'])}" if it else ""
    table.add_row("iteration time", format_duration(p.iteration_time_s), band)
    table.add_row("throughput", f"{p.throughput_samples_per_s:,.1f} samples/s", "whole cluster")
    single = p.single_worker
    table.add_row("speedup", f"{p.speedup:.2f}×",
                  f"vs {single.get('worker')} alone: "
                  f"{single.get('throughput_samples_per_s', 0):,.1f} samples/s")
    table.add_row("scaling efficiency", f"{100 * p.scaling_efficiency:.1f}%",
                  "throughput / Σ standalone")
    total = p.iteration_time_s
    for key, label in (("compute", "compute"), ("communication", "exposed communication"),
                       ("wait", "synchronization wait")):
        value = p.breakdown_s.get(key, 0.0)
        table.add_row(f"  {label}", format_duration(value), _pct(value, total))
    table.add_row("bottleneck", Text(p.bottleneck, style="bold yellow"), "")
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


def worker_table(p: Prediction) -> Table:
    table = Table(title="workers", header_style="bold", title_justify="left")
    rows = _worker_rows(p.workers)
    for col in ("worker", "group", "device", "batch", "iteration", "samples/s", "compute",
                "comm", "wait"):
        table.add_column(col, justify="left" if col in ("worker", "group", "device") else "right")
    for label, w, _count in rows[:MAX_WORKER_ROWS]:
        table.add_row(label, w.group, w.device or "-", str(w.batch_size),
                      format_duration(w.iteration_time_s), f"{w.throughput_samples_per_s:,.1f}",
                      format_duration(w.compute_s), format_duration(w.communication_s),
                      format_duration(w.wait_s))
    if len(rows) > MAX_WORKER_ROWS:
        table.add_row(f"… {len(rows) - MAX_WORKER_ROWS} more rows (see --json)", *[""] * 8)
    return table


def resource_table(p: Prediction, limit: int = 6) -> Table:
    table = Table(title="busiest resources (per iteration)", header_style="bold",
                  title_justify="left")
    table.add_column("resource")
    table.add_column("busy", justify="right")
    table.add_column("utilization", justify="right")
    for r in sorted(p.resources, key=lambda r: r.utilization, reverse=True)[:limit]:
        table.add_row(r.name, format_duration(r.busy_s), f"{100 * r.utilization:.1f}%")
    return table


def render(p: Prediction, console: Console | None = None) -> None:
    """Print the scenario line, summary, worker and resource tables, and notes."""
    console = console or Console()
    parts: list[object] = [Text(_scenario_line(p), style="cyan"), summary_table(p),
                           worker_table(p)]
    if p.resources:
        parts.append(resource_table(p))
    for note in p.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    console.print(Group(*parts))  # type: ignore[arg-type]
