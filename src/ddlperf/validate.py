"""``ddlperf validate``: predicted vs measured, scenario by scenario, over a matrix file.

For every scenario of a YAML matrix (see :class:`MatrixFile`):

1. **compute, in the same session.** ``compute: real``: the zoo model is profiled on this CPU
   (``ddlperf profile``, one thread, in a fresh process like every trainer rank) right before
   the measurement, and both predictors start from that profile (CPU speed drifts by ~10%
   between processes and minutes here). ``compute: emulated``: the workload's per-layer seconds
   are what the trainers wait (emulated device time), so the workload itself is the ground
   truth of compute and is predicted from unchanged.
2. **heterogeneity.** Emulated device time: a worker group's ``speed`` in ``cluster`` (the
   trainers wait ``seconds / speed``), exact by construction. CPU quota (real compute): the
   slowdown is not exactly 1/quota, so the quota'd worker's training step is timed inside a
   cgroup with that quota while an unrestricted copy runs beside it (two computing processes,
   as in the run); ``speed = free step / quota'd step`` goes into the prediction's cluster.
3. **the PS processor.** The PS shards of the measurement are CPU processes (SGD with momentum).
   Their cost per gradient byte is measured here once per session (the same optimizer step on
   one thread) and given to the predictors as ``ps.update_s_per_byte``, unless the scenario's
   cluster sets it. (Real compute: the profile's own optimizer timing, the same measurement.)
4. **measure** (:func:`ddlperf.measure.run.measure`: probes every link, runs the trainers,
   checks the bytes on the wire) and **predict** with both methods, from the same workload,
   cluster and strategy. Links: the configured rate × goodput (default), or the probed
   goodput of every link (``rates="probed"``).
5. **compare** iteration times: ``error_pct = 100 × (predicted − measured) / measured``.

Results go to ``OUT/results.json``, ``OUT/results.csv`` and ``OUT/validation.png`` after every
scenario (atomically), so an interrupted run keeps what finished; ``resume=True`` skips scenarios
already done with unchanged parameters.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ddlperf.api import make_cluster, make_strategy, make_workload
from ddlperf.cluster import Cluster
from ddlperf.errors import InputError
from ddlperf.io import prepare_output_dir, write_atomic
from ddlperf.prediction import Prediction
from ddlperf.strategy import Strategy
from ddlperf.units import format_bandwidth
from ddlperf.validation import input_error_from, read_structured
from ddlperf.workload import Workload, load_workload

RESULTS_FORMAT = "ddlperf.validation/1"
METHODS = ("analytic", "simulate")
RATES = ("configured", "probed")
TARGET_MAPE_PCT = 5.0  # the simulate method's target over the dev matrix
TARGET_WORST_PCT = 10.0  # … and every scenario within this
PROBE_TOLERANCE = 0.02  # probed goodput vs configured rate × goodput: "confirmed" within this
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
SOURCE_KEYS = ("model", "workload", "synthetic")
BUILTIN: dict[str, Any] = {
    "compute": "emulated", "iterations": 10, "warmup": 2, "timeout": 60.0,
    "probe_seconds": 1.0, "arch": "ps", "sync": "bsp", "sharding": "round_robin",
    "overlap": True, "profile_repetitions": 8,
}
DEFAULT_BANDWIDTH = "100Mbps"
DEFAULT_LATENCY = "50us"

Progress = Callable[[dict[str, Any]], None]


# ----------------------------------------------------------------------------- the file


class SyntheticLayer(BaseModel):
    """``count`` identical layers: forward/backward milliseconds and the tensors each owns."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, min_length=1)
    count: int = Field(default=1, ge=1, le=1000)
    forward_ms: float = Field(ge=0, allow_inf_nan=False)
    backward_ms: float = Field(ge=0, allow_inf_nan=False)
    tensor_mb: float | list[float] = Field(
        default_factory=list, description="MB (10⁶ bytes) of each parameter tensor it owns")

    @field_validator("tensor_mb")
    @classmethod
    def _sizes(cls, value: float | list[float]) -> float | list[float]:
        for size in value if isinstance(value, list) else [value]:
            if not math.isfinite(size) or size < 0:
                raise ValueError(f"tensor sizes must be finite and ≥ 0 MB, got {size!r}")
        return value

    def sizes(self) -> list[int]:
        values = self.tensor_mb if isinstance(self.tensor_mb, list) else [self.tensor_mb]
        return [round(mb * 1e6) for mb in values if round(mb * 1e6) > 0]


class Synthetic(BaseModel):
    """A hand-made workload (emulated device time): layers in forward order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="synthetic", min_length=1)
    batch_size: int = Field(default=32, gt=0)
    device: str | None = Field(default=None, description="label only (what the times stand for)")
    unattributed_ms: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    update_ns_per_byte: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    layers: list[SyntheticLayer] = Field(min_length=1)

    def workload(self) -> Workload:
        layers = []
        for spec in self.layers:
            for _ in range(spec.count):
                i = len(layers)
                name = spec.name if spec.name and spec.count == 1 else (
                    f"{spec.name}{len(layers)}" if spec.name else f"l{i}")
                layers.append({
                    "name": name, "forward_s": spec.forward_ms / 1e3,
                    "backward_s": spec.backward_ms / 1e3,
                    "tensors": [{"name": f"{name}.t{j}", "bytes": b}
                                for j, b in enumerate(spec.sizes())],
                })
        if not any(layer["tensors"] for layer in layers):
            raise InputError("synthetic.layers", "no layer owns a tensor (tensor_mb)",
                             "give at least one layer a tensor_mb > 0")
        data: dict[str, Any] = {
            "format": "ddlperf.workload/1", "name": self.name, "batch_size": self.batch_size,
            "layers": layers, "unattributed_s": self.unattributed_ms / 1e3,
            "update_s_per_byte": self.update_ns_per_byte * 1e-9,
            "provenance": {"source": "synthetic (ddlperf validate)"},
        }
        if self.device:
            data["device"] = self.device
        return Workload.from_dict(data, field="synthetic")


class Params(BaseModel):
    """Scenario parameters; ``defaults:`` holds the same keys as each scenario."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    note: str | None = Field(default=None, description="what the scenario checks (free text)")
    model: str | None = Field(default=None, description="zoo model")
    workload: str | None = Field(default=None, description="workload JSON, relative to the file")
    synthetic: Synthetic | None = None
    batch_size: int | None = Field(default=None, gt=0)
    device: str | None = None
    workers: int | None = Field(default=None, ge=1)
    ps: int | None = Field(default=None, ge=0)
    placement: Literal["dedicated", "colocated"] | None = None
    arch: Literal["ps", "allreduce"] | None = None
    sync: Literal["bsp", "asp", "ssp"] | None = None
    staleness: int | None = Field(default=None, ge=0)
    sharding: Literal["round_robin", "greedy", "even"] | None = None
    overlap: bool | None = None
    bucket_size: str | float | None = None
    bandwidth: str | float | None = None
    latency: str | float | None = None
    cluster: dict[str, Any] | None = None
    compute: Literal["emulated", "real"] | None = None
    cpu_quota: dict[str, float] | None = None
    iterations: int | None = Field(default=None, ge=1, le=100_000)
    warmup: int | None = Field(default=None, ge=0, le=100_000)
    timeout: float | None = Field(default=None, ge=1, le=86_400)
    probe_seconds: float | None = Field(default=None, gt=0, le=60)
    profile_repetitions: int | None = Field(default=None, ge=1, le=1000)

    def given(self) -> dict[str, Any]:
        """The keys the file set (objects kept as they are)."""
        return {key: getattr(self, key) for key in self.model_fields_set}


class ScenarioEntry(Params):
    name: str = Field(pattern=NAME_PATTERN, max_length=80)


class MatrixFile(BaseModel):
    """``defaults:`` (optional) and ``scenarios:`` (a list; each needs a unique ``name``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str | None = None
    description: str | None = None
    findings: str | None = Field(
        default=None, description="Markdown: what the errors show (published as a section)")
    defaults: Params = Params()
    scenarios: list[ScenarioEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> MatrixFile:
        seen: set[str] = set()
        for entry in self.scenarios:
            if entry.name in seen:
                raise ValueError(f"scenario name {entry.name!r} appears twice")
            seen.add(entry.name)
        return self


def _named(field: str, raw: Any) -> str:
    """``scenarios[3].arch`` → ``scenarios[3] (ps-asp).arch`` when the name is known."""
    match = re.match(r"^scenarios\[(\d+)\]", field)
    if match and isinstance(raw, dict) and isinstance(raw.get("scenarios"), list):
        index = int(match.group(1))
        items = raw["scenarios"]
        if index < len(items) and isinstance(items[index], dict) and items[index].get("name"):
            return field.replace(match.group(0), f"{match.group(0)} ({items[index]['name']})", 1)
    return field


def load_matrix(path: str | Path, field: str = "--matrix") -> MatrixFile:
    """Read and check a matrix file; any problem is one :class:`InputError` naming the key."""
    raw = read_structured(path, field)
    name = Path(path).name
    if not isinstance(raw, dict):
        raise InputError(field, f"{name} must be a mapping with 'scenarios:' (and 'defaults:')",
                         "see docs/validation.md for the format")
    try:
        return MatrixFile.model_validate(raw)
    except ValidationError as exc:
        err = input_error_from(exc)
        raise InputError(f"{name}: {_named(err.field, raw)}", err.problem, err.fix) from None


# ----------------------------------------------------------------------------- the plan


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
        speeds = sorted({g.speed for g in c.workers})
        return {
            "arch": s.arch, "sync": s.effective_sync if s.sync != "ssp" else "ssp",
            "staleness": s.staleness, "sharding": s.sharding if s.arch == "ps" else None,
            "overlap": s.overlap, "workers": c.worker_count,
            "ps": c.ps.count, "placement": c.ps.placement if c.ps.count else None,
            "compute": self.compute, "bandwidth_bps": c.bandwidth,
            "model": self.model or self.workload.name,
            "parameter_bytes": float(self.workload.parameter_bytes),
            "batch_size": self.workload.batch_size, "speeds": speeds,
            "cpu_quota": dict(self.cpu_quota) or None,
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
    not inherit ``workers`` / ``ps`` counts from the defaults."""
    base = matrix.defaults.given()
    own = entry.given()
    own.pop("name", None)
    if any(k in own for k in SOURCE_KEYS):
        for key in SOURCE_KEYS:
            base.pop(key, None)
    if "cluster" in own:
        base.pop("workers", None)
        base.pop("ps", None)
    return {**BUILTIN, **base, **own}


def _rate_limit() -> float:
    from ddlperf.measure.run import max_link_bps

    return max_link_bps()


def _check_rates(cluster: Cluster) -> None:
    """Every emulated link must be one this machine can drive (measure checks it again)."""
    limit = _rate_limit()
    rates = []
    for group in cluster.workers:
        rates += [(f"workers ({group.name}) uplink", cluster.worker_up(group)),
                  (f"workers ({group.name}) downlink", cluster.worker_down(group))]
    if cluster.ps.count:
        rates += [("ps uplink", cluster.ps_up()), ("ps downlink", cluster.ps_down())]
    for what, rate in rates:
        if rate > limit:
            raise InputError(
                "bandwidth", f"{format_bandwidth(rate)} ({what}) is more than this machine can "
                f"drive (about {format_bandwidth(limit)} per emulated link on "
                f"{os.cpu_count()} cores)", f"use at most {format_bandwidth(limit)}")


def _check_quota(quota: dict[str, float], compute: str, workers: int) -> None:
    if not quota:
        return
    if compute != "real":
        raise InputError("cpu_quota", "only slows real compute (emulated device time is a "
                         "wait, not CPU work)",
                         "use compute: real, or a slow worker group's speed in cluster")
    for host, share in quota.items():
        match = re.fullmatch(r"w(\d+)", host)
        if not match:
            raise InputError("cpu_quota", f"{host!r} is not a worker host (w0 … w{workers - 1})",
                             "a CPU quota on a PS host is not modelled by the predictors")
        if int(match.group(1)) >= workers:
            raise InputError("cpu_quota", f"no worker {host} (this scenario has {workers})",
                             f"use w0 … w{workers - 1}")
        if not (isinstance(share, (int, float)) and 0.1 <= share <= 1.0):
            raise InputError("cpu_quota", f"{host}: must be between 0.1 and 1 core, got {share!r}")


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
    strategy = make_strategy(params["arch"], params["sync"], params.get("staleness"),
                             params["sharding"], params["overlap"], params.get("bucket_size"))
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
    cluster = make_cluster(dict(config) if config is not None else None, workers, ps,
                           bandwidth, latency, None, params.get("placement"), strategy.arch)
    resolve(workload, cluster, strategy)  # the three fit together
    _check_rates(cluster)
    if compute == "real":
        cores = os.cpu_count() or 1
        if cluster.worker_count > cores:
            raise InputError("workers", f"real compute with {cluster.worker_count} workers on "
                             f"{cores} cores is not trustworthy", f"use at most {cores} workers "
                             "with compute: real, or compute: emulated")
    quota = dict(params.get("cpu_quota") or {})
    _check_quota(quota, compute, cluster.worker_count)
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


# ----------------------------------------------------------------------------- in-session
# calibration: this machine's CPU as the PS processor, the real model's profile, CPU quotas


def _single_thread() -> Any:
    import torch

    class _One:
        def __enter__(self) -> None:
            self.before = torch.get_num_threads()
            torch.set_num_threads(1)

        def __exit__(self, *exc: object) -> None:
            torch.set_num_threads(self.before)

    return _One()


def calibrate_ps_update(megabytes: float = 16.0, repetitions: int = 15) -> dict[str, Any]:
    """Seconds per gradient byte of the PS's update (SGD with momentum 0.9) on this CPU, one
    thread: the same optimizer step the profile times for a model's parameters."""
    import torch

    with _single_thread():
        sizes = [1_000_000] * max(1, round(megabytes / 4))
        params = [torch.nn.Parameter(torch.zeros(n)) for n in sizes]
        for p in params:
            p.grad = torch.rand_like(p) * 1e-3
        opt = torch.optim.SGD(params, lr=1e-3, momentum=0.9)
        opt.step()
        times = []
        for _ in range(repetitions):
            began = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - began)
    total = sum(4 * n for n in sizes)
    return {"update_s_per_byte": statistics.median(times) / total, "bytes": total,
            "repetitions": repetitions,
            "how": "torch.optim.SGD(momentum=0.9).step() on one thread, median"}


def _env_one_thread() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def profile_real(plan: Plan, path: Path) -> Workload:
    """Profile the zoo model on this CPU at the scenario's batch size: ``ddlperf profile`` in a
    fresh process with one thread, as every trainer rank is (a long-lived parent process is not
    a fair stand-in for them), written to ``path``."""
    argv = [sys.executable, "-m", "ddlperf", "profile", "--model", str(plan.model),
            "--batch-size", str(plan.workload.batch_size), "--threads", "1", "--warmup", "3",
            "--repetitions", str(plan.profile_repetitions), "--out", str(path)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=_env_one_thread(),
                          timeout=600)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"profiling {plan.model} failed: {tail}")
    workload = load_workload(path, field="profile")
    provenance = dict(workload.provenance)
    # measure() runs the zoo model named in provenance["model"]; keep the builder text too.
    provenance.update(model=plan.model, model_source=provenance.get("model"),
                      profiled_for="ddlperf validate (same session as the measurement)")
    workload = workload.with_updates(provenance=provenance)
    workload.save(path)
    return workload


def _timer_argv(model: str, batch: int, warm_s: float, window_s: float) -> list[str]:
    return [sys.executable, "-m", "ddlperf.validate", "time-steps", model, str(batch),
            str(warm_s), str(window_s)]


def _timed_together(commands: list[list[str]], timeout: float) -> list[dict[str, Any]]:
    """Start the timers, wait until each has loaded its model, then start them at one instant."""
    procs: list[subprocess.Popen[str]] = []
    try:
        for command in commands:
            procs.append(subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, env=_env_one_thread()))
        for proc in procs:  # each prints "ready" once torch and the model are loaded
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                proc.wait(timeout=10)
                err = (proc.stderr.read() if proc.stderr else "").strip().splitlines()
                raise RuntimeError("timing the training step failed: "
                                   + (err[-1] if err else "no output"))
        begin = time.time() + 0.2
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(f"{begin!r}\n")
            proc.stdin.flush()  # communicate() closes it
        results = []
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=timeout)
            if proc.returncode != 0:
                tail = (stderr.strip().splitlines() or ["?"])[-1]
                raise RuntimeError(f"timing the training step failed: {tail}")
            results.append(json.loads(stdout.strip().splitlines()[-1]))
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def quota_speeds(plan: Plan, warm_s: float = 1.5, window_s: float = 8.0
                 ) -> dict[str, dict[str, float]]:
    """Per quota'd worker: its training step inside a cgroup with the quota, timed *while* an
    unrestricted copy of the same step runs beside it (two computing processes on the cores,
    as in the run, and both at the same moment of this machine's speed, which drifts by ~10%
    from process to process); ``speed`` = free median step / quota'd median step."""
    from ddlperf.measure import cgroups

    if not cgroups.available():
        raise InputError("cpu_quota", "cgroup v1 cpu controller not found at "
                         f"{cgroups.CPU_ROOT}", "run on a machine with cgroup v1 cpu")
    argv = _timer_argv(str(plan.model), plan.workload.batch_size, warm_s, window_s)
    out: dict[str, dict[str, float]] = {}
    for host, share in sorted(plan.cpu_quota.items()):
        path = cgroups.CPU_ROOT / f"ddlperf-validate-{os.getpid()}-{host}"
        cgroups.create(path, share)
        try:
            quota, free = _timed_together([cgroups.wrap(path, argv), argv],
                                          timeout=180 + warm_s + window_s)
        finally:
            cgroups.remove(path)
        out[host] = {"quota": share, "step_free_s": float(free["median"]),
                     "step_quota_s": float(quota["median"]),
                     "speed": float(free["median"]) / float(quota["median"]),
                     "steps_quota": len(quota["durations"]),
                     "steps_free": len(free["durations"]), "window_s": window_s}
    return out


def _time_steps_main(argv: list[str]) -> None:
    """``python -m ddlperf.validate time-steps MODEL BATCH WARM_S WINDOW_S``: builds the zoo
    model, prints ``ready``, reads a wall-clock start from stdin, then runs forward + loss +
    backward on one thread until start + WARM_S + WINDOW_S; prints the median of the steps
    that began after start + WARM_S (JSON)."""
    import torch

    from ddlperf.workload import torch_models

    model_name, batch, warm_s, window_s = argv[0], int(argv[1]), float(argv[2]), float(argv[3])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    spec = torch_models.spec(model_name)
    model = spec.build()
    inputs, target = torch_models.make_batch(spec, batch)
    loss_fn = torch_models.loss_function(spec)
    loss_fn(model(*inputs), target).backward()  # first-step allocations before "ready"
    print("ready", flush=True)
    begin = float(sys.stdin.readline())
    while time.time() < begin:
        time.sleep(0.001)
    times: list[float] = []
    end = begin + warm_s + window_s
    while True:
        started = time.time()
        if started >= end and len(times) >= 2:
            break
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        loss_fn(model(*inputs), target).backward()
        if started >= begin + warm_s:
            times.append(time.perf_counter() - t0)
    print(json.dumps({"median": statistics.median(times), "durations": times}))


# ----------------------------------------------------------------------------- clusters


def with_worker_overrides(cluster: Cluster, overrides: dict[int, dict[str, Any]],
                          **top: Any) -> Cluster:
    """The cluster with per-worker changes (``{index: {"speed": …, "uplink": …}}``): groups
    that hold a changed worker are split into single workers, in order; ``top`` replaces
    top-level keys (e.g. ``goodput``, ``ps``)."""
    data = cluster.to_dict()
    groups: list[dict[str, Any]] = []
    first = 0
    for group in data["workers"]:
        count = int(group.get("count", 1))
        indices = range(first, first + count)
        if any(i in overrides for i in indices):
            for i in indices:
                single = {**group, "count": 1}
                change = overrides.get(i, {})
                if "speed" in change:
                    single["speed"] = float(group.get("speed", 1.0)) * float(change["speed"])
                for key in ("uplink", "downlink"):
                    if key in change:
                        single.pop("bandwidth", None)
                        single[key] = change[key]
                groups.append(single)
        else:
            groups.append(group)
        first += count
    data["workers"] = groups
    data.update(top)
    return Cluster.from_dict(data)


def with_ps_update(cluster: Cluster, seconds_per_byte: float) -> Cluster:
    data = cluster.to_dict()
    data["ps"] = {**data.get("ps", {}), "update_s_per_byte": seconds_per_byte}
    return Cluster.from_dict(data)


def probed_cluster(cluster: Cluster, probe: dict[str, dict[str, Any]]) -> Cluster:
    """Every link at its probed payload rate (goodput 1.0): per worker, and the slowest
    direction over the PS shards (one PS group)."""
    overrides = {}
    for i in range(cluster.worker_count):
        link = probe.get(f"w{i}")
        if link:
            overrides[i] = {"uplink": float(link["uplink_bps"]),
                            "downlink": float(link["downlink_bps"])}
    top: dict[str, Any] = {"goodput": 1.0}
    shards = [v for k, v in probe.items() if k.startswith("ps")]
    data_ps = cluster.to_dict().get("ps", {})
    if shards:
        data_ps = {k: v for k, v in data_ps.items() if k != "bandwidth"}
        data_ps["uplink"] = min(float(s["uplink_bps"]) for s in shards)
        data_ps["downlink"] = min(float(s["downlink_bps"]) for s in shards)
    top["ps"] = data_ps
    # groups without a probe (none, normally) keep their configured rate × old goodput
    untouched = {i: {"uplink": cluster.worker_up(g) * cluster.goodput,
                     "downlink": cluster.worker_down(g) * cluster.goodput}
                 for i, g in enumerate(_worker_groups(cluster)) if i not in overrides}
    return with_worker_overrides(cluster, {**untouched, **overrides}, **top)


def _worker_groups(cluster: Cluster) -> list[Any]:
    return [g for g in cluster.workers for _ in range(g.count)]


def probe_deviation(measurement: Prediction) -> float | None:
    """Largest |probed / expected − 1| over all links (expected = configured × goodput)."""
    probe = measurement.inputs.get("measure", {}).get("probe") or {}
    worst = None
    for link in probe.values():
        for direction in ("uplink", "downlink"):
            got, expected = link.get(f"{direction}_bps"), link.get(f"{direction}_expected_bps")
            if got and expected:
                dev = abs(float(got) / float(expected) - 1)
                worst = dev if worst is None else max(worst, dev)
    return worst


# ----------------------------------------------------------------------------- comparison


def error_pct(predicted: float, measured: float) -> float:
    """Signed error of a prediction, percent of the measurement."""
    return 100.0 * (predicted - measured) / measured if measured > 0 else math.nan


def _per_worker(p: Prediction) -> dict[str, float]:
    return {w.name: float(w.iteration_time_s) for w in p.workers}


def compare(plan_info: dict[str, Any], measurement: Prediction,
            predictions: dict[str, Prediction]) -> dict[str, Any]:
    """One result row: the measurement's headline numbers and, per method, the prediction and
    its error (iteration time and throughput)."""
    pct = (measurement.percentiles or {}).get("iteration_time_s", {})
    info = measurement.inputs.get("measure", {})
    deviation = probe_deviation(measurement)
    row: dict[str, Any] = {
        **plan_info,
        "status": "ok",
        "measured": {
            "iteration_time_s": float(measurement.iteration_time_s),
            "p5_s": pct.get("p5"), "p50_s": pct.get("p50"), "p95_s": pct.get("p95"),
            "throughput_samples_per_s": float(measurement.throughput_samples_per_s),
            "bottleneck": measurement.bottleneck,
            "per_worker": _per_worker(measurement),
            "breakdown_s": dict(measurement.breakdown_s),
            "wire_ok": (info.get("wire_check") or {}).get("ok"),
            "probe_max_deviation_pct": None if deviation is None else 100 * deviation,
            "ps_update_s_per_byte": info.get("ps_update_s_per_byte"),
            "out": info.get("out"),
        },
        "predicted": {},
    }
    for method, p in predictions.items():
        ppct = (p.percentiles or {}).get("iteration_time_s", {})
        row["predicted"][method] = {
            "iteration_time_s": float(p.iteration_time_s),
            "p5_s": ppct.get("p5"), "p95_s": ppct.get("p95"),
            "throughput_samples_per_s": float(p.throughput_samples_per_s),
            "bottleneck": p.bottleneck,
            "per_worker": _per_worker(p),
            "breakdown_s": dict(p.breakdown_s),
            "error_pct": error_pct(p.iteration_time_s, measurement.iteration_time_s),
            "throughput_error_pct": error_pct(p.throughput_samples_per_s,
                                              measurement.throughput_samples_per_s),
        }
    return row


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per method: scenarios compared, MAPE (%), worst |error| (%) and where, within 10%."""
    out: dict[str, Any] = {}
    ok = [r for r in rows if r.get("status") == "ok"]
    for method in METHODS:
        errors = [(r["name"], r["predicted"][method]["error_pct"]) for r in ok
                  if method in r.get("predicted", {})
                  and math.isfinite(r["predicted"][method]["error_pct"])]
        if not errors:
            continue
        worst = max(errors, key=lambda e: abs(e[1]))
        mape = sum(abs(e) for _n, e in errors) / len(errors)
        within = sum(1 for _n, e in errors if abs(e) <= TARGET_WORST_PCT)
        out[method] = {
            "scenarios": len(errors), "mape_pct": mape, "worst_abs_error_pct": abs(worst[1]),
            "worst_error_pct": worst[1], "worst_scenario": worst[0],
            "within_10pct": within, "mean_error_pct": sum(e for _n, e in errors) / len(errors),
        }
    failed = [r["name"] for r in rows if r.get("status") != "ok"]
    if failed:
        out["failed"] = failed
    return out


# ----------------------------------------------------------------------------- running


@dataclass
class ValidationRun:
    """What :func:`validate` returns (and writes as ``OUT/results.json``)."""

    out: Path
    matrix: str
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"format": RESULTS_FORMAT, **self.meta, "matrix": self.matrix,
                "summary": self.summary, "scenarios": self.rows}


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {"cores": os.cpu_count(), "kernel": platform.release(),
                            "python": platform.python_version()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import torch

        info["torch"] = torch.__version__
    except ModuleNotFoundError:
        pass
    return info


def _prepare_out(out: str | Path, resume: bool) -> Path:
    taken = () if resume else ("results.json",)
    return prepare_output_dir(out, "--out", taken, "validation results",
                              "add --resume to continue it, or choose a new directory")


def _previous(out: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads((out / "results.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    if data.get("format") != RESULTS_FORMAT:
        return {}
    return {r["name"]: r for r in data.get("scenarios", []) if isinstance(r, dict)}


def _fresh_dir(directory: Path) -> None:
    """Remove what an interrupted attempt of this scenario left (only our own files)."""
    if not directory.exists():
        return
    measure_dir = directory / "measure"
    if measure_dir.exists() and any((measure_dir / n).exists() for n in (
            "spec.json", "records.jsonl", "measurement.json")):
        shutil.rmtree(measure_dir)
    for name in ("workload.json", "predict-analytic.json", "predict-simulate.json",
                 "result.json"):
        (directory / name).unlink(missing_ok=True)


def write_results(run: ValidationRun, plot: bool = True) -> None:
    """``results.json``, ``results.csv`` and ``validation.png`` in ``run.out``, atomically."""
    from ddlperf.report.validation import csv_text, plot_validation

    write_atomic(run.out / "results.json",
                 json.dumps(clean_json(run.to_dict()), indent=1, allow_nan=False) + "\n")
    write_atomic(run.out / "results.csv", csv_text(run.rows))
    if plot and any(r.get("status") == "ok" for r in run.rows):
        plot_validation(run.rows, run.out / "validation.png", run.summary)


def clean_json(value: Any) -> Any:
    """NaN/inf → None so results.json stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value


def _simulate_options(plan: Plan, workload: Workload) -> dict[str, Any]:
    options: dict[str, Any] = {"iterations": plan.iterations, "warmup": plan.warmup, "seed": 0}
    noisy = any(layer.forward_cv > 0 or layer.backward_cv > 0 for layer in workload.layers)
    if noisy:
        options["replications"] = 5
    return options


def run_scenario(plan: Plan, directory: Path, *, rates: str = "configured",
                 ps_update: Callable[[], dict[str, Any]] | None = None,
                 say: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Profile (real compute), measure, predict with both methods, compare: one result row."""
    from ddlperf.api import predict
    from ddlperf.measure.run import measure

    began = time.monotonic()
    durations: dict[str, float] = {}
    load_before = _load()
    directory.mkdir(parents=True, exist_ok=True)
    _fresh_dir(directory)
    inputs: dict[str, Any] = {"rates": rates}
    workload, cluster = plan.workload, plan.cluster
    if plan.compute == "real":
        say("profiling the model on this CPU (fresh process, 1 thread)")
        t0 = time.monotonic()
        workload = profile_real(plan, directory / "workload.json")
        durations["profile_s"] = time.monotonic() - t0
        inputs["profile"] = {
            "step_s": workload.provenance.get("step_s_median"),
            "step_cv": workload.provenance.get("step_s_cv"),
            "compute_s": workload.compute_s,
            "update_s_per_byte": workload.update_s_per_byte,
        }
        inputs["ps_update_s_per_byte"] = {
            "value": workload.update_s_per_byte,
            "source": "the profile's optimizer step (SGD, momentum 0.9) on this CPU"}
    elif plan.strategy.arch == "ps" and cluster.ps.update_s_per_byte is None and ps_update:
        calibration = ps_update()
        cluster = with_ps_update(cluster, float(calibration["update_s_per_byte"]))
        inputs["ps_update_s_per_byte"] = {
            "value": calibration["update_s_per_byte"],
            "source": "calibrated on this CPU in this session: " + calibration["how"]}
    speeds: dict[str, dict[str, float]] = {}
    if plan.cpu_quota:
        say(f"timing the step under CPU quota {plan.cpu_quota}")
        t0 = time.monotonic()
        speeds = quota_speeds(plan)
        durations["quota_timing_s"] = time.monotonic() - t0
        inputs["quota"] = speeds
    t0 = time.monotonic()
    measurement = measure(
        workload=workload, cluster=cluster, strategy=plan.strategy, compute=plan.compute,
        iterations=plan.iterations, warmup=plan.warmup, out=directory / "measure",
        timeout=plan.timeout, cpu_quota=plan.cpu_quota or None, probe=True,
        probe_seconds=plan.probe_seconds, progress=say)
    durations["measure_s"] = time.monotonic() - t0
    predict_cluster = cluster
    if speeds:
        predict_cluster = with_worker_overrides(
            predict_cluster, {int(h[1:]): {"speed": s["speed"]} for h, s in speeds.items()})
    probe = measurement.inputs.get("measure", {}).get("probe") or {}
    if rates == "probed":
        if not probe:
            raise InputError("--rates", "probed rates need the measurement's link probe")
        predict_cluster = probed_cluster(predict_cluster, probe)
    say("predicting (analytic, simulate)")
    t0 = time.monotonic()
    predictions: dict[str, Prediction] = {}
    for method in METHODS:
        options = _simulate_options(plan, workload) if method == "simulate" else {}
        p = predict(workload=workload, cluster=predict_cluster, strategy=plan.strategy,
                    method=method, **options)
        predictions[method] = p
        write_atomic(directory / f"predict-{method}.json",
                     json.dumps(clean_json(p.to_dict()), indent=1, allow_nan=False) + "\n")
    durations["predict_s"] = time.monotonic() - t0
    durations["total_s"] = time.monotonic() - began
    inputs["predict_cluster"] = predict_cluster.to_dict()
    # the 1-minute load average before and after: another job on 2 cores skews a measurement
    inputs["load_average_1min"] = {"before": load_before, "after": _load()}
    info = {"name": plan.name, "index": plan.index, "note": plan.note,
            "fingerprint": plan.fingerprint, "setup": plan.describe(), "inputs": inputs,
            "durations_s": durations}
    row = clean_json(compare(info, measurement, predictions))
    write_atomic(directory / "result.json", json.dumps(row, indent=1, allow_nan=False) + "\n")
    return row


def _load() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except OSError:  # pragma: no cover - not on Linux
        return None


def validate(
    matrix: str | Path,
    *,
    out: str | Path = "validation",
    only: Iterable[str] | None = None,
    resume: bool = False,
    rates: str = "configured",
    progress: Progress | None = None,
    plot: bool = True,
) -> ValidationRun:
    """Run every scenario of ``matrix`` (or ``only`` those) and compare; see the module doc.

    ``progress`` receives dicts: ``{"event": "start"|"step"|"done"|"skip"|"failed",
    "index", "total", "name", "message", "row"}``. A scenario whose run fails (a rank crashed
    or hung, the wire check failed) is recorded with ``status: "failed"`` and the others go on;
    bad input raises :class:`InputError` before anything runs.
    """
    from ddlperf.measure.emulated import require_root
    from ddlperf.measure.launcher import RunFailed

    if rates not in RATES:
        raise InputError("--rates", f"unknown choice {rates!r}", f"use {' or '.join(RATES)}")
    _matrix_file, plans = plan_matrix(matrix, only)
    require_root()
    out_dir = _prepare_out(out, resume)
    emit = progress or (lambda _e: None)
    previous = _previous(out_dir) if resume else {}
    prior = _previous_runtime(out_dir) if resume else 0.0
    began = time.monotonic()
    meta = {"created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "rates": rates,
            "machine": machine_info(), "command": "ddlperf validate " + " ".join(
                [f"--matrix {matrix}", f"--rates {rates}"]
                + ([f"--only {','.join(only)}"] if only else []))}
    try:
        order = {e.name: i for i, e in enumerate(load_matrix(matrix).scenarios)}
    except InputError:  # pragma: no cover - already read once above
        order = {}
    calibration: dict[str, Any] = {}

    def ps_update() -> dict[str, Any]:
        if not calibration:
            calibration.update(calibrate_ps_update())
            meta["ps_update_calibration"] = dict(calibration)
        return calibration

    rows: dict[str, dict[str, Any]] = {
        n: r for n, r in previous.items() if n in order and r.get("status") == "ok"}
    run = ValidationRun(out_dir, str(matrix), [], {}, meta)

    def flush() -> None:
        run.rows = sorted(rows.values(), key=lambda r: order.get(r["name"], 1 << 30))
        run.summary = summarize(run.rows)
        meta["runtime_s"] = prior + time.monotonic() - began
        write_results(run, plot=plot)

    total = len(plans)
    for i, plan in enumerate(plans):
        base = {"index": i, "total": total, "name": plan.name}
        done = rows.get(plan.name)
        if done is not None and done.get("fingerprint") == plan.fingerprint:
            emit({**base, "event": "skip", "row": done,
                  "message": "already done (--resume)"})
            continue
        rows.pop(plan.name, None)
        emit({**base, "event": "start", "message": "starting"})
        try:
            row = run_scenario(plan, out_dir / plan.name, rates=rates, ps_update=ps_update,
                               say=lambda m, base=base: emit({**base, "event": "step",
                                                              "message": m}))
        except RunFailed as exc:
            row = {"name": plan.name, "index": plan.index, "note": plan.note,
                   "fingerprint": plan.fingerprint, "setup": plan.describe(),
                   "status": "failed", "error": str(exc)}
            rows[plan.name] = row
            flush()
            emit({**base, "event": "failed", "row": row, "message": str(exc)})
            continue
        rows[plan.name] = row
        flush()
        emit({**base, "event": "done", "row": row, "message": "done"})
    flush()
    return run


def _previous_runtime(out: Path) -> float:
    try:
        data = json.loads((out / "results.json").read_text())
        return float(data.get("runtime_s") or 0.0)
    except (OSError, ValueError, TypeError):
        return 0.0


def load_results(path: str | Path, field: str = "--results") -> ValidationRun:
    """Read ``results.json`` (or a directory holding it) back."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    if not p.exists():
        raise InputError(field, f"no validation results at {str(p)!r}",
                         "run ddlperf validate first")
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        raise InputError(field, f"{str(p)!r} is not a readable results.json") from None
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise InputError(field, f"{str(p)!r} is not a {RESULTS_FORMAT} file")
    meta = {k: v for k, v in data.items() if k not in ("format", "matrix", "summary",
                                                       "scenarios")}
    rows = list(data.get("scenarios", []))
    return ValidationRun(p.parent, str(data.get("matrix", "")), rows, summarize(rows), meta)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["time-steps"] and len(args) == 5:
        _time_steps_main(args[1:])
        return
    raise SystemExit("usage: python -m ddlperf.validate time-steps MODEL BATCH WARM_S WINDOW_S")


if __name__ == "__main__":
    main()
