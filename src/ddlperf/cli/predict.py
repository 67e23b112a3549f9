"""``ddlperf predict``: one scenario, a table or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ddlperf.cli.app import app
from ddlperf.cli.common import handle_input_errors, make_console, print_json
from ddlperf.cli.options import scenario_flags
from ddlperf.errors import InputError

METHODS = ("analytic", "simulate")


def check_method(method: str) -> str:
    if method not in METHODS:
        raise InputError("--method", f"{method!r} is not one of {', '.join(METHODS)}",
                         "use analytic or simulate")
    return method


@app.command()
@handle_input_errors
@scenario_flags("predict")
def predict(
    scenario: dict[str, Any],
    method: Annotated[str, typer.Option(help="analytic (closed form/queueing) or simulate (discrete events)")] = "analytic",
    iterations: Annotated[int | None, typer.Option(help="simulate: measured iterations [default: 20]")] = None,
    warmup: Annotated[int | None, typer.Option(help="simulate: warm-up iterations excluded [default: 3]")] = None,
    seed: Annotated[int | None, typer.Option(help="simulate: random seed [default: 0]")] = None,
    replications: Annotated[int | None, typer.Option(help="simulate: independent runs for p5/p95 [default: 1]")] = None,
    jitter: Annotated[float | None, typer.Option(help="simulate: per-op coefficient of variation [default: the workload's]")] = None,
    trace: Annotated[Path | None, typer.Option(help="simulate: write a Chrome trace (open in Perfetto)")] = None,
    jobs: Annotated[int | None, typer.Option(help="simulate: processes for the replications [default: one per core]")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print one JSON object instead of tables")] = False,
) -> None:
    """Predict iteration time, throughput, speedup and the bottleneck of one scenario."""
    from ddlperf.api import predict as run_predict

    simulate: dict[str, Any] = {
        k: v for k, v in (("iterations", iterations), ("warmup", warmup), ("seed", seed),
                          ("replications", replications), ("jitter", jitter), ("trace", trace),
                          ("jobs", jobs))
        if v is not None
    }
    prediction = run_predict(method=check_method(method), **scenario, **simulate)
    if json_output:
        print_json(prediction.to_dict())
        return
    from ddlperf.report.table import render

    console = make_console()
    render(prediction, console)
    if trace is not None and method == "simulate":
        console.print(f"trace written to {trace} (open it at https://ui.perfetto.dev)")
