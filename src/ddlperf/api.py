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
    "placement": "--placement", "count": "--workers", "gpus": "--gpus-per-node",
    "intra": "--intra", "nics": "--nics", "allreduce": "--allreduce",
    "local_aggregation": "--local-aggregation",
}


def _as_flag(exc: InputError, prefix: str) -> InputError:
    """Rename ``strategy.bucket_bytes`` to ``--bucket-size`` when the value came from a flag."""
    if not exc.field.startswith(prefix):
        return exc
    last = exc.field.split(".")[-1].split("[")[0]
    if last == "count" and ".ps" in exc.field:
        return InputError("--ps", exc.problem, exc.fix)
    if ".racks" in exc.field:
        flag = "--rack-size" if last == "servers" else "--rack-uplink"
        return InputError(flag, exc.problem, exc.fix)
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
    dtype: str | None = None,
    math: str | None = None,
    grad_dtype: str | None = None,
    accumulation: int | None = None,
) -> Workload:
    """A zoo model at a batch size on a device, or a workload file / object.

    ``dtype``/``math``/``grad_dtype`` apply to zoo models (a workload file's times were taken
    at its own dtype); ``accumulation`` (micro-batches per synchronisation) to both.
    """
    from ddlperf.workload import zoo

    if model is not None and workload is not None:
        raise InputError("--model", "give either --model or --workload, not both")
    if batch_size is not None and batch_size <= 0:
        raise InputError("--batch-size", f"must be a positive integer, got {batch_size}")
    k = zoo.check_accumulation(1 if accumulation is None else accumulation)
    if workload is not None:
        for flag, value in (("--dtype", dtype), ("--math", math), ("--grad-dtype", grad_dtype)):
            if value is not None:
                raise InputError(flag, "applies to zoo models (--model), not to a workload "
                                 "file", "profile the model at that dtype instead")
        if isinstance(workload, Workload):
            loaded = workload
        elif isinstance(workload, dict):
            loaded = Workload.from_dict(workload)
        else:
            loaded = load_workload(workload)
        return loaded if accumulation is None else loaded.with_updates(accumulation=k)
    return zoo.load(
        model or DEFAULTS["model"],
        batch_size=batch_size or DEFAULTS["batch_size"],
        device=device or DEFAULTS["device"],
        dtype=dtype or "fp32",
        math=math,
        grad_dtype=grad_dtype,
        accumulation=k,
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
    gpus_per_node: int | None = None,
    intra: str | float | None = None,
    nics: int | None = None,
    rack_size: int | None = None,
    rack_uplink: str | float | None = None,
) -> Cluster:
    """A cluster from a YAML/dict/Cluster, with flags overriding its top-level values.

    ``workers`` counts GPUs; with ``gpus_per_node`` G they sit on workers / G servers of G
    GPUs each (``intra`` fabric, ``nics`` NICs), named ``node0/gpu0`` …; ``rack_size`` and
    ``rack_uplink`` put those servers into racks.
    """
    if isinstance(config, Cluster):
        data: dict[str, Any] = config.to_dict()
    elif isinstance(config, dict):
        data = dict(config)
    elif config is not None:
        data = load_cluster(str(config)).to_dict()
    else:
        data = {}
    listed = "workers" if "workers" in data else "nodes" if "nodes" in data else None
    if workers is not None:
        if workers <= 0:
            raise InputError("--workers", f"must be at least 1, got {workers}")
        if config is not None and listed:
            raise InputError("--workers", f"the --config file already lists {listed}",
                             "drop --workers or edit the file")
    servers_flags = gpus_per_node is not None or intra is not None or nics is not None
    if servers_flags and config is not None and listed:
        data = _servers_from_flags_on_file(data, listed, gpus_per_node, intra, nics)
    elif servers_flags:
        data.pop("workers", None)
        data["nodes"] = [_node_group(workers or DEFAULTS["workers"], gpus_per_node, intra,
                                     nics)]
    elif workers is not None:
        data["workers"] = [{"count": workers}]
    if "nodes" not in data:
        data.setdefault("workers", [{"count": DEFAULTS["workers"]}])
    if worker_device is not None:
        key = "workers" if "workers" in data else "nodes"
        groups = data[key] if isinstance(data[key], list) else [data[key]]
        data[key] = [{**g, "device": g.get("device", worker_device)}
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
    if (rack_size is None) != (rack_uplink is None):
        missing = "--rack-uplink" if rack_uplink is None else "--rack-size"
        given = "--rack-size" if rack_uplink is None else "--rack-uplink"
        raise InputError(given, "racks need both --rack-size and --rack-uplink",
                         f"add {missing}")
    if rack_size is not None:
        data["racks"] = {"servers": rack_size, "uplink": rack_uplink}
    for key, value in (("bandwidth", bandwidth), ("latency", latency), ("goodput", goodput)):
        if value is not None:
            data[key] = value
    data.setdefault("bandwidth", DEFAULTS["bandwidth"])
    data.setdefault("latency", DEFAULTS["latency"])
    try:
        return Cluster.from_dict(data, field="cluster")
    except InputError as exc:
        raise (exc if config is not None else _as_flag(exc, "cluster")) from None


def _node_group(workers: int, gpus: int | None, intra: str | float | None,
                nics: int | None) -> dict[str, Any]:
    """``--workers N --gpus-per-node G [--intra F] [--nics K]`` as one nodes: group."""
    gpus = 1 if gpus is None else gpus
    if gpus <= 0:
        raise InputError("--gpus-per-node", f"must be at least 1, got {gpus}")
    if workers % gpus:
        raise InputError("--workers", f"{workers} workers do not fill servers of {gpus} GPUs",
                         f"give a multiple of --gpus-per-node {gpus}")
    if intra is None and gpus > 1:
        raise InputError("--gpus-per-node", f"servers with {gpus} GPUs need an intra-node "
                         "fabric", "add --intra NAME ('ddlperf fabrics' lists them) or a rate "
                         "such as 150GB/s")
    if intra is not None and gpus == 1:
        raise InputError("--intra", "a fabric links the GPUs of a server, and servers have "
                         "one GPU here", "add --gpus-per-node G (G > 1)")
    group: dict[str, Any] = {"name": "node", "count": workers // gpus, "gpus": gpus}
    if intra is not None:
        group["intra"] = intra
    if nics is not None:
        group["nics"] = nics
    return group


def _servers_from_flags_on_file(
    data: dict[str, Any], listed: str, gpus: int | None, intra: str | float | None,
    nics: int | None,
) -> dict[str, Any]:
    """``--intra``/``--nics`` override every nodes: group of a --config file."""
    if gpus is not None:
        raise InputError("--gpus-per-node", f"the --config file already lists {listed}",
                         "set gpus in its nodes: groups instead")
    flag = "--intra" if intra is not None else "--nics"
    if listed == "workers":
        raise InputError(flag, "the --config file lists workers: (one GPU and one NIC each)",
                         "describe servers with nodes: in the file")
    groups = data["nodes"] if isinstance(data["nodes"], list) else [data["nodes"]]
    extra = {k: v for k, v in (("intra", intra), ("nics", nics)) if v is not None}
    return {**data, "nodes": [{**g, **extra} for g in groups]}


def make_strategy(
    arch: str = "ps",
    sync: str = "bsp",
    staleness: int | None = None,
    sharding: str = "round_robin",
    overlap: bool = True,
    bucket_size: str | float | None = None,
    allreduce: str = "ring",
    local_aggregation: bool = False,
) -> Strategy:
    """A Strategy with one-line errors for incoherent combinations."""
    data: dict[str, Any] = {"arch": arch, "sync": sync, "sharding": sharding, "overlap": overlap,
                            "allreduce": allreduce, "local_aggregation": local_aggregation}
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
    gpus_per_node: int | None = None,
    intra: str | float | None = None,
    nics: int | None = None,
    rack_size: int | None = None,
    rack_uplink: str | float | None = None,
    allreduce: str = "ring",
    local_aggregation: bool = False,
    dtype: str | None = None,
    math: str | None = None,
    grad_dtype: str | None = None,
    accumulation: int | None = None,
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
    the_workload = make_workload(model, workload, batch_size, device, dtype, math, grad_dtype,
                                 accumulation)
    if strategy is None:
        strategy = make_strategy(arch, sync, staleness, sharding, overlap, bucket_size,
                                 allreduce, local_aggregation)
    worker_device = device if (workload is not None and device is not None) else None
    the_cluster = make_cluster(cluster, workers, ps, bandwidth, latency, goodput, placement,
                               strategy.arch, worker_device, gpus_per_node, intra, nics,
                               rack_size, rack_uplink)
    scenario = resolve(the_workload, the_cluster, strategy)
    if method == "simulate":
        from ddlperf.predictors.simulate import predict_simulate

        prediction = predict_simulate(scenario, **simulate_options)
    else:
        from ddlperf.predictors.analytic import predict_analytic

        prediction = predict_analytic(scenario)
    if scenario.memory:
        prediction.inputs["memory"] = scenario.memory
    return prediction
