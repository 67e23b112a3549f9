"""``ddlperf report``: one self-contained HTML file for a scenario."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ddlperf.cli.app import app
from ddlperf.cli.common import handle_input_errors, make_console
from ddlperf.cli.method_options import method_flags
from ddlperf.cli.options import scenario_flags
from ddlperf.errors import InputError


@app.command()
@handle_input_errors
@scenario_flags("predict")
@method_flags
def report(
    scenario: dict[str, Any],
    method: str,
    simulate: dict[str, Any],
    out: Annotated[Path, typer.Option(help="the HTML file to write")] = Path("ddlperf-report.html"),
    what_ifs: Annotated[bool, typer.Option("--what-ifs/--no-what-ifs", help="re-predict the what-ifs")] = True,
) -> None:
    """Write one self-contained HTML report of a scenario (figures inline, works offline)."""
    from ddlperf.explain import explain, simulated_iteration
    from ddlperf.io import check_writable, write_atomic
    from ddlperf.report.html import scenario_report

    check_writable(out, "--out")
    explanation = explain(method, what_ifs=what_ifs, **scenario,
                          **(simulate if method == "simulate" else {}))
    if explanation.timeline is not None:
        timeline = (explanation.timeline, explanation.critical_path)
    else:
        try:
            timeline = simulated_iteration(**scenario, **simulate)
        except InputError:  # the simulator does not model this scenario: no timeline
            timeline = None
    page = scenario_report(explanation, timeline, "ddlperf " + " ".join(sys.argv[1:]))
    write_atomic(out, page)
    make_console().print(f"report written to {out}")
