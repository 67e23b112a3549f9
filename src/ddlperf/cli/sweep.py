"""``ddlperf sweep``: predict a grid of scenarios; a table, CSV, JSON or a plot."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ddlperf.cli.app import app
from ddlperf.cli.common import console, handle_input_errors, print_json
from ddlperf.errors import InputError
from ddlperf.io import check_writable, write_atomic
from ddlperf.units import format_bandwidth, format_duration


def _list(text: str | None, field: str, kind: type = str) -> list[Any] | None:
    """``1,2,4`` → [1, 2, 4]; ``true,false`` for booleans."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise InputError(field, "has no values", "give a comma-separated list, e.g. 1,2,4")
    try:
        if kind is bool:
            table = {"true": True, "on": True, "yes": True, "false": False, "off": False,
                     "no": False}
            return [table[t.lower()] for t in items]
        return [kind(t) for t in items]
    except (ValueError, KeyError):
        raise InputError(field, f"cannot read {text!r}",
                         f"give a comma-separated list of {kind.__name__} values") from None


CHOICES = {
    "arch": ("ps", "allreduce"), "sync": ("bsp", "asp", "ssp"),
    "allreduce": ("ring", "hierarchical"),
    "sharding": ("round_robin", "greedy", "even"), "placement": ("dedicated", "colocated"),
    "dtype": ("fp32", "tf32", "fp16", "bf16"), "grad_dtype": ("fp32", "tf32", "fp16", "bf16"),
    "math": ("default", "tf32", "ieee"),
}


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key == "bandwidth" and isinstance(value, (int, float)):
        return format_bandwidth(value)
    if key in ("latency", "iteration_time_s") and isinstance(value, (int, float)):
        return format_duration(value)
    if key == "throughput_samples_per_s":
        return f"{value:,.1f}"
    if key == "scaling_efficiency":
        return f"{100 * value:.1f}%"
    if key == "speedup":
        return f"{value:.2f}×"
    return str(value)


@app.command()
@handle_input_errors
def sweep(
    model: Annotated[str | None, typer.Option(help="zoo models, comma-separated; default resnet50")] = None,
    workload: Annotated[Path | None, typer.Option(help="workload JSON instead of --model")] = None,
    batch_size: Annotated[str | None, typer.Option(help="e.g. 16,32,64")] = None,
    device: Annotated[str | None, typer.Option(help="catalog devices, e.g. V100,A100")] = None,
    dtype: Annotated[str | None, typer.Option(help="compute dtypes, e.g. fp32,fp16")] = None,
    math: Annotated[str | None, typer.Option(help="fp32 math modes: default,tf32,ieee")] = None,
    grad_dtype: Annotated[str | None, typer.Option(help="gradient dtypes, e.g. fp32,fp16")] = None,
    accumulation: Annotated[str | None, typer.Option(help="micro-batches per sync, e.g. 1,4")] = None,
    workers: Annotated[str | None, typer.Option(help="e.g. 1,2,4,8,16")] = None,
    ps: Annotated[str | None, typer.Option(help="PS shards, e.g. 1,2,4")] = None,
    placement: Annotated[str | None, typer.Option(help="dedicated,colocated")] = None,
    arch: Annotated[str | None, typer.Option(help="ps,allreduce")] = None,
    sync: Annotated[str | None, typer.Option(help="bsp,asp,ssp")] = None,
    staleness: Annotated[str | None, typer.Option(help="SSP bounds, e.g. 1,4")] = None,
    sharding: Annotated[str | None, typer.Option(help="round_robin,greedy,even")] = None,
    overlap: Annotated[str | None, typer.Option(help="on,off")] = None,
    bucket_size: Annotated[str | None, typer.Option(help="e.g. 10MB,25MiB")] = None,
    bandwidth: Annotated[str | None, typer.Option(help="e.g. 1Gbps,10Gbps,25GbE")] = None,
    latency: Annotated[str | None, typer.Option(help="e.g. 5us,50us")] = None,
    goodput: Annotated[float | None, typer.Option(help="payload share of the line rate")] = None,
    config: Annotated[Path | None, typer.Option(help="cluster YAML for the fixed part")] = None,
    gpus_per_node: Annotated[str | None, typer.Option(help="GPUs per server, e.g. 1,4,8")] = None,
    intra: Annotated[str | None, typer.Option(help="fabrics, e.g. PCIe3,NVLink2")] = None,
    nics: Annotated[str | None, typer.Option(help="NICs per server, e.g. 1,2")] = None,
    rack_size: Annotated[str | None, typer.Option(help="servers per rack, e.g. 4,8")] = None,
    rack_uplink: Annotated[str | None, typer.Option(help="rack uplinks, e.g. 40Gbps,100Gbps")] = None,
    allreduce: Annotated[str | None, typer.Option(help="ring,hierarchical")] = None,
    local_aggregation: Annotated[str | None, typer.Option(help="on,off (PS on servers)")] = None,
    method: Annotated[str, typer.Option(help="analytic or simulate")] = "analytic",
    jobs: Annotated[int, typer.Option(help="processes (0 = one per core)")] = 0,
    x: Annotated[str, typer.Option(help="axis for the plot's x")] = "workers",
    y: Annotated[str, typer.Option(help="result for the plot's y")] = "throughput_samples_per_s",
    csv_path: Annotated[Path | None, typer.Option("--csv", help="write the rows as CSV")] = None,
    plot: Annotated[Path | None, typer.Option(help="write a PNG of --y against --x")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print the rows as JSON")] = False,
) -> None:
    """Predict every combination of the comma-separated values; one row per scenario."""
    from ddlperf.sweep import columns
    from ddlperf.sweep import sweep as run_sweep

    for path, flag in ((csv_path, "--csv"), (plot, "--plot")):
        if path is not None:
            check_writable(path, flag)
    axes: dict[str, list[Any]] = {}
    for name, text, kind in (
        ("model", model, str), ("batch_size", batch_size, int), ("device", device, str),
        ("dtype", dtype, str), ("math", math, str), ("grad_dtype", grad_dtype, str),
        ("accumulation", accumulation, int),
        ("workers", workers, int), ("ps", ps, int), ("placement", placement, str),
        ("arch", arch, str), ("sync", sync, str), ("staleness", staleness, int),
        ("sharding", sharding, str), ("overlap", overlap, bool),
        ("bucket_size", bucket_size, str), ("bandwidth", bandwidth, str),
        ("latency", latency, str), ("gpus_per_node", gpus_per_node, int),
        ("intra", intra, str), ("nics", nics, int), ("rack_size", rack_size, int),
        ("rack_uplink", rack_uplink, str), ("allreduce", allreduce, str),
        ("local_aggregation", local_aggregation, bool),
    ):
        flag = f"--{name.replace('_', '-')}"
        values = _list(text, flag, kind)
        for value in values or ():
            if name in CHOICES and value not in CHOICES[name]:
                raise InputError(flag, f"unknown value {value!r}",
                                 f"use {', '.join(CHOICES[name])}")
        if values is not None:
            axes[name] = values
    if not axes:
        axes["workers"] = [1, 2, 4, 8, 16, 32]
    fixed: dict[str, Any] = {"workload": workload, "config": config, "goodput": goodput}
    if workload is not None and "model" in axes:
        raise InputError("--model", "give either --model or --workload, not both")
    rows = run_sweep(axes, method=method, jobs=jobs or None, **fixed)
    if x not in rows[0]:
        raise InputError("--x", f"{x!r} is not a swept axis", f"use one of {list(axes)}")
    cols = columns(rows)
    if csv_path is not None:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=cols)
        writer.writeheader()
        writer.writerows(rows)
        write_atomic(csv_path, buffer.getvalue())
    if plot is not None:
        from ddlperf.report.sweep_plot import plot_sweep

        plot_sweep(rows, x, y, plot)
    if json_output:
        print_json(rows)
        return
    table = Table(title=f"ddlperf sweep ({len(rows)} scenarios, {method})", header_style="bold",
                  title_justify="left")
    shown = [c for c in cols if c != "error" or any(r["error"] for r in rows)]
    for col in shown:
        table.add_column(col.replace("_samples_per_s", "").replace("_s", ""),
                         justify="left" if col in ("bottleneck", "error") else "right")
    for row in rows:
        table.add_row(*(_cell(c, row.get(c)) for c in shown))
    console.print(table)
    for path, what in ((csv_path, "CSV"), (plot, "plot")):
        if path is not None:
            console.print(f"{what} written to {path}")
