"""``ddlperf models``, ``devices``, ``fabrics`` and ``transports``: the built-in catalogs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ddlperf.cli.app import app
from ddlperf.cli.common import handle_input_errors, make_console, print_json
from ddlperf.report.fit import Col, dropped_line, fit_table
from ddlperf.units import format_bandwidth, format_duration, format_flops, format_size

if TYPE_CHECKING:
    from rich.console import Console


@app.command()
@handle_input_errors
def models(
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    wide: Annotated[bool, typer.Option("--wide", help="every column (sources too), however wide the terminal")] = False,
) -> None:
    """List the model zoo: parameters, forward FLOPs per sample, reference input."""
    from ddlperf.workload import zoo

    rows = [zoo.info(name) for name in zoo.names()]
    if json_output:
        print_json(rows)
        return
    console = make_console(wide)
    columns = [Col("model", "left"), Col("parameters"), Col("size (fp32)", drop=2),
               Col("forward FLOPs"), Col("layers", drop=1), Col("input", "left", drop=3)]
    cells = [[info["name"], f"{info['parameters']:,}", format_size(4 * info["parameters"]),
              format_flops(info["gflops_per_sample"] * 1e9), str(info["layers"]),
              _input_text(info["input"])] for info in rows]
    if wide:
        columns.append(Col("source", "left", wrap=True))
        cells = [[*row, info["source"]] for row, info in zip(cells, rows)]
    table, dropped = fit_table(columns, cells, console.width,
                               "model zoo (FLOPs: 2 per multiply-add, forward, per sample)")
    console.print(table)
    _sources_note(console, dropped, wide)


def _sources_note(console: Console, dropped: list[str], wide: bool) -> None:
    """Sources are long: they are shown with --wide (and are in --json), never cut."""
    hidden = dropped_line([*dropped, *([] if wide else ["source"])], "--wide or --json")
    if hidden:
        console.print(f"note: {hidden}", style="dim")


def _input_text(spec: dict[str, object]) -> str:
    if "shape" in spec:
        return "×".join(str(d) for d in spec["shape"])  # type: ignore[union-attr]
    return ", ".join(f"{k} {v}" for k, v in spec.items())


@app.command()
@handle_input_errors
def devices(
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    wide: Annotated[bool, typer.Option("--wide", help="every column (sources too), however wide the terminal")] = False,
) -> None:
    """List the device catalog: peak FLOP/s per dtype, memory bandwidth, efficiency, source."""
    from ddlperf.hardware import NIC_PRESETS, catalog

    devs = catalog()
    if json_output:
        print_json({"devices": {n: d.model_dump() for n, d in devs.items()},
                    "nic_presets_bps": NIC_PRESETS})
        return
    console = make_console(wide)
    columns = [Col("device", "left"), Col("fp32"), Col("tf32", drop=2), Col("fp16"),
               Col("bf16", drop=3), Col("memory"), Col("efficiency", drop=1)]
    if wide:
        columns.append(Col("source", "left", wrap=True))
    cells = []
    for name, d in devs.items():
        peaks = [format_flops(d.peak_flops[k]) + "/s" if k in d.peak_flops else "-"
                 for k in ("fp32", "tf32", "fp16", "bf16")]
        cells.append([name, *peaks, format_size(d.memory_bandwidth) + "/s", f"{d.efficiency:g}",
                      *([d.source] if wide else [])])
    table, dropped = fit_table(columns, cells, console.width,
                               "device catalog (peak FLOP/s; dense, no sparsity)")
    console.print(table)
    _sources_note(console, dropped, wide)
    nics = ", ".join(f"{n} ({format_bandwidth(r)})" for n, r in NIC_PRESETS.items())
    console.print(f"NIC presets accepted as --bandwidth: {nics}")


@app.command()
@handle_input_errors
def fabrics(
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    wide: Annotated[bool, typer.Option("--wide", help="every column (sources too), however wide the terminal")] = False,
) -> None:
    """List the intra-node fabric catalog: rate per GPU and direction, and its source."""
    from ddlperf.fabrics import fabric_catalog, fabric_notes

    catalog = fabric_catalog()
    if json_output:
        print_json({"fabrics": {n: f.model_dump() for n, f in catalog.items()},
                    "notes": fabric_notes()})
        return
    columns = [Col("fabric", "left"), Col("rate"), Col("description", "left", wrap=True)]
    cells = [[name, format_size(f.rate_bps / 8) + "/s", f.description]
             for name, f in catalog.items()]
    _print_catalog(wide, columns, cells, [f.source for f in catalog.values()],
                   "intra-node fabrics (per GPU, each direction)", fabric_notes())


@app.command()
@handle_input_errors
def transports(
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    wide: Annotated[bool, typer.Option("--wide", help="every column (sources too), however wide the terminal")] = False,
) -> None:
    """List the transports: per-connection and per-receiving-process payload caps and
    per-message cost, with sources."""
    from ddlperf.transport import transport_catalog, transport_notes

    catalog = transport_catalog()
    if json_output:
        print_json({"transports": {n: t.model_dump() for n, t in catalog.items()},
                    "notes": transport_notes()})
        return
    columns = [Col("transport", "left"), Col("cap per connection"),
               Col("receive per process", drop=1), Col("per message", drop=2),
               Col("description", "left", wrap=True)]
    cells = [[name, _per_second(t.cap_bps), _per_second(t.receive_bps),
              format_duration(t.message_s), t.description] for name, t in catalog.items()]
    _print_catalog(wide, columns, cells, [f"{t.source} ({t.date})" for t in catalog.values()],
                   "transports (payload per connection and direction)", transport_notes())


def _per_second(bps: float | None) -> str:
    """``200MB/s`` (payload bytes per second) or ``none``."""
    return "none" if bps is None else format_size(bps / 8) + "/s"


def _print_catalog(wide: bool, columns: list[Col], cells: list[list[str]], sources: list[str],
                   title: str, notes: str) -> None:
    """A catalog table that fits the terminal (sources only with --wide), then its notes."""
    console = make_console(wide)
    if wide:
        columns = [*columns, Col("source", "left", wrap=True)]
        cells = [[*row, source] for row, source in zip(cells, sources)]
    table, dropped = fit_table(columns, cells, console.width, title)
    console.print(table)
    _sources_note(console, dropped, wide)
    console.print(notes, style="dim")
