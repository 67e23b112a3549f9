"""``ddlperf report``: one self-contained HTML file for a scenario, or for a sweep or a plan
saved earlier (``--sweep rows.csv``, ``--plan plan.json``)."""

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
    sweep: Annotated[Path | None, typer.Option("--sweep", help="a saved sweep instead of a scenario: the rows of 'sweep --csv/--parquet'")] = None,
    plan: Annotated[Path | None, typer.Option("--plan", help="a saved plan instead of a scenario: the output of 'plan --json'")] = None,
    x: Annotated[str | None, typer.Option(help="--sweep: the axis on x [default: the first swept axis]")] = None,
    y: Annotated[str | None, typer.Option(help="--sweep: throughput, iteration_time, speedup or efficiency [default: throughput]")] = None,
) -> None:
    """Write one self-contained HTML report of a scenario, or of a saved sweep or plan
    (figures inline, works offline)."""
    from ddlperf.io import check_writable, write_atomic

    _check_flags(scenario, method, simulate, what_ifs, sweep, plan, x, y)
    check_writable(out, "--out")
    command = "ddlperf " + " ".join(sys.argv[1:])
    if sweep is not None:
        page = _sweep_page(sweep, x, y, command)
    elif plan is not None:
        page = _plan_page(plan, command)
    else:
        page = _scenario_page(scenario, method, simulate, what_ifs, command)
    write_atomic(out, page)
    make_console().print(f"report written to {out}")


def _check_flags(scenario: dict[str, Any], method: str, simulate: dict[str, Any],
                 what_ifs: bool, sweep: Path | None, plan: Path | None, x: str | None,
                 y: str | None) -> None:
    """A saved sweep or plan is drawn as it is: flags that would change it are refused."""
    if sweep is not None and plan is not None:
        raise InputError("--sweep", "give either --sweep or --plan, not both")
    saved = "--sweep" if sweep is not None else "--plan" if plan is not None else None
    if saved is None:
        for flag, given in (("--x", x), ("--y", y)):
            if given is not None:
                raise InputError(flag, "applies to --sweep", f"drop {flag}, or add --sweep FILE")
        return
    if plan is not None and (x is not None or y is not None):
        raise InputError("--x" if x is not None else "--y", "applies to --sweep, not --plan")
    given = [k for k in scenario] + [k for k in simulate]
    if given or method != "analytic" or not what_ifs:
        name = ("--" + given[0].replace("_", "-") if given
                else "--method" if method != "analytic" else "--no-what-ifs")
        raise InputError(name, f"does not apply to {saved} (the saved results are drawn as "
                         "they are)", f"drop {name}")


def _scenario_page(scenario: dict[str, Any], method: str, simulate: dict[str, Any],
                   what_ifs: bool, command: str) -> str:
    from ddlperf.explain import explain, simulated_iteration
    from ddlperf.report.html import scenario_report

    explanation = explain(method, what_ifs=what_ifs, **scenario,
                          **(simulate if method == "simulate" else {}))
    if explanation.timeline is not None:
        timeline = (explanation.timeline, explanation.critical_path)
    else:
        try:
            timeline = simulated_iteration(**scenario, **simulate)
        except InputError:  # the simulator does not model this scenario: no timeline
            timeline = None
    return scenario_report(explanation, timeline, command)


def _sweep_page(path: Path, x: str | None, y: str | None, command: str) -> str:
    """The sweep page (plot and rows) of rows saved by ``sweep --csv/--parquet``."""
    from ddlperf.cli.sweep import MAX_ROWS_IN_MEMORY
    from ddlperf.report.html import sweep_report
    from ddlperf.report.rowfile import read_rows
    from ddlperf.report.sweep_plot import result_key
    from ddlperf.result_keys import RESULT_KEYS, columns, is_axis

    rows = read_rows(path, "--sweep", MAX_ROWS_IN_MEMORY)
    header = list(rows[0]) if rows else []
    missing = [k for k in RESULT_KEYS if k not in header]
    if not rows or missing:
        problem = "has no rows" if not rows else f"has no {missing[0]} column"
        raise InputError("--sweep", f"{path.name} {problem}: not the rows of a ddlperf sweep",
                         "write them with 'ddlperf sweep ... --csv FILE'")
    for number, row in enumerate(rows, 2):  # CSV line numbers (the header is line 1)
        bad = [k for k in RESULT_KEYS[:4] if not isinstance(row[k], (int, float, type(None)))]
        if bad:
            raise InputError("--sweep", f"row {number} of {path.name}: {bad[0]} "
                             f"{row[bad[0]]!r} is not a number", "give the file as ddlperf "
                             "wrote it")
    cols = columns(rows)
    axes = [c for c in cols if is_axis(c)]
    if not axes:
        raise InputError("--sweep", f"{path.name} has no swept axis column",
                         "write it with 'ddlperf sweep ... --csv FILE'")
    x = x or axes[0]
    if x not in axes:
        raise InputError("--x", f"{x!r} is not a swept axis of {path.name}",
                         f"use one of {', '.join(axes)}")
    title = f"{path.name}: {len(rows):,} rows over {' × '.join(axes)}"
    return sweep_report(rows, cols, x, result_key(y or "throughput"), title, command)


def _plan_page(path: Path, command: str) -> str:
    """The plan page (answers, re-checks, Pareto front, prices) of ``plan --json`` output."""
    from ddlperf.plan import PlanResult
    from ddlperf.report.html import plan_report
    from ddlperf.schema import read_structured

    if path.suffix.lower() != ".json":
        raise InputError("--plan", f"{path.name!r} is not a .json file",
                         "save the plan with 'ddlperf plan ... --json > plan.json'")
    return plan_report(PlanResult.from_dict(read_structured(path, "--plan")), command)
