"""``measure``: real distributed PyTorch training on an emulated cluster, as ground truth.

>>> from ddlperf.measure.run import measure
>>> m = measure(workload="small.json", workers=2, ps=1, bandwidth="100Mbps", out="run1")
>>> m.iteration_time_s, m.percentiles["iteration_time_s"], m.inputs["measure"]["wire_check"]

Steps (all inside one :class:`~ddlperf.measure.emulated.EmulatedCluster`, torn down on exit,
on errors and on Ctrl-C):
1. resolve the scenario exactly as ``predict`` does (same workload, cluster, strategy, same
   sharding placement), and write the trainers' spec to ``OUT/spec.json``;
2. probe every link's achieved goodput (stored in the result);
3. real compute only: time a single worker alone, no communication (the speedup baseline);
4. start one process per rank (workers, PS shards) and watch them; a crash or a rank without
   progress for ``timeout`` seconds stops the run, naming the rank;
5. compare the bytes counted on the bridge ports with the expected volume; more than 10% off
   fails loudly (this catches traffic that bypassed the emulated network);
6. summarize the steady state into a Measurement (``OUT/measurement.json``, atomic).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddlperf.api import make_cluster, make_strategy, make_workload, worker_defaults
from ddlperf.cluster import Cluster
from ddlperf.errors import InputError
from ddlperf.io import prepare_output_dir, write_atomic
from ddlperf.measure import cpu_precedence, servers
from ddlperf.measure.asp_counts import asp_iteration_counts, worker_totals
from ddlperf.measure.counters import link_counts, tcp_resent, tcp_segments
from ddlperf.measure.launcher import (
    RunFailed,
    build_spec,
    run_emulated,
)
from ddlperf.measure.rank_quotas import in_rank_quota, split_quotas
from ddlperf.measure.records import append_record, read_records, summarize, write_summary
from ddlperf.measure.servers import max_link_bps as max_link_bps  # validate's rate limit
from ddlperf.measure.traffic import expected_flows, host_links, link_loads
from ddlperf.measure.trainer_common import EMULATED_LABEL, rank_table
from ddlperf.prediction import Prediction
from ddlperf.scenario import Scenario, resolve
from ddlperf.strategy import Strategy
from ddlperf.units import format_duration, format_size
from ddlperf.workload import Workload

DEFAULT_MODEL = "mobilenet_v2"
DEFAULT_BANDWIDTH = "100Mbps"
WIRE_TOLERANCE = 0.10
WIRE_MIN_BYTES = 1e6  # links expected to carry less are not judged (handshakes dominate)
COMPUTE_MODES = ("emulated", "real")
LAUNCHERS = ("emulated", "torchrun")


class WireCheckFailed(RunFailed):
    """Bytes on the bridge ports differ from the expected volume by more than 10%."""


# ----------------------------------------------------------------------------- inputs


def resolve_scenario(
    model: str | None, workload: Workload | str | Path | dict[str, Any] | None,
    cluster: Cluster | str | Path | dict[str, Any] | None, strategy: Strategy | None,
    batch_size: int | None, device: str | None, workers: int | None, ps: int | None,
    placement: str | None, arch: str, sync: str, staleness: int | None, sharding: str,
    overlap: bool, bucket_size: str | float | None, bandwidth: str | float | None,
    latency: str | float | None, accumulation: int | None = None, **servers: Any,
) -> Scenario:
    """The scenario as ``predict`` resolves it; ``accumulation``: micro-batches per
    synchronisation; ``servers``: ``gpus_per_node``, ``intra``, ``nics``, ``rack_size``,
    ``rack_uplink`` (cluster) and ``allreduce``, ``local_aggregation`` (strategy), as
    :func:`ddlperf.api.predict` takes them."""
    if model is None and workload is None:
        model = DEFAULT_MODEL
    the_workload = make_workload(model, workload, batch_size, device,
                                 accumulation=accumulation)
    allreduce = servers.pop("allreduce", None) or "ring"
    aggregation = bool(servers.pop("local_aggregation", None))
    servers = {k: v for k, v in servers.items() if v is not None}
    if strategy is None:
        strategy = make_strategy(arch, sync, staleness, sharding, overlap, bucket_size,
                                 allreduce, aggregation)
    if cluster is None:
        workers = 2 if workers is None else workers
        ps = (1 if strategy.arch == "ps" else 0) if ps is None else ps
        bandwidth = DEFAULT_BANDWIDTH if bandwidth is None else bandwidth
    the_cluster = make_cluster(cluster, workers, ps, bandwidth, latency, None, placement,
                               strategy.arch, **worker_defaults(workload, batch_size, device),
                               **servers)
    if the_cluster.transport is not None:  # a framework's software limit, not the wire
        raise InputError("transport", "a measurement runs ddlperf's own trainers over their "
                         "own transport (gloo / TensorPipe over TCP)",
                         "drop transport: from the cluster file; it is for predictions")
    return resolve(the_workload, the_cluster, strategy)


def step_estimate(sc: Scenario, real_model: str | None = None) -> float:
    """About how long one iteration of the run takes, for progress messages (not a result):
    the analytic prediction, with real compute at least the zoo model's step on the device
    catalog's CPU core."""
    from ddlperf.predictors.analytic import predict_analytic

    step = predict_analytic(sc).iteration_time_s
    if real_model is not None:
        cpu = make_workload(real_model, None, sc.groups[0].batch_size, "cpu")
        step = max(step, cpu.compute_s)
    return step


def check_options(compute: str, iterations: int, warmup: int, timeout: float,
                   launcher: str) -> None:
    if compute not in COMPUTE_MODES:
        raise InputError("--compute", f"unknown compute mode {compute!r}",
                         f"use one of {', '.join(COMPUTE_MODES)}")
    if launcher not in LAUNCHERS:
        raise InputError("--launcher", f"unknown launcher {launcher!r}",
                         f"use one of {', '.join(LAUNCHERS)}")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise InputError("--iterations", f"must be a whole number ≥ 1, got {iterations!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise InputError("--warmup", f"must be a whole number ≥ 0, got {warmup!r}")
    if not isinstance(timeout, (int, float)) or not 1 <= timeout <= 86400:
        raise InputError("--timeout", f"must be between 1 and 86400 seconds, got {timeout!r}")


def model_for_real(sc: Scenario, model: str | None) -> str:
    name = model or sc.workload.provenance.get("model")
    from ddlperf.workload import zoo

    if not name or name not in zoo.names():
        raise InputError("--compute", "real compute needs a zoo model (--model NAME) to run",
                         "use --model, or --compute emulated for a workload file")
    return str(name)


def _check_real(sc: Scenario) -> None:
    cores = os.cpu_count() or 1
    computing = sc.worker_count
    if computing > cores:
        raise InputError("--compute", f"real compute with {computing} workers on {cores} cores "
                         "is not trustworthy (keep ≤ 1 computing process per core)",
                         f"use --workers {cores} or --compute emulated")


def host_specs(sc: Scenario, table: list[dict[str, Any]], quotas: dict[str, float],
               emulated: bool = True) -> list[Any]:
    """Each host's rates, loopback, rack and CPU quota (:func:`ddlperf.measure.servers.
    host_specs`); ``emulated``: refuse what this machine cannot emulate."""
    return servers.host_specs(sc, table, quotas, emulated)


def prepare_out(out: str | Path | None) -> Path:
    default = f"ddlperf-measure-{time.strftime('%Y%m%d-%H%M%S')}"
    path = Path(out) if out is not None else Path(default)
    return prepare_output_dir(path, "--out", ("records.jsonl", "measurement.json", "spec.json"),
                              "a measurement", "choose a new directory")


# ----------------------------------------------------------------------------- the API


def measure(
    model: str | None = None,
    *,
    workload: Workload | str | Path | dict[str, Any] | None = None,
    cluster: Cluster | str | Path | dict[str, Any] | None = None,
    strategy: Strategy | None = None,
    batch_size: int | None = None,
    device: str | None = None,
    workers: int | None = None,
    ps: int | None = None,
    placement: str | None = None,
    arch: str = "ps",
    sync: str = "bsp",
    staleness: int | None = None,
    sharding: str = "round_robin",
    overlap: bool = True,
    bucket_size: str | float | None = None,
    bandwidth: str | float | None = None,
    latency: str | float | None = None,
    compute: str = "emulated",
    iterations: int = 20,
    warmup: int = 3,
    out: str | Path | None = None,
    timeout: float = 60.0,
    cpu_quota: dict[str, float] | None = None,
    probe: bool = True,
    probe_seconds: float = 1.0,
    check_wire: bool = True,
    progress: Callable[[str], None] | None = None,
    gpus_per_node: int | None = None,
    intra: str | float | None = None,
    nics: int | None = None,
    rack_size: int | None = None,
    rack_uplink: str | float | None = None,
    allreduce: str | None = None,
    local_aggregation: bool | None = None,
    backend: str = "gloo",
    accumulation: int | None = None,
) -> Prediction:
    """Run one scenario for real on an emulated cluster; return its Measurement.

    Scenario arguments are those of :func:`ddlperf.api.predict` (defaults here: mobilenet_v2,
    2 workers, 1 PS for ``arch='ps'``, 100Mbps links). ``compute`` is ``'emulated'`` (per-layer
    waits of the workload's times: emulated device time) or ``'real'`` (the zoo model on CPU).
    ``timeout``: seconds a rank may go without finishing an iteration (until its first one:
    at least 60 s, for imports and rendezvous).
    ``cpu_quota``: host name → share of one core (cgroup), e.g. ``{"w1": 0.5}``; on servers a
    host is a server (``node1``), all its ranks in the quota, and a rank (``node1/gpu0``) is
    that rank alone (:mod:`ddlperf.measure.rank_quotas`).
    ``accumulation``: micro-batches per synchronisation, each computed for real (DDP's
    ``no_sync``; a PS worker pushes after the last), as ``predict`` prices them.
    Servers and racks (``gpus_per_node`` … ``local_aggregation``) as in ``predict``; see
    :mod:`ddlperf.measure.servers` for how they are emulated. ``backend``: gloo (nccl needs
    CUDA GPUs, which the emulated cluster has not).
    Raises :class:`InputError` for bad input or missing root, :class:`RunFailed` when a rank
    crashes or hangs, :class:`WireCheckFailed` when the bytes on the wire do not add up.
    """
    from ddlperf.measure.emulated import EmulatedCluster, require_root

    check_options(compute, iterations, warmup, timeout, "emulated")
    check_backend(backend, "emulated", strategy.arch if strategy is not None else arch)
    sc = resolve_scenario(model, workload, cluster, strategy, batch_size, device, workers, ps,
                          placement, arch, sync, staleness, sharding, overlap, bucket_size,
                          bandwidth, latency, accumulation, gpus_per_node=gpus_per_node,
                          intra=intra, nics=nics, rack_size=rack_size, rack_uplink=rack_uplink,
                          allreduce=allreduce, local_aggregation=local_aggregation)
    model_name = model_for_real(sc, model) if compute == "real" else None
    if compute == "real":
        _check_real(sc)
    spec = build_spec(sc, compute=compute, iterations=iterations, warmup=warmup,
                      model=model_name)
    for index, count in asp_iteration_counts(sc, spec, cpu_quota).items():
        spec["workers"][index]["iterations"] = count  # faster ASP workers run on meanwhile
    table = rank_table(spec)
    host_quotas, rank_quotas = split_quotas(table, dict(cpu_quota or {}))
    hosts = host_specs(sc, table, host_quotas)
    if rank_quotas:
        spec["rank_quotas"] = rank_quotas
    if len(table) < 2:
        raise InputError("--workers", "a measurement needs at least two ranks",
                         "use --workers 2 or more, --gpus-per-node 2 or more, or a PS")
    require_root()
    say = progress or (lambda _msg: None)
    run_dir = prepare_out(out)
    records = run_dir / "records.jsonl"
    spec.update(records=str(records), status_dir=str(run_dir / "status"),
                op_timeout_s=max(600.0, 4 * timeout))
    spec_path = run_dir / "spec.json"
    write_atomic(spec_path, json.dumps(spec, indent=1) + "\n")
    durations: dict[str, float] = {}
    began = time.monotonic()
    append_record(records, {"type": "run", "name": "launcher", "time": time.time(),
                            "compute": spec["compute_label"], "arch": spec["arch"],
                            "sync": spec["sync"], "workers": len(spec["workers"]),
                            "shards": spec["shards"], "iterations": iterations,
                            "warmup": warmup})
    emulated = EmulatedCluster(hosts, racks=servers.rack_specs(sc))
    links = host_links(spec)
    try:
        with emulated as net:
            durations["setup_s"] = time.monotonic() - began
            probed: dict[str, Any] = {}
            if probe and len(hosts) > 1:  # one server: no NIC traffic, nothing to probe
                say(f"probing {2 * len(hosts)} links ({probe_seconds:g} s each)")
                t0 = time.monotonic()
                from ddlperf.measure.probe import probe_until_steady

                try:
                    probed, probe_attempts = probe_until_steady(net, probe_seconds, say=say)
                except RuntimeError as exc:  # a probe process died (or Ctrl-C reached it first)
                    raise RunFailed(f"link probe failed: {exc}") from None
                durations["probe_s"] = time.monotonic() - t0
                append_record(records, {"type": "probe", "name": "launcher", "time": time.time(),
                                        "links": probed, "attempts": probe_attempts})
            single = None
            step = step_estimate(sc, model_name)
            if compute == "real":
                count = max(3, min(iterations, 10)) + max(1, min(warmup, 3))
                say(f"timing one worker alone: {count} steps of {model_name} batch "
                    f"{sc.groups[0].batch_size} on this CPU (real compute, no communication), "
                    f"about {format_duration(step)} each by the catalog's CPU core: "
                    f"~{format_duration(count * step)}")
                t0 = time.monotonic()
                single = _single_real(net, spec, spec_path, hosts, iterations, warmup, timeout)
                durations["single_worker_s"] = time.monotonic() - t0
            say(f"starting {len(table)} ranks on {len(hosts)} emulated hosts "
                f"(run {net.run_id}, records: {records}); {iterations + warmup} iterations of "
                f"about {format_duration(step)} each (estimate): "
                f"~{format_duration((iterations + warmup) * step)} after start-up")
            counts_before, tcp_before = link_counts(net, links), tcp_segments(net)
            try:
                result = run_emulated(net, spec, spec_path, run_dir, timeout, say)
            except RunFailed as exc:
                append_record(records, {"type": "failure", "name": "launcher",
                                        "time": time.time(), "rank": exc.rank_name,
                                        "error": str(exc)})
                raise
            durations["training_s"] = result.seconds
            counts_after, tcp_after = link_counts(net, links), tcp_segments(net)
            run_id = net.run_id
    finally:
        durations["total_s"] = time.monotonic() - began
    wire = wire_check(spec, counts_before, counts_after)
    wire["tcp"] = tcp_resent(tcp_before, tcp_after)
    all_records, skipped = read_records(records)
    context = measurement_context(sc, spec, all_records, probed, single, hosts, wire,
                                  durations, run_dir, run_id, skipped)
    measurement = summarize(all_records, context)
    servers.split_communication(measurement, spec, all_records)
    append_record(records, {"type": "end", "name": "launcher", "time": time.time(),
                            "iteration_time_s": measurement.iteration_time_s,
                            "wire_ok": wire["ok"]})
    if check_wire and not wire["ok"]:
        invalid = run_dir / "measurement.invalid.json"
        measurement.notes.insert(0, "INVALID: " + wire["message"])
        write_summary(invalid, measurement)
        raise WireCheckFailed(f"{wire['message']} — results kept in {invalid}")
    write_summary(run_dir / "measurement.json", measurement)
    return measurement


def wire_check(spec: dict[str, Any], before: dict[str, int], after: dict[str, int]
               ) -> dict[str, Any]:
    """Bytes counted on every link vs the payload the trainers had to move (link names as
    :func:`ddlperf.measure.counters.link_counts` gives them).

    Expected = payload of every iteration, warm-up included (PS: one more pull per worker, the
    final parameters; the probe ran before the ``before`` snapshot), per link
    (:mod:`ddlperf.measure.traffic`). Port counts include TCP/IP headers (with GSO between
    payload and payload / 0.956) and ACKs (~1% of the reverse direction): a NIC downlink (bytes
    delivered to a host) must lie within ±10% of its payload. An uplink also counts segments
    the switch dropped and the sender retransmitted (shaped queues overflow when several
    senders burst into one downlink): it must lie between −10% and +10% plus every byte the
    switch dropped (Σ uplinks − Σ downlinks); so must a rack link, which a retransmission
    crosses again. A server's loopback (``node0 intra``: its ranks' classes) must carry its
    intra-node payload within ±10%, and what crossed it outside every rank's class (``node0
    loopback other``) at most 10% of that. A link is judged when it should carry, or did
    carry, at least 1 MB.
    """
    totals = worker_totals(spec)
    flows = [f for total in set(totals.values())
             for f in expected_flows(spec, pushes=total,
                                     pulls=total + 1 if spec["arch"] == "ps" else total)
             if totals.get(f.worker, total) == total]
    total = max(totals.values())
    loads = {link: sum(by_worker.values()) for link, by_worker in link_loads(spec, flows).items()}
    delta = {link: after[link] - before.get(link, 0) for link in after}
    nics = [k for k in delta if not k.startswith("rack") and k.endswith(("uplink", "downlink"))]
    dropped = max(0, sum(delta[k] for k in nics if k.endswith("uplink"))
                  - sum(delta[k] for k in nics if k.endswith("downlink")))
    rows, bad = [], []
    for link, measured in delta.items():
        if link.endswith(" loopback other"):
            host = link.removesuffix(" loopback other")
            intra = loads.get(f"{host} intra", 0.0)
            judged = intra >= WIRE_MIN_BYTES
            ok = not judged or measured <= WIRE_TOLERANCE * intra
            rows.append({"link": link, "expected_bytes": 0.0, "measured_bytes": measured,
                         "ratio": None, "judged": judged, "ok": ok})
        else:
            expected = loads.get(link, 0.0)
            ratio = measured / expected if expected > 0 else None
            judged = max(expected, measured) >= WIRE_MIN_BYTES
            resent = link.endswith("uplink") or link.startswith("rack")
            high = WIRE_TOLERANCE * expected + (dropped if resent else 0)
            ok = not judged or -WIRE_TOLERANCE * expected <= measured - expected <= high
            rows.append({"link": link, "expected_bytes": expected, "measured_bytes": measured,
                         "ratio": ratio, "judged": judged, "ok": ok})
        if not ok:
            bad.append(rows[-1])
    message = "bytes on the wire match the expected volume within 10%"
    if bad:
        worst = max(bad, key=lambda r: abs((r["ratio"] or 1e9) - 1))
        ratio = f"×{worst['ratio']:.3f}" if worst["ratio"] is not None else "none expected"
        message = (f"bytes on the wire differ from the expected volume by more than 10% on "
                   f"{len(bad)} link(s); worst {worst['link']}: measured "
                   f"{format_size(worst['measured_bytes'])}, expected "
                   f"{format_size(worst['expected_bytes'])} ({ratio}); traffic "
                   "may have bypassed the emulated network (shared memory?) or a rank did "
                   "extra work")
    return {"ok": not bad, "tolerance": WIRE_TOLERANCE, "iterations_counted": total,
            "retransmitted_bytes": dropped, "links": rows, "message": message,
            "note": "expected = trainer payload; port counts add TCP/IP headers (GSO: between "
                    "payload and payload/0.956), ACKs and, on uplinks and rack links, "
                    "retransmissions of segments the switch dropped; loopback counts are "
                    "each rank's class on lo"}


def _single_real(net: Any, spec: dict[str, Any], spec_path: Path, hosts: list[Any],
                 iterations: int, warmup: int, timeout: float) -> dict[str, Any]:
    """Median step of the real model alone on the fastest worker (its host's or its own CPU
    quota)."""
    quota = {h.name: h.cpu_quota for h in hosts}
    rank_quotas = spec.get("rank_quotas") or {}

    def cores(w: dict[str, Any]) -> float:
        caps = [q for q in (quota.get(w.get("host", w["name"])), rank_quotas.get(w["name"]))
                if q is not None]
        return min(caps) if caps else 1e9

    worker = max(spec["workers"], key=cores)  # the first of the fastest
    index = int(worker["index"])
    best = next(h for h in hosts if h.name == worker.get("host", worker["name"]))
    entry = next(e for e in rank_table(spec) if e["role"] == "worker" and e["index"] == index)
    count = max(3, min(iterations, 10))
    argv = in_rank_quota(net, entry, rank_quotas.get(worker["name"]), [
        sys.executable, "-m", "ddlperf.measure.compute", "--spec", str(spec_path),
        "--single", str(index), "--iterations", str(count), "--warmup",
        str(max(1, min(warmup, 3)))])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = net.popen(best.name, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     text=True, env=env, start_new_session=True)
    cpu_precedence.claim(proc.pid)  # timed like the ranks it is compared with
    try:
        stdout, stderr = proc.communicate(timeout=timeout + 30 * count)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RunFailed(f"the single-worker baseline on {best.name} did not finish") from None
    if proc.returncode != 0:
        tail = (stderr.strip().splitlines() or ["?"])[-1]
        raise RunFailed(f"the single-worker baseline on {best.name} failed: {tail}")
    result = json.loads(stdout.strip().splitlines()[-1])
    step = float(result["median"])
    return {"worker": best.name, "device": worker["device_label"], "iteration_time_s": step,
            "throughput_samples_per_s": worker["batch_size"] / step,
            "source": f"measured in this session: {count} steps alone on {best.name} "
                      "(real CPU compute, no communication, local SGD step)"}


def measurement_context(
    sc: Scenario, spec: dict[str, Any], records: list[dict[str, Any]], probed: dict[str, Any],
    single: dict[str, Any] | None, hosts: list[Any], wire: dict[str, Any],
    durations: dict[str, float], run_dir: Path, run_id: str, skipped: int,
    launcher: str = "emulated",
) -> dict[str, Any]:
    """What :func:`~ddlperf.measure.records.summarize` needs besides the records; shared by
    the emulated launcher and the summary of a torchrun run (no probe, no bridge ports)."""
    from ddlperf.predictors.assembly import describe_inputs

    label = spec["compute_label"]
    recorded = {r["compute"] for r in records if r.get("type") == "iteration" and
                r.get("compute")}
    if len(recorded) == 1 and recorded != {label}:  # real compute ran on the ranks' GPUs
        label = recorded.pop()
        spec = {**spec, "workers": [{**w, "device_label": f"GPU ({label})"}
                                    for w in spec["workers"]]}
    total_bytes = float(sc.tensor_bytes.sum())
    standalone: dict[str, float] = {}
    if single is None:
        best = None
        for w in spec["workers"]:
            g = sc.group_of(w["index"])
            step = g.compute_s + total_bytes * g.update_s_per_byte
            standalone[w["name"]] = g.batch_size / step
            if best is None or standalone[w["name"]] > best["throughput_samples_per_s"]:
                what = ("emulated device time" if label == EMULATED_LABEL
                        else "its profile, not timed alone in this run")
                best = {"worker": w["name"], "device": w["device_label"],
                        "iteration_time_s": step,
                        "throughput_samples_per_s": standalone[w["name"]],
                        "source": f"computed from the workload ({what}: forward + backward + "
                                  "unattributed + optimizer update)"}
        single = best
    else:
        for w in spec["workers"]:
            standalone[w["name"]] = w["batch_size"] / single["iteration_time_s"]
    links = utilization_links(sc, spec, hosts, probed)
    update_per_byte = ps_update_per_byte(records, int(spec["warmup"]))
    notes = [
        f"compute: {label}" + (" — per-layer waits of the workload's forward/backward seconds "
                               "standing in for accelerator time" if label == EMULATED_LABEL
                               else " — the zoo model's forward/backward, one thread per rank"),
        "iteration time: median per worker over steady-state iterations (warm-up excluded); "
        "percentiles over all of them",
        "breakdown: compute measured per worker; wait = synchronization wait "
        + ("at the PS (gate of BSP/SSP)" if spec["arch"] == "ps"
           else "inferred as slowest compute − own compute")
        + "; communication = the rest",
        "bottleneck and link utilization inferred from measured times and each link's own "
        + ("probed goodput (configured rate × goodput where no probe could fill it)"
           if probed else "configured rate × goodput"),
        f"speedup baseline: {single['source']}",
    ]
    if launcher == "emulated":
        notes.append("no latency emulation on this kernel (no netem): links add only queueing "
                     "and stack delay")
    if spec["arch"] == "ps":
        notes.append("PS updates run on the CPU (SGD with momentum)"
                     + (f": {update_per_byte * 1e9:.3g} ns per gradient byte measured"
                        if update_per_byte else ""))
    notes += servers.notes(sc)
    more = {w["name"]: w["iterations"] for w in spec["workers"] if "iterations" in w}
    if more:
        notes.append("ASP: faster workers ran on while the slowest finished ("
                     + ", ".join(f"{n} {c}" for n, c in more.items())
                     + f" iterations against {spec['iterations']}), so that every worker's "
                     "steady iterations overlap")
    attempts = next((r.get("attempts") for r in records if r.get("type") == "probe"), None)
    if attempts and len(attempts) > 1:
        notes.append("link probe: some link missed its expected goodput by "
                     + ", ".join(f"{100 * a:.1f}%" for a in attempts[:-1])
                     + f", so it was probed again ({len(attempts)} probes; the one that "
                     "missed least is kept, the run started after the last)")
    if skipped:
        notes.append(f"{skipped} unreadable record line(s) skipped")
    inputs = describe_inputs(sc, "measured")
    inputs["measure"] = {
        "compute": label, "launcher": launcher, "iterations": spec["iterations"],
        "warmup": spec["warmup"], "out": str(run_dir), "records": spec["records"],
        "run_id": run_id,
        "hosts": [{"name": h.name, "uplink_bps": h.uplink_bps, "downlink_bps": h.downlink_bps,
                   "cpu_quota": h.cpu_quota} for h in hosts],
        "rank_cpu_quota": spec.get("rank_quotas") or None,
        "probe": probed, "probe_attempts": attempts, "wire_check": wire,
        "durations_s": durations,
        "ps_update_s_per_byte": update_per_byte,
    }
    return {"workers": spec["workers"], "arch": spec["arch"], "sync": spec.get("sync"),
            "warmup": spec["warmup"],
            "label": label, "single_worker": single, "standalone": standalone, "links": links,
            "inputs": inputs, "notes": notes}


def ps_update_per_byte(records: list[dict[str, Any]], warmup: int) -> float | None:
    """The shards' measured optimizer seconds per received gradient byte over the steady
    iterations (None without a PS, or where no serve record carries its timings: a record
    written without them, by a shard that failed or by an older trainer, is left out)."""
    updates = [r for r in records if r.get("type") == "serve"
               and int(r["iteration"]) >= warmup and r.get("payload_received_bytes")
               and "update_s" in r]
    if not updates:
        return None
    return (sum(float(r["update_s"]) for r in updates)
            / sum(float(r["payload_received_bytes"]) for r in updates))


def utilization_links(sc: Scenario, spec: dict[str, Any], hosts: list[Any],
                      probed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Link name → {"rate_Bps", "bytes": {worker: bytes per iteration}} for the utilization
    of every NIC (probed, else configured × goodput), rack link (configured × goodput) and
    server fabric (``node0 intra``: its busiest rank's loopback sends at the intra rate, a
    data rate), named as the predictors name them."""
    from ddlperf.measure.probe import own_rate_bps

    goodput = sc.cluster.goodput
    loads = link_loads(spec, expected_flows(spec))
    out: dict[str, dict[str, Any]] = {}
    for host, link in host_links(spec).items():
        spec_host = next(h for h in hosts if h.name == host)
        for direction in ("uplink", "downlink"):
            configured = getattr(spec_host, f"{direction}_bps") * goodput / 8
            rate = own_rate_bps(probed.get(host), direction)  # a path probe is not the link's
            out[f"{link} {direction}"] = {"rate_Bps": rate / 8 if rate else configured,
                                          "bytes": loads.get(f"{link} {direction}", {})}
        if getattr(spec_host, "intra_bps", None):
            ranks = [e["name"] for e in rank_table(spec) if e["host"] == host]
            busiest = max(ranks, key=lambda r: sum(loads.get(f"{r} intra", {}).values()))
            out[f"{host} intra"] = {"rate_Bps": spec_host.intra_bps / 8,
                                    "bytes": loads.get(f"{busiest} intra", {})}
    racks = sc.cluster.racks
    if racks is not None:
        for link, by_worker in loads.items():
            if link.startswith("rack"):
                rate = racks.uplink if link.endswith("uplink") else racks.down
                out[link] = {"rate_Bps": rate * goodput / 8, "bytes": by_worker}
    return out


BACKENDS = ("gloo", "nccl")


def check_backend(backend: str, launcher: str, arch: str | None = None) -> None:
    """gloo anywhere; nccl only where the ranks have CUDA GPUs (never the emulated cluster)
    and for all-reduce (the PS trainers exchange CPU tensors point to point)."""
    if backend not in BACKENDS:
        raise InputError("--backend", f"unknown backend {backend!r}", "use gloo or nccl")
    if backend == "nccl" and arch == "ps":
        raise InputError("--backend", "nccl applies to --arch allreduce (the PS trainers "
                         "send CPU tensors point to point over gloo)", "use --backend gloo")
    if backend == "nccl" and launcher == "emulated":
        import torch

        if not torch.cuda.is_available():
            raise InputError("--backend", "nccl needs CUDA GPUs and this machine has none (the "
                             "emulated cluster runs gloo over TCP)",
                             "use --backend gloo, or --launcher torchrun on GPU servers")
        raise InputError("--backend", "the emulated cluster runs gloo over its shaped links "
                         "(NCCL would use shared memory and NVLink between ranks here)",
                         "use --backend gloo, or --launcher torchrun on GPU servers")
