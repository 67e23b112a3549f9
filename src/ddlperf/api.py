"""The Python API behind the CLI: build the three inputs from plain values and predict.

Everything accepts the same human units as the CLI (``"10Gbps"``, ``"50us"``, ``"25MB"``)
as well as base-unit numbers (bits/s, seconds, bytes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddlperf.cluster import Cluster, load_cluster
from ddlperf.errors import InputError
from ddlperf.prediction import Prediction
from ddlperf.scenario import resolve
from ddlperf.strategy import Strategy
from ddlperf.workload import Workload, load_workload

# Field → CLI flag, so errors about values that came from flags name the flag.
FLAGS = {
    "bucket_bytes": "--bucket-size", "staleness": "--staleness", "sync": "--sync",
    "arch": "--arch", "sharding": "--sharding", "bandwidth": "--bandwidth",
    "latency": "--latency", "goodput": "--goodput", "device": "--device",
    "placement": "--placement", "count": "--workers",
}


def _as_flag(exc: InputError, prefix: str) -> InputError:
    """Rename ``strategy.bucket_bytes`` to ``--bucket-size`` when the value came from a flag."""
    if not exc.field.startswith(prefix):
        return exc
    last = exc.field.split(".")[-1].split("[")[0]
    if last == "count" and ".ps" in exc.field:
        return InputError("--ps", exc.problem, exc.fix)
    flag = FLAGS.get(last)
    return exc if flag is None else InputError(flag, exc.problem, exc.fix)


# The built-in default scenario (``ddlperf predict`` with no arguments).
DEFAULTS: dict[str, Any] = {
    "model": "resnet50",
    "batch_size": 32,
    "device": "V100",
    "workers": 8,
    "ps": 2,
    "bandwidth": "10Gbps",
    "latency": "50us",
}
METHODS = ("analytic", "simulate")


def make_workload(
    model: str | None = None,
    workload: Workload | str | Path | dict[str, Any] | None = None,
    batch_size: int | None = None,
    device: str | None = None,
    dtype: str = "fp32",
) -> Workload:
    """A zoo model at a batch size on a device, or a workload file / object."""
    if model is not None and workload is not None:
        raise InputError("--model", "give either --model or --workload, not both")
    if batch_size is not None and batch_size <= 0:
        raise InputError("--batch-size", f"must be a positive integer, got {batch_size}")
    if workload is not None:
        if isinstance(workload, Workload):
            return workload
        if isinstance(workload, dict):
            return Workload.from_dict(workload)
        return load_workload(workload)
    from ddlperf.workload import zoo

    return zoo.load(
        model or DEFAULTS["model"],
        batch_size=batch_size or DEFAULTS["batch_size"],
        device=device or DEFAULTS["device"],
        dtype=dtype,
    )


def make_cluster(
    config: Cluster | str | Path | dict[str, Any] | None = None,
    workers: int | None = None,
    ps: int | None = None,
    bandwidth: str | float | None = None,
    latency: str | float | None = None,
    goodput: float | None = None,
    placement: str | None = None,
    arch: str = "ps",
    worker_device: str | None = None,
) -> Cluster:
    """A cluster from a YAML/dict/Cluster, with flags overriding its top-level values."""
    if isinstance(config, Cluster):
        data: dict[str, Any] = config.to_dict()
    elif isinstance(config, dict):
        data = dict(config)
    elif config is not None:
        data = load_cluster(str(config)).to_dict()
    else:
        data = {}
    if workers is not None:
        if workers <= 0:
            raise InputError("--workers", f"must be at least 1, got {workers}")
        if config is not None and "workers" in data:
            raise InputError("--workers", "the --config file already lists workers",
                             "drop --workers or edit the file")
        data["workers"] = [{"count": workers}]
    data.setdefault("workers", [{"count": DEFAULTS["workers"]}])
    if worker_device is not None:
        groups = data["workers"] if isinstance(data["workers"], list) else [data["workers"]]
        data["workers"] = [{**g, "device": g.get("device", worker_device)}
                           if isinstance(g, dict) else g for g in groups]
    ps_data = dict(data.get("ps") or {}) if not isinstance(data.get("ps"), int) else {
        "count": data["ps"]}
    if ps is not None:
        if ps < 0:
            raise InputError("--ps", f"must be ≥ 0, got {ps}")
        ps_data["count"] = ps
    elif "count" not in ps_data:
        ps_data["count"] = DEFAULTS["ps"] if arch == "ps" else 0
    if placement is not None:
        ps_data["placement"] = placement
    data["ps"] = ps_data
    for key, value in (("bandwidth", bandwidth), ("latency", latency), ("goodput", goodput)):
        if value is not None:
            data[key] = value
    data.setdefault("bandwidth", DEFAULTS["bandwidth"])
    data.setdefault("latency", DEFAULTS["latency"])
    try:
        return Cluster.from_dict(data, field="cluster")
    except InputError as exc:
        raise (exc if config is not None else _as_flag(exc, "cluster")) from None


def make_strategy(
    arch: str = "ps",
    sync: str = "bsp",
    staleness: int | None = None,
    sharding: str = "round_robin",
    overlap: bool = True,
    bucket_size: str | float | None = None,
) -> Strategy:
    """A Strategy with one-line errors for incoherent combinations."""
    data: dict[str, Any] = {"arch": arch, "sync": sync, "sharding": sharding, "overlap": overlap}
    if staleness is not None:
        data["staleness"] = staleness
    if bucket_size is not None:
        data["bucket_bytes"] = bucket_size
    from ddlperf.schema import validate

    try:
        return validate(Strategy, data, prefix="strategy")
    except InputError as exc:
        raise _as_flag(exc, "strategy") from None


def predict(
    model: str | None = None,
    *,
    workload: Workload | str | Path | dict[str, Any] | None = None,
    cluster: Cluster | str | Path | dict[str, Any] | None = None,
    strategy: Strategy | None = None,
    method: str = "analytic",
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
    goodput: float | None = None,
    **simulate_options: Any,
) -> Prediction:
    """Predict one scenario. With no arguments: the built-in default (resnet50, 8×V100, 2 PS).

    ``simulate_options`` (``iterations``, ``warmup``, ``seed``, ``replications``, ``jitter``,
    ``trace``) apply to ``method="simulate"``.
    """
    if method not in METHODS:
        raise InputError("--method", f"unknown method {method!r}", f"use one of {METHODS}")
    if simulate_options and method != "simulate":
        name = "--" + next(iter(simulate_options)).replace("_", "-")
        raise InputError(name, f"only applies to --method simulate (got {method})",
                         "add --method simulate")
    the_workload = make_workload(model, workload, batch_size, device)
    if strategy is None:
        strategy = make_strategy(arch, sync, staleness, sharding, overlap, bucket_size)
    worker_device = device if (workload is not None and device is not None) else None
    the_cluster = make_cluster(cluster, workers, ps, bandwidth, latency, goodput, placement,
                               strategy.arch, worker_device)
    scenario = resolve(the_workload, the_cluster, strategy)
    if method == "simulate":
        from ddlperf.predictors.simulate import predict_simulate

        return predict_simulate(scenario, **simulate_options)
    from ddlperf.predictors.analytic import predict_analytic

    return predict_analytic(scenario)
