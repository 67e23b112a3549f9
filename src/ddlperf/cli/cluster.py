"""``ddlperf cluster up|status|down``: an emulated cluster that outlives one command.

``up`` leaves the namespaces running and records them in /run/ddlperf/<run_id>.json; ``down``
removes them from that file, and also removes leftovers that no live process looks after.
"""

from __future__ import annotations

import datetime
import shlex
from typing import TYPE_CHECKING, Annotated

import typer

from ddlperf.cli.common import handle_input_errors, out_console, print_json
from ddlperf.errors import InputError
from ddlperf.report.fit import Col, fit_table
from ddlperf.units import format_bandwidth, parse_bandwidth, parse_duration

if TYPE_CHECKING:  # the emulated cluster and rich load when a cluster command runs
    from rich.table import Table

    from ddlperf.measure.emulated import EmulatedCluster, HostSpec

cluster_app = typer.Typer(
    name="cluster",
    help="Emulated cluster on this machine (network namespaces, HTB links, CPU quotas; root).",
    no_args_is_help=True,
)


def _rates(text: str, field: str) -> tuple[float, float]:
    """``100Mbps`` (both ways) or ``100Mbps/50Mbps`` (up/down)."""
    up, sep, down = text.partition("/")
    uplink = parse_bandwidth(up, field)
    return uplink, parse_bandwidth(down, field) if sep else uplink


def parse_host(
    text: str, default_rates: tuple[float, float], default_quota: float | None
) -> HostSpec:
    """``NAME[=UP[/DOWN]][,cpu=QUOTA]``, e.g. ``w0=100Mbps/50Mbps,cpu=0.5``."""
    from ddlperf.measure.emulated import HostSpec

    spec, *options = text.split(",")
    name, sep, rates = spec.partition("=")
    field = f"--host {name.strip()}"
    up, down = _rates(rates, field) if sep else default_rates
    quota = default_quota
    for option in options:
        key, _, value = option.partition("=")
        if key.strip() != "cpu":
            raise InputError(field, f"unknown option {option!r}", "only ',cpu=QUOTA' is known")
        try:
            quota = float(value)
        except ValueError:
            problem = f"cpu quota {value!r} is not a number"
            raise InputError(field, problem, "e.g. cpu=0.5") from None
    return HostSpec(name.strip(), up, down, quota)


def build_hosts(
    hosts: int | None, host: list[str] | None, bandwidth: str, cpu_quota: float | None
) -> list[HostSpec]:
    """Host list from ``--hosts N`` or repeated ``--host`` options."""
    from ddlperf.measure import emulated
    from ddlperf.measure.emulated import HostSpec

    default_rates = _rates(bandwidth, "--bandwidth")
    if hosts is not None and host:
        raise InputError("--hosts", "give either --hosts N or --host options, not both")
    if host:
        return [parse_host(text, default_rates, cpu_quota) for text in host]
    if hosts is None:
        raise InputError("--hosts", "no hosts given", "use --hosts 3 or --host w0=100Mbps ...")
    if hosts < 1 or hosts > emulated.MAX_HOSTS:
        raise InputError("--hosts", f"must be between 1 and {emulated.MAX_HOSTS}, got {hosts}")
    return [HostSpec(f"h{i}", *default_rates, cpu_quota) for i in range(hosts)]


@cluster_app.command("up")
@handle_input_errors
def up(
    hosts: Annotated[
        int | None, typer.Option("--hosts", help="N identical hosts h0..hN-1.")
    ] = None,
    host: Annotated[
        list[str] | None,
        typer.Option("--host", help="NAME=UP/DOWN[,cpu=QUOTA], repeatable, e.g. w0=1Gbps/1Gbps."),
    ] = None,
    bandwidth: Annotated[
        str, typer.Option(help="Line rate for --hosts (UP or UP/DOWN), e.g. 100Mbps.")
    ] = "100Mbps",
    cpu_quota: Annotated[
        float | None, typer.Option(help="CPU share of one core per host, e.g. 0.5.")
    ] = None,
    buffer: Annotated[
        str, typer.Option(help="Queue per shaped link, as time at its rate (a switch port's per-sender queue holds at least 1 MB).")
    ] = "20ms",
    run_id: Annotated[str | None, typer.Option(help="Run id (default: random).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the state as JSON.")] = False,
) -> None:
    """Bring an emulated cluster up and leave it running."""
    from ddlperf.measure.emulated import EmulatedCluster

    specs = build_hosts(hosts, host, bandwidth, cpu_quota)
    buffer_s = parse_duration(buffer, "--buffer", allow_zero=False)
    cluster = EmulatedCluster.up(specs, buffer_s=buffer_s, run_id=run_id)
    console = out_console()
    if json_out:
        print_json(cluster.to_state())
        return
    console.print(f"cluster [bold]{cluster.run_id}[/bold] is up (state: {cluster.state_path})")
    console.print(_host_table(cluster, console.width))
    first = cluster.hosts[0].name
    # Plain echo, not rich: command lines must stay copy-pasteable (no wrapping, no markup).
    typer.echo(f"run a command on {first}:")
    typer.echo(f"  {shlex.join(cluster.command(first, ['CMD', 'ARGS...']))}")
    typer.echo(f"tear it down:  ddlperf cluster down {cluster.run_id}")


def _host_table(cluster: EmulatedCluster, width: int = 80) -> Table:
    columns = [Col("host", "left"), Col("ip", "left"), Col("namespace", "left", drop=1),
               Col("uplink"), Col("downlink"), Col("cpu quota", drop=2)]
    cells = []
    for h in cluster.hosts:
        quota = "-" if h.cpu_quota is None else f"{h.cpu_quota:g}"
        rates = format_bandwidth(h.uplink_bps), format_bandwidth(h.downlink_bps)
        cells.append([h.name, cluster.ip(h.name), cluster.namespace(h.name), *rates, quota])
    table, _dropped = fit_table(columns, cells, width)
    return table


def _describe(rid: str, cluster: EmulatedCluster | None) -> dict[str, object]:
    if cluster is None:
        return {"run_id": rid, "state": "unreadable state file"}
    created = cluster.created_at
    owner = "kept (cluster up)" if cluster.keep else f"temporary, pid {cluster.owner_pid}"
    alive = cluster.alive()
    return {
        "run_id": rid,
        "state": "up" if alive else "partly gone",
        "owner": owner,
        "hosts": len(cluster.hosts),
        "created": None
        if created is None
        else datetime.datetime.fromtimestamp(created).isoformat(timespec="seconds"),
        "namespaces_ok": alive,
    }


@cluster_app.command("status")
@handle_input_errors
def status(
    json_out: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """List emulated clusters from their state files and check their namespaces."""
    from rich.table import Table

    from ddlperf.measure import emulated

    states = emulated.read_states()
    rows = [_describe(rid, cluster) for rid, cluster in states.items()]
    orphans = sorted(emulated.orphan_run_ids(states))
    if json_out:
        print_json({"clusters": rows, "orphans": orphans})
        return
    console = out_console()
    if not rows:
        console.print("no emulated clusters")
    else:
        table = Table("run id", "state", "owner", "hosts", "created")
        for row in rows:
            table.add_row(
                *(str(row.get(k, "")) for k in ("run_id", "state", "owner", "hosts", "created"))
            )
        console.print(table)
        for rid, cluster in states.items():
            if cluster is not None:
                console.print(f"[bold]{rid}[/bold]")
                console.print(_host_table(cluster, console.width))
    if orphans:
        console.print(
            f"orphaned runs (clean with `ddlperf cluster down --all`): {', '.join(orphans)}",
            highlight=False,
        )


@cluster_app.command("down")
@handle_input_errors
def down(
    run_id: Annotated[str | None, typer.Argument(help="Run id shown by `cluster up`.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every kept cluster and orphan.")] = False,
) -> None:
    """Tear clusters down (and any orphaned ddlperf namespaces and cgroups)."""
    from ddlperf.measure import emulated

    emulated.require_root()
    if run_id is None and not all_:
        raise InputError("RUN_ID", "no cluster named", "give a RUN_ID or --all")
    states = emulated.read_states()
    orphans = emulated.orphan_run_ids(states)
    targets: set[str] = set(orphans)
    console = out_console()
    if run_id is not None:
        if run_id not in states and run_id not in emulated.leftover_run_ids():
            raise InputError("RUN_ID", f"no cluster {run_id!r}", "see `ddlperf cluster status`")
        targets.add(run_id)
    if all_:
        for rid, cluster in states.items():
            if cluster is not None and not cluster.keep and rid not in orphans:
                console.print(
                    f"skipping {rid}: a temporary cluster of live pid {cluster.owner_pid}",
                    highlight=False,
                )
            else:
                targets.add(rid)
    for rid in sorted(targets):
        cluster = states.get(rid)
        if cluster is not None:
            cluster.teardown()
        emulated.remove_run(rid)  # anything the state file did not name
        note = " (orphan)" if rid in orphans and rid != run_id else ""
        console.print(f"removed {rid}{note}", highlight=False)
    if not targets:
        console.print("nothing to remove")
