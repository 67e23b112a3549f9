"""``ddlperf sweep``: predict a grid of scenarios; a table, CSV, JSON or a plot."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ddlperf.cli.app import app
from ddlperf.cli.common import fail, handle_input_errors, make_console, print_json
from ddlperf.cli.options import scenario_flags
from ddlperf.cli.predict import check_method
from ddlperf.errors import InputError
from ddlperf.io import check_writable, write_atomic
from ddlperf.report.fit import Col, dropped_line, fit_table
from ddlperf.result_keys import LOCKSTEP_KEY
from ddlperf.units import format_duration

DEFAULT_AXIS = {"workers": [1, 2, 4, 8, 16, 32]}
# Column header and drop rank (higher: dropped first at narrow widths) of each result.
RESULT_COLUMNS = {
    "iteration_time_s": ("iteration", 0), "throughput_samples_per_s": ("samples/s", 0),
    "speedup": ("speedup", 2), "scaling_efficiency": ("efficiency", 3),
    "bottleneck": ("bottleneck", 1), LOCKSTEP_KEY: ("lockstep", 1),
}
SHORT = {"batch_size": "batch", "bucket_size": "bucket", "placement": "place",
         "gpus_per_node": "GPUs/node", "local_aggregation": "local agg", "step_barrier": "barrier", "rack_size": "rack",
         "rack_uplink": "rack uplink"}
NUMERIC_AXES = ("workers", "ps", "batch_size", "staleness", "gpus_per_node", "nics",
                "rack_size", "goodput")


def _cell(key: str, value: Any) -> str:
    from ddlperf.report.header import speedup_text
    from ddlperf.report.sweep_plot import value_label
    from ddlperf.report.table import percent, samples_per_s

    if value is None:
        return "-"
    if key in ("iteration_time_s", LOCKSTEP_KEY):
        return format_duration(value)
    if key == "throughput_samples_per_s":
        return samples_per_s(value)
    if key == "scaling_efficiency":
        return percent(value)
    if key == "speedup":
        return speedup_text(value)
    if isinstance(value, bool):
        return "on" if value else "off"
    return value_label(key, value)


def plot_title(axes: dict[str, list[Any]], fixed: dict[str, Any]) -> str:
    """What every line of the plot shares: the model, device and architecture (swept ones
    with more than one value are in the legend instead)."""
    from ddlperf.api import DEFAULTS

    def shared(name: str, default: Any) -> Any:
        values = axes.get(name)
        if values is None:
            return fixed.get(name) or default
        return values[0] if len(set(map(str, values))) == 1 else None

    workload = fixed.get("workload")
    parts = [Path(workload).stem if workload else shared("model", DEFAULTS["model"]),
             shared("device", "as profiled" if workload else DEFAULTS["device"]),
             {"ps": "PS", "allreduce": "ring all-reduce"}.get(shared("arch", "ps"))]
    if fixed.get("cluster"):
        parts.append(f"cluster {Path(fixed['cluster']).name}")
    return " · ".join(str(p) for p in parts if p)


def sweep_table(rows: list[dict[str, Any]], cols: list[str], width: int, title: str,
                wide: bool) -> tuple[Any, list[str]]:
    """Axes first (never dropped), then results by importance. A failed row says ``error N``
    in its first result column; the reasons are listed under the table (:func:`row_errors`)."""
    # the lockstep figure only where a row has one (ASP of identical workers)
    shown = [c for c in cols if c != "error"
             and (c != LOCKSTEP_KEY or any(r.get(c) is not None for r in rows))]
    columns = []
    for c in shown:
        if c in RESULT_COLUMNS:
            header, rank = RESULT_COLUMNS[c]
            columns.append(Col(header, "left" if c == "bottleneck" else "right",
                               drop=0 if wide else rank))
        else:
            columns.append(Col(SHORT.get(c, c), "right" if c in NUMERIC_AXES else "left"))
    numbers = {e: i + 1 for i, e in enumerate(dict.fromkeys(r["error"] for r in rows
                                                             if r.get("error")))}
    first_result = next(i for i, c in enumerate(shown) if c in RESULT_COLUMNS)
    cells = []
    for r in rows:
        row = [_cell(c, r.get(c)) for c in shown]
        if r.get("error"):
            row[first_result] = f"error {numbers[r['error']]}"
        cells.append(row)
    return fit_table(columns, cells, width, title)


def row_errors(rows: list[dict[str, Any]]) -> list[str]:
    """``error 1: --bandwidth: cannot read …`` once per distinct reason."""
    reasons = dict.fromkeys(r["error"] for r in rows if r.get("error"))
    return [f"error {i}: {reason}" for i, reason in enumerate(reasons, 1)]


def sweep_notes(axes: dict[str, list[Any]], fixed: dict[str, Any]) -> list[str]:
    """Flags that have no effect on some rows (e.g. --sharding on all-reduce rows)."""
    from ddlperf.api import ignored_flags

    given = {k: v for k, v in {**fixed, **axes}.items() if k not in ("arch", "sync")}
    arches = axes.get("arch") or [fixed.get("arch", "ps")]
    syncs = axes.get("sync") or [fixed.get("sync", "bsp")]
    where: dict[str, set[tuple[str, str]]] = {}
    for arch in arches:
        for sync in syncs:
            for note in ignored_flags(arch, sync, **given):
                where.setdefault(note, set()).add((arch, sync))
    notes = []
    for note, combos in where.items():
        on_arch = sorted({a for a, _s in combos})
        on_sync = sorted({s for _a, s in combos})
        if len(combos) < len(arches) * len(syncs):
            rows = "/".join(on_arch) if len(on_arch) < len(set(arches)) else "/".join(on_sync)
            note += f" on {rows} rows"
        notes.append(note)
    return notes


@app.command()
@handle_input_errors
@scenario_flags("sweep")
def sweep(
    scenario: dict[str, Any],
    method: Annotated[str, typer.Option(help="analytic or simulate")] = "analytic",
    jobs: Annotated[int, typer.Option(help="processes (0 = one per core, from 400 points; analytic: 6,000)")] = 0,
    x: Annotated[str | None, typer.Option(help="--plot: the axis on x [default: the first swept axis]")] = None,
    y: Annotated[str, typer.Option(help="--plot: throughput, iteration_time, speedup or efficiency")] = "throughput",
    csv_path: Annotated[Path | None, typer.Option("--csv", help="write the rows as CSV (streamed as they finish)")] = None,
    parquet: Annotated[Path | None, typer.Option(help="write the rows as Parquet, streamed (needs pyarrow)")] = None,
    html: Annotated[Path | None, typer.Option(help="write a self-contained HTML report (plot and rows)")] = None,
    executor: Annotated[str, typer.Option(help="local (processes here), ray or dask (a cluster of that engine, see docs/executors.md)")] = "local",
    executor_address: Annotated[str | None, typer.Option(help="ray: host:port of the head; dask: tcp://host:8786 [default: start a local one]")] = None,
    progress: Annotated[bool | None, typer.Option(help="progress bar on stderr [default: on a terminal]")] = None,
    plot: Annotated[Path | None, typer.Option(help="write a plot of --y against --x (.png, .pdf or .svg)")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print the rows as JSON")] = False,
    wide: Annotated[bool, typer.Option("--wide", help="every column, however wide the terminal")] = False,
) -> None:
    """Predict every combination of the comma-separated values; one row per scenario.

    Every option shown with ",…" takes a comma-separated list (an inline device spec, which
    has commas itself, is for predict).
    """
    from ddlperf.result_keys import columns
    from ddlperf.sweep import count_points

    check_method(method)
    axes = {k: v for k, v in scenario.items() if isinstance(v, list)}
    fixed = {k: v for k, v in scenario.items() if not isinstance(v, list)}
    if fixed.get("workload") is not None and "model" in axes:
        raise InputError("--model", "give either --model or --workload, not both")
    for path, flag in ((csv_path, "--csv"), (parquet, "--parquet"), (plot, "--plot"),
                       (html, "--html")):
        if path is not None:
            check_writable(path, flag)
    axes = axes or dict(DEFAULT_AXIS)
    x = x or next(iter(axes))
    if plot is not None or html is not None:
        from ddlperf.report.sweep_plot import plot_format, result_key

        if plot is not None:
            plot_format(plot)
        y = result_key(y)
        if x not in axes:
            raise InputError("--x", f"{x!r} is not a swept axis",
                             f"use one of {', '.join(axes)}")
    total = count_points(axes, **fixed)
    if total > MAX_ROWS_IN_MEMORY:
        flag = "--json" if json_output else "--plot" if plot else "--html" if html else None
        if flag is not None or (csv_path is None and parquet is None):
            raise InputError(flag or "--csv", f"{total:,} rows are more than are shown or "
                             f"plotted ({MAX_ROWS_IN_MEMORY:,})",
                             "write them with --csv FILE or --parquet FILE (streamed)")
    only_files = (csv_path or parquet) and not (json_output or plot or html) \
        and total > MAX_TABLE_ROWS  # a table that long is read from the file, not the screen
    rows, interrupted, writers, done = _run(axes, fixed, method, jobs, executor,
                                            executor_address, csv_path, parquet,
                                            total, progress, keep_rows=not only_files)
    if not interrupted and rows is not None and all(r.get("error") for r in rows):
        for writer in writers:  # nothing to show (a file there before stays as it was)
            writer.discard()
        raise fail(rows[0]["error"])
    try:  # the plot and the report first: a file is renamed into place only if all succeed
        cols = columns(rows) if rows else []
        if rows and plot is not None:
            from ddlperf.report.sweep_plot import plot_sweep

            plot_sweep(rows, x, y, plot, title=plot_title(axes, fixed))
        if rows and html is not None:
            from ddlperf.report.html import sweep_report

            write_atomic(html, sweep_report(rows, cols, x, y, plot_title(axes, fixed),
                                            "ddlperf " + " ".join(sys.argv[1:])))
    except BaseException:
        for writer in writers:
            writer.discard()
        raise
    written = [writer.close() for writer in writers]
    if interrupted:
        where = ("; they are in " + " and ".join(str(p) for p in written)) if written else ""
        print(f"interrupted: {done:,} of {total:,} rows finished{where}", file=sys.stderr)
        if not rows:
            raise typer.Exit(130)
    if rows is None:
        console = make_console(wide)
        for path in written:
            console.print(f"{total:,} rows written to {path}")
        return
    if json_output:
        print_json(rows)
        if interrupted:
            raise typer.Exit(130)
        return
    console = make_console(wide)
    title = f"ddlperf sweep ({len(rows)} scenarios, method {method})"
    table, dropped = sweep_table(rows, cols, console.width, title, wide)
    console.print(table)
    hidden = dropped_line(dropped, "--wide, --csv or --json")
    for line in [*row_errors(rows), *(f"note: {n}" for n in sweep_notes(axes, fixed)),
                 *([f"note: {hidden}"] if hidden else [])]:
        console.print(line, style=None if line.startswith("error") else "dim")
    for path, what in ((csv_path, "CSV"), (parquet, "Parquet"), (plot, "plot"),
                       (html, "HTML report")):
        if path is not None:
            console.print(f"{what} written to {path}")
    if interrupted:
        raise typer.Exit(130)


# Rows kept for the table, the plot, --json and --html; bigger sweeps only stream to files.
MAX_ROWS_IN_MEMORY = 200_000
# A sweep written to --csv/--parquet with more rows than this prints where they are, not them.
MAX_TABLE_ROWS = 1_000


def _run(axes: dict[str, list[Any]], fixed: dict[str, Any], method: str, jobs: int,
         executor: str, address: str | None, csv_path: Path | None, parquet: Path | None,
         total: int, progress: bool | None, keep_rows: bool = True
         ) -> tuple[list[dict[str, Any]] | None, bool, list[Any], int]:
    """Run the sweep, streaming rows to the files: (the rows, kept when few enough, else
    None; whether Ctrl-C stopped it; the row writers, not yet closed: the caller renames
    their files into place or discards them; rows finished)."""
    from ddlperf.cli.progress import progress_bar
    from ddlperf.executors import make_executor, sigint_deferred
    from ddlperf.report.rowfile import RowWriter
    from ddlperf.sweep import MIN_POINTS_PER_JOB, iter_sweep, min_points_per_job

    if executor == "local":  # the default (0): as many as pay for their start-up
        per_job = min_points_per_job(axes, method, **fixed) if not jobs else MIN_POINTS_PER_JOB
        jobs = min(jobs or os.cpu_count() or 1, max(1, total // per_job))
    engine = make_executor(executor, address, jobs or None)
    numbers = [k for k in RESULT_COLUMNS if k != "bottleneck"]
    writers: list[RowWriter] = []
    try:
        for path, flag in ((csv_path, "--csv"), (parquet, "--parquet")):
            if path:
                writers.append(RowWriter(path, flag, numbers=numbers))
    except BaseException:  # e.g. an unknown --parquet format: no temporary file stays behind
        engine.close()
        for writer in writers:
            writer.discard()
        raise
    keep: list[dict[str, Any]] | None = [] if keep_rows and total <= MAX_ROWS_IN_MEMORY \
        else None
    interrupted = False
    done = 0
    try:
        with progress_bar("sweeping", total, progress) as update:
            for rows in iter_sweep(axes, method=method, executor=engine,
                                   progress=lambda n: update(n, total), **fixed):
                with sigint_deferred():  # a chunk is in the files and counted, or not at all
                    for writer in writers:
                        writer.write(rows)
                    if keep is not None:
                        keep.extend(rows)
                    done += len(rows)
    except KeyboardInterrupt:
        interrupted = True
    except BaseException:
        engine.close()
        for writer in writers:
            writer.discard()
        raise
    engine.close()
    return keep, interrupted, writers, done
