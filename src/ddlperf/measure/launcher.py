"""Start trainer ranks: on an emulated cluster (and watch them), or as torchrun command lines.

- :func:`build_spec` turns a resolved Scenario into the trainers' JSON spec (tensors in
  gradient order, sharding parts from the Scenario's placement, per-worker layer seconds).
- :func:`expected_traffic` is the payload every host link must carry per iteration.
- :func:`run_emulated` starts one process per rank in its host's namespace (and CPU cgroup),
  watches them and stops the run — naming the rank — when one crashes or makes no progress for
  ``timeout`` seconds. Every rank process is killed on the way out, whatever happened.
- :func:`torchrun_commands` prints what to run on each real host.
"""

from __future__ import annotations

import math
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ddlperf.errors import InputError
from ddlperf.measure import cpu_precedence
from ddlperf.measure.rank_quotas import in_rank_quota
from ddlperf.measure.records import append_record, read_records
from ddlperf.measure.traffic import expected_flows, host_links, link_loads
from ddlperf.measure.trainer_common import (
    EMULATED_LABEL,
    GATE_ENV,
    GO_FILE,
    REAL_LABEL,
    SPEC_FORMAT,
    Status,
    element_size,
    file_name,
    hosts_of,
    rank_table,
    read_status,
)
from ddlperf.scenario import Scenario, micro_batch_unattributed

MASTER_PORT = 29500
STARTUP_GRACE_S = 60.0  # imports, rendezvous and the first iteration get at least this long
MODULES = {"ps": "ddlperf.measure.ps_trainer", "allreduce": "ddlperf.measure.ddp_trainer"}
POLL_S = 0.1


class RunFailed(RuntimeError):
    """A rank crashed or hung; the message names it. ``rank_name`` is the culprit."""

    def __init__(self, message: str, rank_name: str | None = None) -> None:
        super().__init__(message)
        self.rank_name = rank_name


# ----------------------------------------------------------------------------- spec


def split_parts(numel: int, shares: np.ndarray) -> list[tuple[int, int, int]]:
    """(shard, start, numel) parts of one tensor from its bytes per shard (placement row)."""
    held = [k for k in range(len(shares)) if shares[k] > 0]
    if len(held) == 1:
        return [(held[0], 0, numel)]
    total = float(sum(shares[k] for k in held))
    parts, start, acc = [], 0, 0.0
    for k in held:
        acc += float(shares[k])
        stop = round(numel * acc / total)
        if stop > start:
            parts.append((k, start, stop - start))
        start = stop
    return parts


def build_spec(
    scenario: Scenario,
    *,
    compute: str,
    iterations: int,
    warmup: int,
    model: str | None = None,
    records: str | None = None,
    status_dir: str | None = None,
    seed: int = 0,
    lr: float = 0.01,
    momentum: float = 0.9,
    op_timeout_s: float = 600.0,
    backend: str = "gloo",
) -> dict[str, Any]:
    """The trainers' JSON spec (self-contained: no ddlperf objects needed to read it)."""
    sc = scenario
    dtype = sc.workload.dtype
    size = element_size(dtype)
    tensors = [{"name": name, "bytes": float(b), "layer": int(layer),
                "numel": max(1, math.ceil(float(b) / size))}
               for name, b, layer in zip(sc.tensor_names, sc.tensor_bytes, sc.tensor_layer)]
    forward_order = [int(j) for j in np.argsort(sc.tensor_layer, kind="stable")]
    parts = ([split_parts(t["numel"], sc.placement[j]) for j, t in enumerate(tensors)]
             if sc.cluster.ps.count else [])
    label = REAL_LABEL if compute == "real" else EMULATED_LABEL
    forward_cv = [float(layer.forward_cv) for layer in sc.workload.layers]
    backward_cv = [float(layer.backward_cv) for layer in sc.workload.layers]
    micro = sc.workload.accumulation
    workers = []
    for i in range(sc.worker_count):
        g = sc.group_of(i)
        device = "CPU" if compute == "real" else (g.device or "device")
        offset = i - g.first
        server = g.first_server + offset // g.gpus
        workers.append({
            "name": sc.worker_name(i), "index": i, "group": g.name, "device": g.device,
            "host": g.server_name(offset // g.gpus), "server": server,
            "link": g.nic_name("uplink", offset // g.gpus).rsplit(" ", 1)[0],
            "local": offset % g.gpus, "gpus": g.gpus,
            "rack": None if sc.racks is None else sc.racks.of(server),
            # batch_size: samples per iteration (throughputs); one micro-batch's for the model
            "device_label": f"{device} ({label})", "batch_size": g.batch_size,
            "micro_batch_size": g.batch_size // micro,
            "forward": [float(x) for x in g.forward], "backward": [float(x) for x in g.backward],
            "forward_cv": forward_cv, "backward_cv": backward_cv,
            "unattributed_s": micro_batch_unattributed(g, micro),
            "update_s_per_byte": float(g.update_s_per_byte),
        })
    return {
        "format": SPEC_FORMAT,
        "arch": sc.strategy.arch,
        "sync": sc.strategy.effective_sync,
        "staleness": sc.strategy.staleness,
        "overlap": sc.strategy.overlap,
        "accumulation": micro,
        "bucket_bytes": float(sc.strategy.bucket_bytes),
        "allreduce": sc.strategy.allreduce,
        "local_aggregation": bool(sc.strategy.local_aggregation and sc.multi_gpu),
        "backend": backend,
        "placement": sc.cluster.ps.placement,
        "shards": sc.cluster.ps.count,
        "compute": compute,
        "compute_label": label,
        "model": model,
        "workload": sc.workload.name,
        "dtype": dtype,
        "layers": [layer.name for layer in sc.workload.layers],
        "tensors": tensors,
        "forward_order": forward_order,
        "parts": parts,
        "workers": workers,
        "iterations": iterations,
        "warmup": warmup,
        "seed": seed,
        "lr": lr,
        "momentum": momentum,
        "records": records,
        "status_dir": status_dir,
        "op_timeout_s": op_timeout_s,
    }


def expected_traffic(spec: dict[str, Any], pushes: float = 1.0, pulls: float = 1.0
                     ) -> dict[str, dict[str, dict[str, float]]]:
    """Payload bytes each host's NIC carries: host → {"uplink"|"downlink": {worker: bytes}}
    for ``pushes`` gradient exchanges and ``pulls`` parameter deliveries per worker (see
    :mod:`ddlperf.measure.traffic`: PS pushes and pulls with shards on other hosts; a ring's
    2(N−1)/N × S each way per worker)."""
    loads = link_loads(spec, expected_flows(spec, pushes, pulls))
    return {host: {d: dict(loads.get(f"{link} {d}", {})) for d in ("uplink", "downlink")}
            for host, link in host_links(spec).items()}


# ----------------------------------------------------------------------------- emulated run


@dataclass
class _Rank:
    entry: dict[str, Any]
    proc: subprocess.Popen
    log: Path
    started: float
    killed: bool = False


@dataclass
class RunResult:
    seconds: float
    records: list[dict[str, Any]] = field(default_factory=list)
    classified: dict[str, int] = field(default_factory=dict)  # host → loopback sockets


def _env(entry: dict[str, Any], world: int, master: str, port: int, interface: str
         ) -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    env.update({
        "RANK": str(entry["rank"]), "WORLD_SIZE": str(world), "LOCAL_RANK":
        str(entry["local_rank"]), "MASTER_ADDR": master, "MASTER_PORT": str(port),
        "GLOO_SOCKET_IFNAME": interface, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1", "TORCH_CPP_LOG_LEVEL": "ERROR",
    })
    return env


def run_emulated(
    cluster: Any,
    spec: dict[str, Any],
    spec_path: Path,
    out: Path,
    timeout: float,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Run every rank on the emulated cluster until all exit 0; raise :class:`RunFailed`.

    ``cluster`` needs ``ip(host)`` and ``popen(host, argv, **kwargs)`` (an
    :class:`~ddlperf.measure.emulated.EmulatedCluster`; tests use a loopback stand-in with an
    ``interface`` attribute of ``"lo"``); ranks use gloo on ``cluster.interface`` (eth0).
    """
    table = rank_table(spec)
    module = MODULES[spec["arch"]]
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    master = cluster.ip(table[0]["host"])
    interface = getattr(cluster, "interface", "eth0")
    port = int(getattr(cluster, "master_port", MASTER_PORT))
    ranks: list[_Rank] = []
    began = time.monotonic()
    gates = getattr(cluster, "gates_ranks", None)
    gated = bool(gates([entry["host"] for entry in table])) if gates is not None else False
    gate = LoopbackGate(cluster, out / "gate", spec)
    try:
        for entry in table:
            log = logs / f"{file_name(entry['name'])}.log"
            argv = in_rank_quota(cluster, entry, (spec.get("rank_quotas") or {}).get(
                entry["name"]), [sys.executable, "-m", module, "--spec", str(spec_path)])
            env = _env(entry, len(table), master, port, interface)
            if gated:
                env[GATE_ENV] = str(gate.directory)
            with open(log, "wb") as handle:
                proc = cluster.popen(entry["host"], argv, stdin=subprocess.DEVNULL,
                                     stdout=handle, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
            cpu_precedence.claim(proc.pid)
            ranks.append(_Rank(entry, proc, log, time.monotonic()))
            if gated:
                gate.expect(entry)
        _watch(ranks, spec, timeout, progress, gate.poll)
    finally:
        stop_ranks(ranks)
    return RunResult(time.monotonic() - began, classified=gate.classified)


class LoopbackGate:
    """Where a host runs several ranks (servers, colocated shards), holds every rank until all
    have connected, then has the cluster classify their sockets
    (:func:`ddlperf.measure.rank_classes.classify`: each rank's class on its server's
    loopback, a fair class per rank pair on the links between hosts) and lets them go
    (:func:`ddlperf.measure.trainer_common.loopback_gate`)."""

    def __init__(self, cluster: Any, directory: Path, spec: dict[str, Any]) -> None:
        self.cluster, self.directory = cluster, directory
        self.records = spec.get("records")
        self.waiting: list[dict[str, Any]] = []
        self.classified: dict[str, int] = {}
        self.open = False

    def expect(self, entry: dict[str, Any]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.waiting.append(entry)

    def poll(self) -> None:
        if self.open or not self.waiting:
            return
        from ddlperf.measure.rank_classes import Rank

        ranks = []
        for entry in self.waiting:
            try:
                pid = int((self.directory / f"{file_name(entry['name'])}.pid").read_text())
            except (OSError, ValueError):
                return  # not every rank has connected yet
            ranks.append(Rank(entry["name"], entry["host"], int(entry["local_rank"]), pid))
        self.classified = self.cluster.classify_ranks(ranks)
        (self.directory / GO_FILE).write_text("go\n")
        self.open = True
        if self.records:
            append_record(self.records, {"type": "gate", "name": "launcher",
                                         "time": time.time(),
                                         "classified": dict(self.classified)})


def stop_ranks(ranks: list[_Rank], grace_s: float = 2.0) -> None:
    """SIGTERM every rank still running, SIGKILL after ``grace_s``; reap them all.

    A rank runs in its own session (process group = the launched process's pid), maybe
    behind a wrapper (``ip netns exec``, a cgroup); the wrapper can be gone while the trainer
    under it still runs (seen once: a hung rank left with parent 1). So every rank's group
    is signalled, not only those whose launched process is alive; an empty group is no
    error (and its pid cannot be reused while a member lives)."""
    alive = [r for r in ranks if r.proc.poll() is None]
    for r in alive:
        r.killed = True
    for r in ranks:
        _signal_group(r, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for r in alive:
        try:
            r.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(r, signal.SIGKILL)
            r.proc.wait()
    for r in ranks:  # what outlived its launched process and the grace
        _signal_group(r, signal.SIGKILL)


def _signal_group(rank: _Rank, sig: int) -> None:
    try:
        os.killpg(rank.proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        if rank.proc.poll() is None:
            rank.proc.send_signal(sig)


def _watch(ranks: list[_Rank], spec: dict[str, Any], timeout: float,
           progress: Callable[[str], None] | None,
           poll: Callable[[], None] = lambda: None) -> None:
    records_path = Path(spec["records"])
    status_dir = Path(spec["status_dir"])
    total = int(spec["warmup"]) + int(spec["iterations"])
    offset = 0
    last = {r.entry["name"]: time.monotonic() for r in ranks}
    progressed: set[str] = set()
    counts = dict.fromkeys(last, 0)
    errors: dict[str, dict[str, Any]] = {}
    reported = -1
    while True:
        poll()
        offset = _tail(records_path, offset, last, counts, errors, progressed)
        codes = {r.entry["name"]: r.proc.poll() for r in ranks}
        failed = [r for r in ranks if codes[r.entry["name"]] not in (None, 0)]
        if failed:
            time.sleep(0.3)  # let the culprit's error line land before judging
            _tail(records_path, offset, last, counts, errors, progressed)
            raise _crash(ranks, failed, errors)
        if all(code == 0 for code in codes.values()):
            return
        worker_counts = [counts[r.entry["name"]] for r in ranks if r.entry["role"] == "worker"]
        done = min(worker_counts)
        if progress is not None and done != reported and done > 0:
            reported = done
            progress(f"iteration {done}/{total} done on every worker")
        now = time.monotonic()
        active = [r for r in ranks if codes[r.entry["name"]] is None
                  and (r.entry["role"] != "worker" or counts[r.entry["name"]] < total)]
        stale = [r for r in active if now - last[r.entry["name"]] > (
            timeout if r.entry["name"] in progressed else max(timeout, STARTUP_GRACE_S))]
        if stale and (any(r.entry["role"] == "worker" for r in stale)
                      or all(now - t > timeout for t in last.values())):
            raise _hang(active, stale, status_dir, timeout, last)
        time.sleep(POLL_S)


def _tail(path: Path, offset: int, last: dict[str, float], counts: dict[str, int],
          errors: dict[str, dict[str, Any]], progressed: set[str]) -> int:
    """Read records appended since ``offset``; update progress times, counts and errors."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
    except FileNotFoundError:
        return offset
    end = chunk.rfind(b"\n")
    if end < 0:
        return offset
    import json

    now = time.monotonic()
    for line in chunk[: end + 1].splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        name = record.get("name")
        if name not in last:
            continue
        kind = record.get("type")
        if kind in ("iteration", "serve"):
            last[name] = now
            progressed.add(name)
            if kind == "iteration":
                counts[name] = max(counts[name], int(record["iteration"]) + 1)
        elif kind == "error":
            errors.setdefault(name, record)
    return offset + end + 1


def _crash(ranks: list[_Rank], failed: list[_Rank], errors: dict[str, dict[str, Any]]
           ) -> RunFailed:
    """Name the rank that failed first on its own (not because a peer went away)."""
    signalled = [r for r in failed if (r.proc.returncode or 0) < 0 and not r.killed]
    own = sorted((e["time"], name) for name, e in errors.items() if not e.get("peer"))
    anyerr = sorted((e["time"], name) for name, e in errors.items())
    by_name = {r.entry["name"]: r for r in ranks}
    if own:
        culprit = by_name[own[0][1]]
    elif signalled:
        culprit = signalled[0]
    elif anyerr:
        culprit = by_name[anyerr[0][1]]
    else:
        culprit = failed[0]
    name = culprit.entry["name"]
    code = culprit.proc.returncode
    what = (f"killed by signal {-code}" if code is not None and code < 0
            else f"exited with status {code}")
    detail = errors.get(name, {}).get("error") or last_line(culprit.log)
    message = f"rank {name} ({culprit.entry['role']} on host {culprit.entry['host']}) {what}"
    if detail:
        message += f": {detail}"
    message += f" — run stopped; log: {culprit.log}"
    return RunFailed(message, name)


def _hang(active: list[_Rank], stale: list[_Rank], status_dir: Path, timeout: float,
          last: dict[str, float]) -> RunFailed:
    """Name the rank that is stuck in its own work (not waiting on a peer), longest first;
    when every rank waits on a peer, the one silent for longest."""
    states = {r.entry["name"]: read_status(
        status_dir / f"{file_name(r.entry['name'])}.status")
              for r in active}
    busy = [r for r in active if states[r.entry["name"]] is None
            or states[r.entry["name"]][0] not in Status.WAITING]
    if busy:
        culprit = min(busy, key=lambda r: (states[r.entry["name"]] or ("", 0, 0.0))[2])
    else:
        culprit = min(stale, key=lambda r: last[r.entry["name"]])
    name = culprit.entry["name"]
    state = states[name]
    where = (f" (phase '{state[0]}' of iteration {state[1]})" if state and state[1] >= 0
             else "")
    others = sorted(r.entry["name"] for r in stale if r is not culprit)
    message = (f"rank {name} ({culprit.entry['role']} on host {culprit.entry['host']}) made no "
               f"progress for {timeout:g} s{where}")
    if others:
        message += f"; {', '.join(others)} waited on it"
    message += f" — run stopped; log: {culprit.log}"
    return RunFailed(message, name)


def last_line(path: Path) -> str:
    """The last non-empty line of a log (for naming what went wrong)."""
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


# ----------------------------------------------------------------------------- torchrun


def torchrun_commands(
    spec: dict[str, Any],
    spec_path: str,
    hosts: list[str] | None = None,
    port: int = MASTER_PORT,
    interface: str = "eth0",
) -> list[tuple[str, str]]:
    """(host, command line) per node; ranks follow :func:`rank_table`'s host order."""
    table = rank_table(spec)
    layout = hosts_of(table)
    if hosts is not None and len(hosts) != len(layout):
        raise InputError("--hosts", f"this scenario needs {len(layout)} hosts "
                         f"({', '.join(layout)} in that order), got {len(hosts)}",
                         "list one host per role, comma-separated")
    names = hosts or [f"HOST{i}" for i in range(len(layout))]
    module = MODULES[spec["arch"]]
    out = []
    for i, (role_host, host) in enumerate(zip(layout, names)):
        nproc = sum(1 for e in table if e["host"] == role_host)
        argv = ["torchrun", f"--nnodes={len(layout)}", f"--nproc-per-node={nproc}",
                f"--node-rank={i}", f"--master-addr={names[0]}", f"--master-port={port}",
                "-m", module, "--spec", spec_path, "--records", f"records-{role_host}.jsonl"]
        env = f"GLOO_SOCKET_IFNAME={interface} OMP_NUM_THREADS=1"
        if spec.get("backend") == "nccl":
            env += f" NCCL_SOCKET_IFNAME={interface}"
        out.append((f"{host} ({role_host})", f"{env} {shlex.join(argv)}"))
    return out


def records_of(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return read_records(spec["records"])[0]
