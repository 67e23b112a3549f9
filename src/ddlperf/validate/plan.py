"""Resolve a matrix file into checked scenario plans before anything runs.

Built-in defaults < the file's ``defaults`` < the scenario; each plan holds the workload,
cluster and strategy the measurement and both predictors start from, and a fingerprint of
them (``--resume`` reruns a scenario whose fingerprint changed).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ddlperf.api import make_cluster, make_strategy, make_workload
from ddlperf.cluster import Cluster
from ddlperf.errors import InputError
from ddlperf.strategy import Strategy
from ddlperf.validate.matrix_file import SOURCE_KEYS, MatrixFile, ScenarioEntry, load_matrix
from ddlperf.workload import Workload, load_workload

BUILTIN: dict[str, Any] = {
    "compute": "emulated", "iterations": 10, "warmup": 2, "timeout": 60.0,
    "probe_seconds": 1.0, "arch": "ps", "sync": "bsp", "sharding": "round_robin",
    "overlap": True, "profile_repetitions": 8,
}
DEFAULT_BANDWIDTH = "100Mbps"
SERVER_KEYS = ("gpus_per_node", "intra", "nics", "rack_size", "rack_uplink")
DEFAULT_LATENCY = "50us"


@dataclass
class Plan:
    """One scenario, resolved and checked (nothing run yet)."""

    name: str
    index: int
    note: str | None
    params: dict[str, Any]
    workload: Workload  # real compute: the zoo entry (replaced by this session's profile)
    cluster: Cluster
    strategy: Strategy
    compute: str
    model: str | None
    cpu_quota: dict[str, float]
    iterations: int
    warmup: int
    timeout: float
    probe_seconds: float
    profile_repetitions: int
    fingerprint: str = ""

    @property
    def worker_count(self) -> int:
        return self.cluster.worker_count

    def describe(self) -> dict[str, Any]:
        """Setup columns for tables (JSON-ready)."""
        c, s = self.cluster, self.strategy
        speeds = sorted({g.speed for g in (*c.workers, *c.nodes)})
        groups = c.servers()
        return {
            "arch": s.arch, "sync": s.effective_sync if s.sync != "ssp" else "ssp",
            "staleness": s.staleness, "sharding": s.sharding if s.arch == "ps" else None,
            "overlap": s.overlap, "workers": c.worker_count,
            "ps": c.ps.count, "placement": c.ps.placement if c.ps.count else None,
            "compute": self.compute, "bandwidth_bps": c.bandwidth,
            "ps_bandwidth_bps": (c.ps_up() if c.ps.count and c.ps.placement == "dedicated"
                                 and c.ps_up() != c.bandwidth else None),
            "model": self.model or self.workload.name,
            "parameter_bytes": float(self.workload.parameter_bytes),
            "batch_size": self.workload.batch_size, "speeds": speeds,
            "accumulation": self.workload.accumulation if self.workload.accumulation > 1
            else None,
            "cpu_quota": dict(self.cpu_quota) or None,
            "gpus_per_node": max(g.gpus for g in groups) if c.nodes else None,
            "servers": c.server_count if c.nodes else None,
            "intra_bps": next((g.intra for g in groups if g.intra), None),
            "allreduce": s.allreduce if s.arch == "allreduce" and c.multi_gpu else None,
            "local_aggregation": s.local_aggregation or None,
            "rack_servers": c.racks.servers if c.racks else None,
            "rack_uplink_bps": c.racks.uplink if c.racks else None,
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def merged_params(matrix: MatrixFile, entry: ScenarioEntry) -> dict[str, Any]:
    """Built-in defaults < the file's ``defaults`` < the scenario. A scenario that names its own
    model, workload or synthetic block replaces the defaults' one; one with a ``cluster`` does
    not inherit ``workers`` / ``ps`` counts from the defaults, nor a ``bandwidth`` or
    ``latency`` its cluster sets (a top-level value would override the cluster's)."""
    base = matrix.defaults.given()
    own = entry.given()
    own.pop("name", None)
    if any(k in own for k in SOURCE_KEYS):
        for key in SOURCE_KEYS:
            base.pop(key, None)
    if "cluster" in own:
        base.pop("workers", None)
        base.pop("ps", None)
        for key in ("bandwidth", "latency"):
            if key in (own["cluster"] or {}):
                base.pop(key, None)
    return {**BUILTIN, **base, **own}


def _check_rates(scenario: Any) -> None:
    """Every emulated link (NICs, rack links, each GPU's loopback) must be one this machine
    can drive, and the layout one the emulated cluster builds (measure checks it again)."""
    from ddlperf.measure.servers import check_emulatable

    check_emulatable(scenario)


def _check_quota(quota: dict[str, float], compute: str, scenario: Any) -> None:
    """Quotas name workers (``w1``; on servers each GPU rank, ``node0/gpu1``), as the
    predictors' per-worker ``cpu_cap``: a server's GPUs are one group, so a quota'd server
    has one quota for all its GPUs."""
    if not quota:
        return
    if compute != "real":
        raise InputError("cpu_quota", "only slows real compute (emulated device time is a "
                         "wait, not CPU work)",
                         "use compute: real, or a slow worker group's speed in cluster")
    names = [scenario.worker_name(i) for i in range(scenario.worker_count)]
    span = f"{names[0]} … {names[-1]}" if len(names) > 1 else names[0]
    for host, share in quota.items():
        if host not in names:
            if re.fullmatch(r"w\d+|node\d+/gpu\d+", host):
                raise InputError("cpu_quota", f"no worker {host} (this scenario has "
                                 f"{len(names)})", f"use {span}")
            what = "worker host" if scenario.cluster.workers else "GPU rank of a server"
            raise InputError("cpu_quota", f"{host!r} is not a {what} ({span})",
                             "a CPU quota on a PS host is not modelled by the predictors"
                             if host.startswith("ps") else f"use {span}")
        if not (isinstance(share, (int, float)) and 0.1 <= share <= 1.0):
            raise InputError("cpu_quota", f"{host}: must be between 0.1 and 1 core, got {share!r}")
    servers: dict[str, list[str]] = {}
    for name in names:
        servers.setdefault(name.split("/")[0], []).append(name)
    for server, ranks in servers.items():
        given = {quota.get(r) for r in ranks}
        if len(ranks) > 1 and len(given) > 1:
            raise InputError("cpu_quota", f"the GPUs of {server} have different quotas (a "
                             "server's GPUs are one group in the predictors)",
                             f"give {', '.join(ranks)} the same quota")


def plan_scenario(params: dict[str, Any], *, name: str, index: int,
                  base_dir: Path) -> Plan:
    """Resolve one merged scenario; raises :class:`InputError` (field without the prefix)."""
    from ddlperf.scenario import resolve
    from ddlperf.workload import zoo

    sources = [k for k in SOURCE_KEYS if params.get(k) is not None]
    if len(sources) != 1:
        raise InputError("model", "give exactly one of model, workload or synthetic"
                         + (f" (got {', '.join(sources)})" if sources else ""))
    compute = params["compute"]
    model: str | None = None
    if sources[0] == "model":
        model = str(params["model"])
        if compute == "real":
            if params.get("device") is not None:
                raise InputError("device", "real compute runs on this CPU",
                                 "drop device (or use compute: emulated)")
            if model not in zoo.names():
                zoo.load(model)  # raises the zoo's one-line error with suggestions
                raise InputError("model", f"{model!r} is not a zoo model")
        workload = make_workload(model, None, params.get("batch_size"),
                                 params.get("device"))
    else:
        for key in ("batch_size", "device"):
            if params.get(key) is not None:
                where = "in the synthetic block" if sources[0] == "synthetic" else \
                    "in cluster.workers"
                raise InputError(key, f"applies to zoo models only (this scenario has a "
                                 f"{sources[0]})", f"set it {where}")
        if compute == "real":
            raise InputError("compute", f"real compute needs a zoo model, not a {sources[0]}",
                             "use model: NAME, or compute: emulated")
        if sources[0] == "synthetic":
            workload = params["synthetic"].workload()
        else:
            path = Path(params["workload"])
            workload = load_workload(path if path.is_absolute() else base_dir / path,
                                     field="workload")
    if params.get("accumulation") is not None:  # trainers and predictors both read it here
        workload = workload.with_updates(accumulation=int(params["accumulation"]))
    strategy = make_strategy(params["arch"], params["sync"], params.get("staleness"),
                             params["sharding"], params["overlap"], params.get("bucket_size"),
                             params.get("allreduce") or "ring",
                             bool(params.get("local_aggregation")))
    config = params.get("cluster")
    workers, ps = params.get("workers"), params.get("ps")
    if config is None and workers is None:
        workers = 2
    if ps is None and (config is None or "ps" not in config):
        ps = 1 if strategy.arch == "ps" else 0
    bandwidth, latency = params.get("bandwidth"), params.get("latency")
    if bandwidth is None and (config is None or "bandwidth" not in config):
        bandwidth = DEFAULT_BANDWIDTH
    if latency is None and (config is None or "latency" not in config):
        latency = DEFAULT_LATENCY
    servers = {key: params[key] for key in SERVER_KEYS if params.get(key) is not None}
    cluster = make_cluster(dict(config) if config is not None else None, workers, ps,
                           bandwidth, latency, None, params.get("placement"), strategy.arch,
                           **servers)
    scenario = resolve(workload, cluster, strategy)  # the three fit together
    _check_rates(scenario)
    if compute == "real":
        cores = os.cpu_count() or 1
        if cluster.worker_count > cores:
            raise InputError("workers", f"real compute with {cluster.worker_count} workers on "
                             f"{cores} cores is not trustworthy", f"use at most {cores} workers "
                             "with compute: real, or compute: emulated")
    quota = dict(params.get("cpu_quota") or {})
    _check_quota(quota, compute, scenario)
    plan = Plan(
        name=name, index=index, note=params.get("note"), params=params, workload=workload,
        cluster=cluster, strategy=strategy, compute=compute, model=model, cpu_quota=quota,
        iterations=int(params["iterations"]), warmup=int(params["warmup"]),
        timeout=float(params["timeout"]), probe_seconds=float(params["probe_seconds"]),
        profile_repetitions=int(params["profile_repetitions"]),
    )
    identity = {
        "params": {k: _jsonable(v) for k, v in params.items() if k != "note"},
        "workload": None if compute == "real" else workload.to_dict(),
        "cluster": cluster.to_dict(), "strategy": strategy.to_dict(),
    }
    plan.fingerprint = hashlib.sha256(
        json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return plan


def plan_matrix(path: str | Path, only: Iterable[str] | None = None) -> tuple[MatrixFile,
                                                                             list[Plan]]:
    """Read the file and resolve every scenario (``only``: a subset by name), before any run."""
    matrix = load_matrix(path)
    wanted = None if only is None else [n for n in only]
    names = [e.name for e in matrix.scenarios]
    if wanted is not None:
        unknown = [n for n in wanted if n not in names]
        if unknown:
            from ddlperf.hardware import suggest

            raise InputError("--only", f"no scenario named {unknown[0]!r}",
                             suggest(unknown[0], names) or f"scenarios: {', '.join(names)}")
    plans = []
    base_dir = Path(path).resolve().parent
    for index, entry in enumerate(matrix.scenarios):
        if wanted is not None and entry.name not in wanted:
            continue
        params = merged_params(matrix, entry)
        try:
            plans.append(plan_scenario(params, name=entry.name, index=index,
                                       base_dir=base_dir))
        except InputError as exc:
            raise InputError(f"{Path(path).name}: scenario {entry.name!r}: {exc.field}",
                             exc.problem, exc.fix) from None
    return matrix, plans
