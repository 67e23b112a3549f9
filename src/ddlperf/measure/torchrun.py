"""Ground truth on real machines: the same trainers under ``torchrun``, then one summary.

1. :func:`torchrun_plan` resolves the scenario exactly as ``predict`` and ``measure`` do and
   writes ``OUT/spec.json`` (what the trainers run) and ``OUT/scenario.json`` (the workload,
   cluster and strategy it came from), and returns one ``torchrun`` command line per host.
2. Each host runs its command in a working directory holding ``spec.json``; every rank appends
   its per-iteration records to ``records-<host>.jsonl`` there as it goes.
3. The user copies those files back into ``OUT``; :func:`summarize_torchrun` merges them and
   writes ``OUT/measurement.json`` — the same keys as a Prediction, as the emulated launcher.

There is no bridge to count bytes on and no link probe on real machines: the records' own NIC
counters (the interface of ``GLOO_SOCKET_IFNAME``) must show at least the payload each worker
moved (a lower bound only: other traffic on a real host counts too), and link utilization is
inferred from the configured rates × goodput.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ddlperf.api import make_cluster, make_workload
from ddlperf.errors import InputError
from ddlperf.io import write_atomic
from ddlperf.measure.asp_counts import asp_iteration_counts
from ddlperf.measure.launcher import MASTER_PORT, torchrun_commands
from ddlperf.measure.records import read_records, summarize, write_summary
from ddlperf.measure.run import (
    build_spec,
    check_backend,
    check_options,
    host_specs,
    measurement_context,
    model_for_real,
    prepare_out,
    resolve_scenario,
)
from ddlperf.measure.servers import split_communication
from ddlperf.measure.trainer_common import EMULATED_LABEL, REAL_LABEL, hosts_of, rank_table
from ddlperf.prediction import Prediction
from ddlperf.scenario import resolve
from ddlperf.schema import read_structured, validate
from ddlperf.strategy import Strategy

SCENARIO_FILE = "scenario.json"
SPEC_FILE = "spec.json"
NIC_TOLERANCE = 0.10  # a NIC must have carried at least 90% of the payload
SCENARIO_KEYS = ("workload", "cluster", "strategy", "batch_size", "device", "workers", "ps",
                 "placement", "arch", "sync", "staleness", "sharding", "overlap",
                 "bucket_size", "bandwidth", "latency", "gpus_per_node", "intra", "nics",
                 "rack_size", "rack_uplink", "allreduce", "local_aggregation", "accumulation")


def records_file(host: str) -> str:
    """Where the ranks of role host ``host`` (w0, ps0, …) append their records."""
    return f"records-{host}.jsonl"


def torchrun_plan(
    model: str | None = None,
    *,
    hosts: list[str] | None = None,
    out: str | Path | None = None,
    compute: str = "emulated",
    iterations: int = 20,
    warmup: int = 3,
    interface: str = "eth0",
    port: int = MASTER_PORT,
    backend: str = "gloo",
    **scenario: Any,
) -> dict[str, Any]:
    """Write ``OUT/spec.json`` and ``OUT/scenario.json``; return the per-host torchrun command
    lines (nothing runs here). ``port``: the rendezvous port on the first host."""
    if not 1 <= port <= 65535:
        raise InputError("--master-port", f"must be a TCP port (1–65535), got {port}")
    check_options(compute, iterations, warmup, 60.0, "torchrun")
    unknown = sorted(set(scenario) - set(SCENARIO_KEYS))
    if unknown:
        raise InputError(unknown[0], "is not a scenario option")
    args = {k: scenario.get(k) for k in SCENARIO_KEYS}
    args["arch"] = args["arch"] or "ps"
    args["sync"] = args["sync"] or "bsp"
    args["sharding"] = args["sharding"] or "round_robin"
    args["overlap"] = True if args["overlap"] is None else args["overlap"]
    sc = resolve_scenario(model, **args)  # type: ignore[arg-type]
    check_backend(backend, "torchrun", sc.strategy.arch)
    model_name = model_for_real(sc, model) if compute == "real" else None
    spec = build_spec(sc, compute=compute, iterations=iterations, warmup=warmup,
                      model=model_name, backend=backend)
    for index, count in asp_iteration_counts(sc, spec).items():
        spec["workers"][index]["iterations"] = count  # faster ASP workers run on meanwhile
    run_dir = prepare_out(out)
    spec["records"] = "records.jsonl"
    commands = torchrun_commands(spec, SPEC_FILE, hosts, port=port, interface=interface)
    resolved = {"workload": sc.workload.to_dict(), "cluster": sc.cluster.to_dict(),
                "strategy": sc.strategy.to_dict()}
    write_atomic(run_dir / SCENARIO_FILE, json.dumps(resolved, indent=1) + "\n")
    write_atomic(run_dir / SPEC_FILE, json.dumps(spec, indent=1) + "\n")
    return {"spec": str(run_dir / SPEC_FILE), "commands": commands,
            "hosts": hosts_of(rank_table(spec)),
            "records": [records_file(h) for h in hosts_of(rank_table(spec))],
            "compute": REAL_LABEL if compute == "real" else EMULATED_LABEL}


def _load(directory: Path, name: str) -> dict[str, Any]:
    path = directory / name
    if not path.is_file():
        raise InputError("--summarize", f"{path} not found",
                         "give the --out directory of 'ddlperf measure --launcher torchrun'")
    data = read_structured(path, field=str(path))
    if not isinstance(data, dict):
        raise InputError(str(path), "is not a JSON object",
                         "regenerate it with --launcher torchrun")
    return data


def gather_records(directory: Path, hosts: list[str]) -> list[dict[str, Any]]:
    """Every host's records, merged; a missing host file is an error naming the host."""
    missing = [h for h in hosts if not (directory / records_file(h)).is_file()]
    if missing:
        names = ", ".join(records_file(h) for h in missing)
        raise InputError("--summarize", f"no records from host {', '.join(missing)} "
                         f"({names} not in {directory})",
                         "copy each host's records-<host>.jsonl from its working directory")
    merged: list[dict[str, Any]] = []
    for host in hosts:
        records, _skipped = read_records(directory / records_file(host))
        merged.extend(records)
    return merged


def nic_check(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Each worker's NIC (GLOO_SOCKET_IFNAME) must have carried ≥ 90% of the payload it sent
    to and received from other hosts — traffic that took a shortcut (shared memory, another
    interface) would not show up there. Only a lower bound: a real host has other traffic."""
    totals: dict[str, dict[str, float]] = {}
    unchecked: set[str] = set()
    for r in records:
        if r.get("type") != "iteration":
            continue
        name = str(r["name"])
        t = totals.setdefault(name, {"payload": 0.0, "sent": 0.0, "received": 0.0})
        if "wire_sent_bytes" not in r:
            unchecked.add(name)
            continue
        t["payload"] += float(r.get("remote_payload_bytes", r.get("payload_sent_bytes", 0)))
        t["sent"] += float(r["wire_sent_bytes"])
        t["received"] += float(r["wire_received_bytes"])
    rows = []
    for name in sorted(totals):
        t = totals[name]
        if name in unchecked or t["payload"] <= 0:
            continue
        for direction in ("sent", "received"):
            ratio = t[direction] / t["payload"]
            rows.append({"worker": name, "direction": direction, "payload_bytes": t["payload"],
                         "nic_bytes": t[direction], "ratio": ratio,
                         "ok": ratio >= 1.0 - NIC_TOLERANCE})
    bad = [row for row in rows if not row["ok"]]
    if not rows:
        message = "not checked: the records have no NIC counters (GLOO_SOCKET_IFNAME unset?)"
    elif bad:
        first = bad[0]
        message = (f"{first['worker']} {first['direction']} {first['nic_bytes'] / 1e6:.2f} MB "
                   f"on its NIC for {first['payload_bytes'] / 1e6:.2f} MB of payload: traffic "
                   "bypassed GLOO_SOCKET_IFNAME (wrong interface or shared memory?)")
    else:
        message = "every worker's NIC carried at least its payload"
    return {"ok": not bad, "checked": bool(rows), "tolerance": NIC_TOLERANCE,
            "links": rows, "message": message,
            "note": "NIC counters of GLOO_SOCKET_IFNAME per worker; a lower bound on a real host"}


def summarize_torchrun(directory: str | Path) -> Prediction:
    """Merge the hosts' ``records-<host>.jsonl`` in ``directory`` (next to the ``spec.json``
    and ``scenario.json`` that :func:`torchrun_plan` wrote) into ``measurement.json``."""
    run_dir = Path(directory)
    if not run_dir.is_dir():
        raise InputError("--summarize", f"{run_dir} is not a directory",
                         "give the --out directory of 'ddlperf measure --launcher torchrun'")
    spec = _load(run_dir, SPEC_FILE)
    resolved = _load(run_dir, SCENARIO_FILE)
    try:
        sc = resolve(make_workload(workload=resolved["workload"]),
                     make_cluster(resolved["cluster"]),
                     validate(Strategy, resolved["strategy"], prefix="strategy"))
        table = rank_table(spec)
    except (KeyError, TypeError, AttributeError) as exc:
        raise InputError(str(run_dir / SCENARIO_FILE), f"is incomplete ({exc})",
                         "regenerate it with --launcher torchrun") from None
    records = gather_records(run_dir, hosts_of(table))
    wire = nic_check(records)
    hosts = host_specs(sc, table, {}, emulated=False)
    context = measurement_context(sc, spec, records, {}, None, hosts, wire, {}, run_dir,
                                  "torchrun", 0, launcher="torchrun")
    context["inputs"]["measure"]["records"] = [records_file(h) for h in hosts_of(table)]
    try:
        measurement = summarize(records, context)
        split_communication(measurement, spec, records)
    except ValueError as exc:
        raise InputError("--summarize", f"{exc} in {run_dir}",
                         "run the commands to the end and copy every host's records") from None
    if not wire["ok"]:
        measurement.notes.insert(0, "INVALID: " + wire["message"])
        write_summary(run_dir / "measurement.invalid.json", measurement)
        raise InputError("--summarize", wire["message"],
                         "set GLOO_SOCKET_IFNAME to the NIC between the hosts")
    write_summary(run_dir / "measurement.json", measurement)
    return measurement
