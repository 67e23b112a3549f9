"""``ddlperf models``, ``ddlperf devices`` and ``ddlperf fabrics``: the built-in catalogs."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ddlperf.cli.app import app
from ddlperf.cli.common import console, handle_input_errors, print_json
from ddlperf.units import format_bandwidth, format_flops, format_size


@app.command()
@handle_input_errors
def models(
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List the model zoo: parameters, forward FLOPs per sample, reference input."""
    from ddlperf.workload import zoo

    rows = [zoo.info(name) for name in zoo.names()]
    if json_output:
        print_json(rows)
        return
    table = Table(title="model zoo (FLOPs: 2 per multiply-add, forward, per sample)",
                  header_style="bold", title_justify="left")
    for col in ("model", "parameters", "size (fp32)", "forward FLOPs", "layers", "input",
                "source"):
        table.add_column(col, justify="right" if col in ("parameters", "layers") else "left")
    for info in rows:
        table.add_row(info["name"], f"{info['parameters']:,}", format_size(4 * info["parameters"]),
                      format_flops(info["gflops_per_sample"] * 1e9), str(info["layers"]),
                      _input_text(info["input"]), info["source"])
    console.print(table)


def _input_text(spec: dict[str, object]) -> str:
    if "shape" in spec:
        return "×".join(str(d) for d in spec["shape"])  # type: ignore[union-attr]
    return ", ".join(f"{k} {v}" for k, v in spec.items())


@app.command()
@handle_input_errors
def devices(
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List the device catalog: peak FLOP/s per dtype, memory bandwidth, efficiency, source."""
    from ddlperf.hardware import NIC_PRESETS, catalog

    devs = catalog()
    if json_output:
        print_json({"devices": {n: d.model_dump() for n, d in devs.items()},
                    "nic_presets_bps": NIC_PRESETS})
        return
    table = Table(title="device catalog (peak FLOP/s; dense, no sparsity)", header_style="bold",
                  title_justify="left")
    for col in ("device", "fp32", "tf32", "fp16", "bf16", "memory", "efficiency", "source"):
        table.add_column(col)
    for name, d in devs.items():
        peaks = [format_flops(d.peak_flops[k]) + "/s" if k in d.peak_flops else "-"
                 for k in ("fp32", "tf32", "fp16", "bf16")]
        table.add_row(name, *peaks, format_size(d.memory_bandwidth) + "/s", f"{d.efficiency:g}",
                      d.source)
    console.print(table)
    nics = ", ".join(f"{n} ({format_bandwidth(r)})" for n, r in NIC_PRESETS.items())
    console.print(f"NIC presets accepted as --bandwidth: {nics}")


@app.command()
@handle_input_errors
def fabrics(
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List the intra-node fabric catalog: rate per GPU and direction, and its source."""
    from ddlperf.fabrics import fabric_catalog, fabric_notes

    catalog = fabric_catalog()
    if json_output:
        print_json({"fabrics": {n: f.model_dump() for n, f in catalog.items()},
                    "notes": fabric_notes()})
        return
    table = Table(title="intra-node fabrics (per GPU, each direction)", header_style="bold",
                  title_justify="left")
    for col in ("fabric", "rate", "description"):
        table.add_column(col, justify="right" if col == "rate" else "left")
    for name, f in catalog.items():
        table.add_row(name, format_size(f.rate_bps / 8) + "/s", f.description)
    console.print(table)
    for name, f in catalog.items():
        console.print(f"{name}: {f.source}", style="dim")
    console.print(fabric_notes(), style="dim")
