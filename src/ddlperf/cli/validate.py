"""``ddlperf validate``: predicted vs measured over a matrix of scenarios (real runs, root).

Exit status: 0 when every scenario ran (whatever the errors), 1 when a scenario's run failed
(it is recorded and the others go on), 2 for bad input (a malformed matrix file, an unknown
key or model, a link faster than this machine can drive, not root), 130 on Ctrl-C (finished
scenarios are kept; ``--resume`` continues).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ddlperf.cli.app import app
from ddlperf.cli.common import err_console, handle_input_errors, out_console, print_json
from ddlperf.errors import InputError


def _names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise InputError("--only", "has no scenario names", "e.g. --only ps-bsp-2w,ring-3w")
    return names


def _one_line(row: dict[str, Any]) -> str:
    from ddlperf.report.validation_report import seconds_text, signed_pct

    if row.get("status") != "ok":
        return f"✗ {row['name']}: failed: {row.get('error')}"
    m, p = row["measured"], row["predicted"]
    parts = [f"measured {seconds_text(m['iteration_time_s'])} s"]
    for method in ("analytic", "simulate"):
        if method in p:
            parts.append(f"{method} {seconds_text(p[method]['iteration_time_s'])} s "
                         f"({signed_pct(p[method]['error_pct'])})")
    return f"✓ {row['name']}: " + " · ".join(parts)


def _dry_run(plans: list[Any]) -> None:
    from rich.table import Table

    from ddlperf.report.validation_report import setup_text

    table = Table(title=f"ddlperf validate: {len(plans)} scenarios (dry run, nothing measured)",
                  header_style="bold", title_justify="left")
    for col in ("#", "scenario", "setup", "iterations", "note"):
        table.add_column(col)
    for i, plan in enumerate(plans, 1):
        table.add_row(str(i), plan.name, setup_text(plan.describe()),
                      f"{plan.warmup}+{plan.iterations}", plan.note or "")
    out_console().print(table)


@app.command()
@handle_input_errors
def validate(
    matrix: Annotated[Path | None, typer.Option(help="scenario matrix YAML (defaults: + scenarios:), e.g. scenarios/dev_matrix.yaml")] = None,
    published: Annotated[Path | None, typer.Option(help="instead of runs: predict the published numbers of this file (scenarios/published.yaml) and compare")] = None,
    out: Annotated[Path | None, typer.Option(help="output directory: per-scenario runs, results.json, results.csv, validation.png (default validation/, with --published validation-published/)")] = None,
    only: Annotated[str | None, typer.Option(help="run only these scenarios, comma-separated names")] = None,
    resume: Annotated[bool, typer.Option(help="continue in --out: skip scenarios already done with unchanged parameters")] = False,
    rates: Annotated[str, typer.Option(help="link rates given to the predictors: configured (rate × goodput) or probed (each link's probe)")] = "configured",
    publish: Annotated[Path | None, typer.Option(help="also write validation.md, validation.csv and validation.png into this directory (e.g. docs)")] = None,
    results: Annotated[Path | None, typer.Option(help="no runs: report (and --publish) an earlier run's results.json or its directory; with --matrix, the page's texts come from that file")] = None,
    repredict: Annotated[bool, typer.Option(help="with --results and --matrix: predict the run's scenarios again with today's models (measurements kept) and rewrite its results")] = False,
    against: Annotated[Path | None, typer.Option(help="with --results: how far another run of the matrix (its results.json or directory, or a published page's validation.csv) agrees, per scenario within 2 points; a section of the page with --publish")] = None,
    dry_run: Annotated[bool, typer.Option(help="check the matrix and list the scenarios; run nothing (no root needed)")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="print results.json's content instead of tables")] = False,
) -> None:
    """Profile, measure and predict every scenario of a matrix; compare predicted and measured
    iteration times (table, CSV, PNG; MAPE and worst error per method).

    Needs root (each scenario runs real distributed PyTorch training on an emulated cluster).
    With --published FILE: no runs; predict every published number of the file and compare
    (throughput; single-GPU, cluster and winner checks).
    """
    from ddlperf import validate as api
    from ddlperf.io import check_writable
    from ddlperf.report.validation_report import publish as publish_docs
    from ddlperf.report.validation_report import render

    if published is not None:
        _published(published, out, only, publish, json_output,
                   {"--matrix": matrix is not None, "--resume": resume, "--dry-run": dry_run,
                    "--results": results is not None, "--rates": rates != "configured",
                    "--repredict": repredict, "--against": against is not None})
        return
    out = out or Path("validation")
    other = None
    if against is not None and results is None:
        raise InputError("--against", "compares an earlier run with another",
                         "add --results DIR (the run to report)")
    if results is not None:
        if only or resume or dry_run:
            raise InputError("--results", "reports an earlier run; it takes no --only, "
                             "--resume or --dry-run")
        run = api.load_results(results)
        title = description = findings = None
        if matrix is not None:  # the page's title, description and findings
            matrix_file = api.load_matrix(matrix)
            title, description = matrix_file.title, matrix_file.description
            findings = matrix_file.findings
        other = None if against is None else _other_run(api, against)
        if repredict:
            if matrix is None:
                raise InputError("--repredict", "needs the matrix the run was made from",
                                 "add --matrix scenarios/dev_matrix.yaml")
            if publish is not None:
                check_writable(publish / "validation.md", "--publish")
            earlier = run
            run = _with_progress(lambda progress: api.repredict(earlier, matrix, progress))
    else:
        if repredict:
            raise InputError("--repredict", "re-predicts an earlier run",
                             "add --results DIR (the run's --out directory)")
        if matrix is None:
            raise InputError("--matrix", "is required", "e.g. --matrix scenarios/dev_matrix.yaml")
        names = _names(only)
        matrix_file, plans = api.plan_matrix(matrix, names)
        title, description = matrix_file.title, matrix_file.description
        findings = matrix_file.findings
        # what a run would refuse after the matrix, refused now (a dry run checks it too)
        from ddlperf.validate.run import RATES

        if rates not in RATES:
            raise InputError("--rates", f"unknown choice {rates!r}", f"use {' or '.join(RATES)}")
        if out is not None and out.exists() and not out.is_dir():
            raise InputError("--out", f"{str(out)!r} is a file", "give a directory")
        if publish is not None:
            if publish.exists() and not publish.is_dir():
                raise InputError("--publish", f"{str(publish)!r} is a file", "give a directory")
            check_writable(publish / "validation.md", "--publish")
        if dry_run:
            _dry_run(plans)
            return
        run = _run(api, matrix, out, names, resume, rates)
    ag, label = None, ""
    if other is not None:
        from ddlperf.validate.agreement import agreement

        ag = agreement(run.rows, other.rows)
        label = _run_label(other)
    if publish is not None:
        from ddlperf.report.agreement_report import markdown_lines

        check_writable(publish / "validation.md", "--publish")
        # the matrix the page's texts come from (a run's own path may be a frozen clone's)
        shown = matrix if matrix is not None else run.matrix
        command = f"ddlperf validate --matrix {shown} --publish {publish}" + (
            f" --rates {run.meta.get('rates')}" if run.meta.get("rates", "configured")
            != "configured" else "")
        publish_docs(run.rows, run.summary, run.meta, publish, title=title,
                     description=description, command=command, findings=findings,
                     agreement=None if ag is None else markdown_lines(ag, label))
    if json_output:
        data = run.to_dict()
        if ag is not None:
            data["agreement"] = {"against": label, **ag}
        print_json(api.clean_json(data))
    else:
        render(run.rows, run.summary, out_console())
        if ag is not None:
            from ddlperf.report.agreement_report import render as render_agreement

            render_agreement(ag, label, out_console())
        typer.echo(f"results: {run.out / 'results.json'}, {run.out / 'results.csv'}, "
                   f"{run.out / 'validation.png'}")
        if publish is not None:
            typer.echo(f"published: {publish / 'validation.md'} (+ .csv, .png)")
    if run.summary.get("failed"):
        raise typer.Exit(1)


def _other_run(api: Any, path: Path) -> Any:
    """``--against``: a results directory (or its results.json), or a published page's
    validation.csv (the runs behind a page may be gone; the CSV keeps their measurements)."""
    if path.suffix.lower() != ".csv":
        return api.load_results(path, field="--against")
    from ddlperf.validate.agreement import page_run

    return page_run(path)


def _run_label(run: Any) -> str:
    """How the page names another run: when it was made and how many scenarios it has."""
    if "page" in run.meta:
        return (f"the run of a published page ({run.meta['page']} as it was before this "
                f"command, {len(run.rows)} scenarios)")
    created = run.meta.get("created")
    return (f"another run of {len(run.rows)} scenarios"
            + (f" made {created}" if created else ""))


def _published(path: Path, out: Path | None, only: str | None, publish: Path | None,
               json_output: bool, conflicts: dict[str, bool]) -> None:
    """``--published``: predict every entry of the file (no run) and compare."""
    from ddlperf.io import check_writable
    from ddlperf.report.published_report import publish as publish_docs
    from ddlperf.report.published_report import render
    from ddlperf.validate.published import (
        plan_published,
        prepare_published_out,
        run_published,
        write_published,
    )
    from ddlperf.validate.results import clean_json

    for flag, given in conflicts.items():
        if given:
            raise InputError(flag, "does not apply to --published (it predicts, runs nothing)",
                             f"drop {flag}")
    plan = plan_published(path, _names(only))  # a bad file or --only: nothing written
    if publish is not None:
        check_writable(publish / "published.md", "--publish")
    out = out or Path("validation-published")
    existed = out.exists()
    prepare_published_out(out)
    try:
        run = _with_progress(lambda progress: run_published(plan, progress))
    except BaseException:
        if not existed and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # nothing written half-way: not even the empty directory
        raise
    write_published(run, out)
    if publish is not None:
        publish_docs(run.rows, run.comparisons, run.summary, run.meta, publish,
                     command=f"ddlperf validate --published {path} --publish {publish}")
    if json_output:
        print_json(clean_json(run.to_dict()))
        return
    render(run.rows, run.summary, out_console())
    typer.echo(f"results: {out / 'results.json'}, {out / 'results.csv'}, "
               f"{out / 'validation.png'}")
    if publish is not None:
        typer.echo(f"published: {publish / 'published.md'} (+ .csv, .png)")


def _with_progress(work: Any) -> Any:
    """Run ``work(progress)`` under a progress bar over entries on stderr."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        console=err_console(), transient=True)
    task = None

    def on_event(event: dict[str, Any]) -> None:
        nonlocal task
        if task is None:
            task = progress.add_task("predicting", total=event["total"])
        if event["event"] == "start":
            progress.update(task, description=f"predicting {event['name'][:40]}")
        elif event["event"] == "done":
            progress.advance(task)

    with progress:
        return work(on_event)


def _run(api: Any, matrix: Path, out: Path, names: list[str] | None, resume: bool,
         rates: str) -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), console=err_console(),
                        transient=False)
    task = None

    def on_event(event: dict[str, Any]) -> None:
        nonlocal task
        if task is None:
            task = progress.add_task("validate", total=event["total"])
        kind = event["event"]
        label = f"[{event['index'] + 1}/{event['total']}] {event['name']}"
        if kind in ("start", "step"):
            message = str(event.get("message", ""))
            progress.update(task, description=f"{label}: {message[:70]}")
        elif kind in ("done", "skip", "failed"):
            row = event.get("row") or {}
            suffix = " (kept from the earlier run)" if kind == "skip" else ""
            progress.console.print(_one_line(row) + suffix, highlight=False)
            progress.advance(task)

    try:
        with progress:
            return api.validate(matrix, out=out, only=names, resume=resume, rates=rates,
                                progress=on_event)
    except KeyboardInterrupt:
        print(f"error: interrupted; finished scenarios are kept in {out} "
              "(continue with --resume)", file=sys.stderr)
        raise typer.Exit(130) from None
