"""``ddlperf plan``: what to rent for a throughput or a deadline, at what cost."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ddlperf.cli.app import app
from ddlperf.cli.common import handle_input_errors, make_console, print_json
from ddlperf.cli.options import BOOLEANS
from ddlperf.cli.ranges import parse_counts
from ddlperf.errors import InputError
from ddlperf.io import check_writable, write_atomic
from ddlperf.units import parse_duration

ARCHS = ("ps", "allreduce")
SYNCS = ("bsp", "asp", "ssp")
ALGORITHMS = ("ring", "hierarchical")
ONOFF = ("on", "off")


def _choices(text: str, flag: str, allowed: tuple[str, ...]) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not all(items):
        raise InputError(flag, f"{text!r} has an empty item", f"e.g. {','.join(allowed)}")
    bad = [t for t in items if t not in allowed]
    if bad:
        raise InputError(flag, f"{bad[0]!r} is not one of {', '.join(allowed)}")
    return list(dict.fromkeys(items))


def _instances(table: Any, names: str | None, devices: str | None) -> list[Any]:
    chosen = list(table.instances)
    if names is not None:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        known = {i.name: i for i in table.instances}
        missing = [n for n in wanted if n not in known]
        if missing or not wanted:
            raise InputError("--instances", f"the price table has no instance {missing[0]!r}"
                             if missing else "is empty",
                             f"use some of {', '.join(known)}")
        chosen = [known[n] for n in wanted]
    if devices is not None:
        wanted = [d.strip() for d in devices.split(",") if d.strip()]
        if not wanted:
            raise InputError("--devices", "is empty", "give device names, e.g. V100,A100")
        for device in wanted:
            if not any(i.device.lower() == device.lower() for i in chosen):
                raise InputError("--devices", f"the price table has no instance with {device}"
                                 + (" among --instances" if names else ""),
                                 f"add one to the price table, or drop {device}")
        chosen = [i for i in chosen if i.device.lower() in {d.lower() for d in wanted}]
    return chosen


@app.command()
@handle_input_errors
def plan(
    throughput: Annotated[float | None, typer.Option(help="target: samples/s of the whole cluster")] = None,
    deadline: Annotated[str | None, typer.Option(help="target: finish the job within this time, e.g. 8h, 90min")] = None,
    samples: Annotated[float | None, typer.Option(help="size of the job in samples (with --deadline)")] = None,
    epochs: Annotated[float | None, typer.Option(help="size of the job in epochs (with --deadline and --dataset-size)")] = None,
    dataset_size: Annotated[float | None, typer.Option(help="samples per epoch (with --epochs)")] = None,
    budget: Annotated[float | None, typer.Option(help="limit: price per hour (--throughput) or cost of the job (--deadline), in the table's currency")] = None,
    prices: Annotated[Path | None, typer.Option(help="price table YAML/JSON [default: the bundled EXAMPLE table]")] = None,
    instances: Annotated[str | None, typer.Option(help="instance types of the table to search, comma-separated [default: all]")] = None,
    devices: Annotated[str | None, typer.Option(help="only instances with these devices, comma-separated")] = None,
    servers: Annotated[str, typer.Option(help="server counts to search: a range 1..64 or a list 1,2,4")] = "1..64",
    max_workers: Annotated[int | None, typer.Option(help="limit: GPUs in the cluster")] = None,
    ps: Annotated[str, typer.Option(help="PS shard counts to search (each on a priced PS host)")] = "1..8",
    arch: Annotated[str, typer.Option(help="architectures to search: ps,allreduce")] = "ps,allreduce",
    allreduce: Annotated[str, typer.Option(help="all-reduce algorithms: ring,hierarchical (hierarchical on multi-GPU servers)")] = "ring,hierarchical",
    sync: Annotated[str, typer.Option(help="sync modes for PS: bsp,asp,ssp (ASP/SSP change convergence)")] = "bsp",
    staleness: Annotated[int, typer.Option(help="SSP bound when --sync includes ssp")] = 3,
    step_barrier: Annotated[str, typer.Option(help="BSP PS candidates with the step barrier of TensorFlow 1.x's sync PS: off, on or on,off")] = "off",
    mixes: Annotated[bool, typer.Option(help="also search clusters of two instance types (predicted one by one: slower)")] = False,
    model: Annotated[str | None, typer.Option(help="zoo model (see 'ddlperf models') [default: resnet50]")] = None,
    workload: Annotated[Path | None, typer.Option(help="workload JSON instead of --model")] = None,
    batch_size: Annotated[int | None, typer.Option(help="samples per GPU per iteration [default: 32 (zoo)]")] = None,
    dtype: Annotated[str | None, typer.Option(help="compute dtype: fp32, tf32, fp16, bf16")] = None,
    grad_dtype: Annotated[str | None, typer.Option(help="dtype gradients are exchanged in [default: --dtype]")] = None,
    sharding: Annotated[str | None, typer.Option(help="PS sharding: round_robin, greedy, even")] = None,
    latency: Annotated[str | None, typer.Option(help="per-message latency [default: 50us]")] = None,
    recheck: Annotated[int, typer.Option(help="answers re-predicted with the simulator (0: none)")] = 3,
    iterations: Annotated[int | None, typer.Option(help="re-check: simulated iterations [default: 20]")] = None,
    jitter: Annotated[float | None, typer.Option(help="re-check: per-operation coefficient of variation")] = None,
    seed: Annotated[int | None, typer.Option(help="re-check: random seed [default: 0]")] = None,
    replications: Annotated[int | None, typer.Option(help="re-check: independent runs for p5/p95")] = None,
    executor: Annotated[str, typer.Option(help="where candidates are predicted: local (processes here), ray or dask (a cluster of that engine)")] = "local",
    executor_address: Annotated[str | None, typer.Option(help="ray: host:port of the head; dask: tcp://host:8786 [default: start a local one]")] = None,
    jobs: Annotated[int | None, typer.Option(help="worker processes (local) or tasks in flight [default: one per core]")] = None,
    rows: Annotated[Path | None, typer.Option("--rows", help="write every candidate's row, streamed: .csv or .parquet")] = None,
    plot: Annotated[Path | None, typer.Option(help="write the Pareto front as PNG")] = None,
    html: Annotated[Path | None, typer.Option(help="write a self-contained HTML report")] = None,
    progress: Annotated[bool | None, typer.Option(help="progress bar on stderr [default: on a terminal]")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Find the cheapest and the fastest clusters that meet a target, and the cost–time
    Pareto front, from a price table."""
    from ddlperf.cli.progress import progress_bar
    from ddlperf.executors import make_executor
    from ddlperf.plan import SearchSpace, Target, count, load_prices
    from ddlperf.plan import plan as run_plan
    from ddlperf.report.rowfile import RowWriter

    if epochs is not None or dataset_size is not None:
        if samples is not None:
            raise InputError("--samples", "give either --samples or --epochs with "
                             "--dataset-size, not both")
        if epochs is None or dataset_size is None:
            raise InputError("--epochs" if epochs is None else "--dataset-size",
                             "the job size needs both --epochs and --dataset-size")
        samples = epochs * dataset_size
    deadline_s = None if deadline is None else parse_duration(deadline, "--deadline")
    target = Target(throughput=throughput, deadline_s=deadline_s, samples=samples,
                    budget=budget)
    for path, flag in ((plot, "--plot"), (html, "--html")):
        if path is not None:
            check_writable(path, flag)
    if plot is not None and plot.suffix.lower() != ".png":
        raise InputError("--plot", f"{plot.name!r}: the Pareto front is written as PNG",
                         "give a .png file name")
    table = load_prices(prices)
    space = SearchSpace(
        instances=_instances(table, instances, devices),
        servers=parse_counts(servers, "--servers"),
        ps=parse_counts(ps, "--ps"), arch=_choices(arch, "--arch", ARCHS),
        allreduce=_choices(allreduce, "--allreduce", ALGORITHMS),
        sync=_choices(sync, "--sync", SYNCS), staleness=staleness,
        step_barrier=[BOOLEANS[v] for v in _choices(step_barrier, "--step-barrier", ONOFF)],
        mixes=mixes, max_workers=max_workers)
    if staleness < 0:
        raise InputError("--staleness", f"must be ≥ 0, got {staleness}")
    if max_workers is not None and max_workers < 1:
        raise InputError("--max-workers", f"must be at least 1, got {max_workers}")
    fixed = {k: v for k, v in (("model", model), ("workload", workload),
                               ("batch_size", batch_size), ("dtype", dtype),
                               ("grad_dtype", grad_dtype), ("sharding", sharding),
                               ("latency", latency)) if v is not None}
    if "workload" not in fixed:
        fixed.setdefault("model", "resnet50")
    _check_fixed(fixed, space)
    options = {k: v for k, v in (("iterations", iterations), ("jitter", jitter), ("seed", seed),
                                 ("replications", replications)) if v is not None}
    if recheck < 0:
        raise InputError("--recheck", f"must be ≥ 0, got {recheck}", "0 re-checks nothing")
    if options:  # one line before any work, not a note in the table after it
        from ddlperf.predictors.simulate.runner import check_options

        check_options(iterations, None, seed, replications, jitter)
    total = count(space, table)
    engine = make_executor(executor, executor_address, jobs)
    writer = RowWriter(rows, "--rows") if rows is not None else None
    start = time.perf_counter()
    try:
        with progress_bar("planning", total, progress) as update:
            result = run_plan(target, space, prices=table, fixed=fixed, executor=engine,
                              rows=writer, recheck=recheck, simulate_options=options,
                              progress=update)
    except BaseException:
        engine.close()
        if writer is not None:
            writer.discard()
        raise
    seconds = time.perf_counter() - start
    if writer is not None:
        result.rows_file = writer.close()
    _outputs(result, plot, html, json_output, seconds)
    if result.interrupted:
        where = f"; the {result.evaluated:,} finished rows are in {result.rows_file}" \
            if result.rows_file else ""
        print(f"interrupted after {result.evaluated:,} of {result.total:,} candidates{where}",
              file=sys.stderr)
        raise typer.Exit(130)


def _check_fixed(fixed: dict[str, Any], space: Any) -> None:
    """Bad model or workload flags fail before the search, as one line."""
    from ddlperf import api

    api.make_workload(**{k: v for k, v in fixed.items() if k in (
        "model", "workload", "batch_size", "dtype", "grad_dtype")},
        device=space.instances[0].device if "workload" not in fixed else None)
    if "sharding" in fixed:
        api.make_strategy(sharding=fixed["sharding"])
    if "latency" in fixed:
        from ddlperf.units import parse_duration as duration

        duration(fixed["latency"], "--latency")


def _outputs(result: Any, plot: Path | None, html: Path | None, json_output: bool,
             seconds: float) -> None:
    from ddlperf.report.plan_text import render, write_pareto_png

    if plot is not None and result.front:
        write_pareto_png(result, plot)
    if html is not None:
        from ddlperf.report.html import plan_report

        write_atomic(html, plan_report(result, "ddlperf " + " ".join(sys.argv[1:])))
    if json_output:
        print_json(result.to_dict())
        return
    console = make_console()
    render(result, console, seconds)
    for path, what in ((plot, "Pareto plot"), (html, "HTML report"),
                       (result.rows_file, "rows")):
        if path is not None:
            console.print(f"{what} written to {path}")
