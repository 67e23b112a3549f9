"""``ddlperf measure``: real distributed PyTorch training as ground truth (emulated cluster).

Exit status: 0 on success, 2 for bad input (including: not root, a link faster than this
machine can drive), 1 when the run fails (a rank crashed or hung, or the bytes on the wire do
not match the expected volume), 130 on Ctrl-C. The emulated cluster is always torn down.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ddlperf.cli.app import app
from ddlperf.cli.common import handle_input_errors, make_console, print_json
from ddlperf.cli.options import scenario_flags
from ddlperf.errors import InputError

if TYPE_CHECKING:
    from ddlperf.prediction import Prediction


def _quotas(items: list[str] | None) -> dict[str, float]:
    """``w1=0.5`` (repeatable) → {"w1": 0.5}."""
    out: dict[str, float] = {}
    for item in items or []:
        host, sep, value = item.partition("=")
        if not sep or not host.strip():
            raise InputError("--cpu-quota", f"{item!r} is not HOST=FRACTION", "e.g. w1=0.5")
        try:
            out[host.strip()] = float(value)
        except ValueError:
            raise InputError("--cpu-quota", f"{value!r} is not a number",
                             "give a share of one core, e.g. w1=0.5") from None
    return out


def _progress(message: str) -> None:
    print(f"… {message}", file=sys.stderr, flush=True)


@app.command()
@handle_input_errors
@scenario_flags("measure")
def measure(
    scenario: dict[str, Any],
    compute: Annotated[str, typer.Option(help="emulated (per-layer waits: emulated device time, drawn with the workload's per-layer cv) or real (the zoo model on CPU, ≤ 1 worker per core)")] = "emulated",
    iterations: Annotated[int, typer.Option(help="measured iterations after warm-up")] = 20,
    warmup: Annotated[int, typer.Option(help="warm-up iterations, excluded from the summary")] = 3,
    out: Annotated[Path | None, typer.Option(help="output directory (records.jsonl, measurement.json, logs); default ./ddlperf-measure-DATE-TIME")] = None,
    timeout: Annotated[float, typer.Option(help="seconds a rank may go without finishing an iteration (start-up: at least 60 s)")] = 60.0,
    launcher: Annotated[str, typer.Option(help="emulated (run here, needs root) or torchrun (print per-host commands; with --run: run them over ssh)")] = "emulated",
    hosts: Annotated[str | None, typer.Option(help="torchrun: real host names, comma-separated, in rank-table order")] = None,
    interface: Annotated[str, typer.Option(help="torchrun: network interface for gloo (GLOO_SOCKET_IFNAME)")] = "eth0",
    master_port: Annotated[int, typer.Option(help="torchrun: rendezvous port on the first host")] = 29500,
    run: Annotated[bool, typer.Option("--run", help="torchrun: start the commands on --hosts over ssh, copy the records back and summarize")] = False,
    ssh: Annotated[str, typer.Option(help="torchrun --run: the ssh client command")] = "ssh -o BatchMode=yes",
    remote_dir: Annotated[str | None, typer.Option(help="torchrun --run: working directory on the hosts (one subdirectory per role); default /tmp/ddlperf-<out name>")] = None,
    summarize: Annotated[Path | None, typer.Option(help="torchrun: summarize a finished run — the --out directory with every host's records-<host>.jsonl copied back; writes measurement.json there")] = None,
    cpu_quota: Annotated[list[str] | None, typer.Option(help="HOST=FRACTION of one core via cgroup, repeatable, e.g. w1=0.5")] = None,
    probe: Annotated[bool, typer.Option(help="probe every link's goodput before the run")] = True,
    backend: Annotated[str, typer.Option(help="gloo (CPU tensors over TCP) or nccl (CUDA GPUs, all-reduce; torchrun on GPU servers)")] = "gloo",
    nproc_per_node: Annotated[int | None, typer.Option(help="torchrun: ranks (GPUs) per server, the same as --gpus-per-node")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print one JSON object instead of tables")] = False,
) -> None:
    """Run real distributed PyTorch training (PS or DDP) on an emulated cluster and summarize it.

    Needs root: the cluster is network namespaces with HTB-shaped links on this machine.
    Defaults differ from predict's (mobilenet_v2, 2 workers, 1 PS, 100Mbps: what 2 cores can
    drive); give --model, --workers, --ps and --bandwidth to measure what you predicted.
    """
    from ddlperf.api import ignored_flags
    from ddlperf.measure import run as runner
    from ddlperf.measure import torchrun
    from ddlperf.measure.launcher import RunFailed

    if summarize is not None:
        _show(torchrun.summarize_torchrun(summarize), json_output)
        return

    model = scenario.pop("model", None)
    notes = ignored_flags(scenario.get("arch", "ps"), scenario.get("sync", "bsp"),
                          **{k: v for k, v in scenario.items() if k not in ("arch", "sync")})
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if nproc_per_node is not None:
        scenario["gpus_per_node"] = _nproc(nproc_per_node, scenario.get("gpus_per_node"),
                                           launcher)
    if launcher == "torchrun":
        if cpu_quota:
            raise InputError("--cpu-quota", "only applies to --launcher emulated")
        host_list = [h.strip() for h in hosts.split(",") if h.strip()] if hosts else None
        if run and not host_list:
            raise InputError("--run", "needs the machines to run on",
                             "give --hosts, one per role, comma-separated")
        plan = torchrun.torchrun_plan(model, hosts=host_list, out=out, compute=compute,
                                      iterations=iterations, warmup=warmup,
                                      interface=interface, port=master_port, backend=backend,
                                      **scenario)
        if run:
            from ddlperf.measure.remote import STARTUP_S, run_over_ssh

            run_dir = Path(plan["spec"]).parent
            try:
                result = run_over_ssh(
                    plan, host_list or [], ssh=ssh,
                    remote_dir=remote_dir or f"/tmp/ddlperf-{run_dir.resolve().name}",
                    deadline_s=STARTUP_S + timeout * (iterations + warmup + 1),
                    progress=_progress)
            except RunFailed as exc:
                print(f"error: {exc}", file=sys.stderr)
                raise typer.Exit(1) from None
            except KeyboardInterrupt:
                raise _interrupted("the hosts were stopped and their records copied back "
                                   f"into {run_dir}") from None
            _show(result, json_output, notes)
            return
        if json_output:
            print_json({"spec": plan["spec"], "compute": plan["compute"],
                        "commands": [{"host": h, "command": c} for h, c in plan["commands"]]})
            return
        where = "on each host" if host_list else "on each host (replace HOSTi by its address)"
        typer.echo(f"copy {plan['spec']} to the working directory of every host, then run "
                   f"{where}; compute: {plan['compute']}:")
        for host, command in plan["commands"]:
            typer.echo(f"# {host}")
            typer.echo(command)
        run_dir = Path(plan["spec"]).parent
        typer.echo("each host appends its per-iteration records (times, bytes) to "
                   "records-<role>.jsonl in its working directory; when all have finished, copy "
                   f"{', '.join(plan['records'])} into {run_dir} and run: "
                   f"ddlperf measure --summarize {run_dir}")
        return
    for flag, given in (("--hosts", hosts), ("--run", run), ("--remote-dir", remote_dir)):
        if given:
            raise InputError(flag, "only applies to --launcher torchrun")
    if launcher != "emulated":
        raise InputError("--launcher", f"unknown launcher {launcher!r}", "use emulated or torchrun")
    try:
        result = runner.measure(
            model, compute=compute, iterations=iterations, warmup=warmup, out=out,
            timeout=timeout, cpu_quota=_quotas(cpu_quota), probe=probe, progress=_progress,
            backend=backend, **scenario,
        )
    except RunFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise _interrupted("the emulated cluster was torn down") from None
    _show(result, json_output, notes)


def _nproc(nproc: int, gpus: int | None, launcher: str) -> int:
    """``--nproc-per-node`` is torchrun's name for the GPUs (ranks) of each server."""
    if launcher != "torchrun":
        raise InputError("--nproc-per-node", "only applies to --launcher torchrun",
                         "use --gpus-per-node for the emulated cluster")
    if nproc < 1:
        raise InputError("--nproc-per-node", f"must be at least 1, got {nproc}")
    if gpus is not None and gpus != nproc:
        raise InputError("--nproc-per-node", f"{nproc} contradicts --gpus-per-node {gpus}",
                         "give one of them")
    return nproc


def _interrupted(what: str) -> typer.Exit:
    """Ctrl-C: everything is cleaned up; say so and exit 130. A second Ctrl-C while the
    process winds down (joining threads, flushing) must not turn that into a signal death."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(f"error: interrupted; {what}", file=sys.stderr)
    return typer.Exit(130)


def _show(result: Prediction, json_output: bool, notes: list[str] | None = None) -> None:
    """The Measurement as a table (or JSON), its wire check and where it was written."""
    result.notes.extend(notes or [])
    if json_output:
        print_json(result.to_dict())
        return
    from ddlperf.report.table import render

    console = make_console()
    render(result, console)
    info = result.inputs["measure"]
    wire = info["wire_check"]
    resent = (f" (retransmitted {wire['retransmitted_bytes'] / 1e6:.2f} MB)"
              if info["launcher"] == "emulated" else "")
    console.print(f"wire check: {wire['message']}{resent}")
    records = info["records"]
    shown = ", ".join(records) if isinstance(records, list) else records
    # paths stay whole (copy-pasteable): plain lines, not wrapped
    typer.echo(f"records: {shown}")
    typer.echo(f"summary: {Path(info['out']) / 'measurement.json'}")
