"""``ddlperf explain``: the bottleneck in words, resource bars, the critical path, what-ifs
and how far to trust them."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ddlperf.cli.app import app
from ddlperf.cli.common import handle_input_errors, make_console, print_json
from ddlperf.cli.method_options import method_flags
from ddlperf.cli.options import scenario_flags


@app.command()
@handle_input_errors
@scenario_flags("predict")
@method_flags
def explain(
    scenario: dict[str, Any],
    method: str,
    simulate: dict[str, Any],
    what_ifs: Annotated[bool, typer.Option("--what-ifs/--no-what-ifs", help="re-predict the what-ifs")] = True,
    json_output: Annotated[bool, typer.Option("--json", help="print one JSON object instead of text")] = False,
) -> None:
    """Explain a prediction: why it performs so, what would help most, how far to trust it."""
    from ddlperf.explain import explain as run_explain

    explanation = run_explain(method, what_ifs=what_ifs, **scenario, **simulate)
    if json_output:
        print_json(explanation.to_dict())
        return
    from ddlperf.report.explain_text import render

    render(explanation, make_console())
