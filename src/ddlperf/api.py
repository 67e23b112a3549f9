"""The Python API behind the CLI: build the three inputs from plain values and predict.

Everything accepts the same human units as the CLI (``"10Gbps"``, ``"50us"``, ``"25MB"``)
as well as base-unit numbers (bits/s, seconds, bytes).
"""

from __future__ import annotations

import copy
import inspect
from functools import lru_cache
from numbers import Real
from pathlib import Path
from typing import Any

from ddlperf.cluster import Cluster
from ddlperf.errors import InputError
from ddlperf.hardware import parse_link_rate
from ddlperf.prediction import Prediction
from ddlperf.scenario import Scenario, resolve
from ddlperf.schema import read_structured
from ddlperf.strategy import Strategy
from ddlperf.units import parse_duration, parse_size, warn_if_implausible
from ddlperf.workload import Workload, load_workload

# Field → CLI flag, so errors about values that came from flags name the flag.
FLAGS = {
    "bucket_bytes": "--bucket-size", "staleness": "--staleness", "sync": "--sync",
    "arch": "--arch", "sharding": "--sharding", "bandwidth": "--bandwidth",
    "latency": "--latency", "goodput": "--goodput", "device": "--device",
    "placement": "--placement", "count": "--workers", "gpus": "--gpus-per-node",
    "intra": "--intra", "nics": "--nics", "allreduce": "--allreduce",
    "local_aggregation": "--local-aggregation", "transport": "--transport",
    "step_barrier": "--step-barrier",
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
    for flag, name in (("--model", model), ("--device", device)):
        if name is not None and not str(name).strip():  # not a silent fall-back to the default
            raise InputError(flag, "is empty", "give a name (see 'ddlperf models' / 'ddlperf "
                             "devices') or leave the flag out for the default")
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


def worker_defaults(
    workload: object, batch_size: int | None, device: str | None
) -> dict[str, Any]:
    """(device, batch) every worker group gets unless it sets its own.

    A zoo model is built at ``batch_size`` on ``device``, so its workers need nothing more. A
    workload file keeps the batch and device it was profiled at; ``--device`` and
    ``--batch-size`` then describe the workers, and ``scenario.group_compute`` rescales the
    file's times to them.
    """
    if workload is None:
        return {}
    return {"worker_device": device, "worker_batch": batch_size}


def _check_count(flag: str, value: Any) -> None:
    """A count given to the API must be a number: a list or a string here would otherwise
    fail deep inside as a TypeError (the CLI parses its flags before they get here)."""
    if value is None or (isinstance(value, Real) and not isinstance(value, bool)):
        return
    hint = ("describe groups of workers with cluster={'workers': [{'count': 2}, "
            "{'count': 1, 'speed': 0.5}]} or a cluster YAML" if flag == "--workers" and
            isinstance(value, (list, tuple, dict)) else "give a whole number")
    raise InputError(flag, f"must be a whole number, got {value!r}", hint)


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
    worker_batch: int | None = None,
    transport: str | None = None,
) -> Cluster:
    """A cluster from a YAML/dict/Cluster, with flags overriding its top-level values.

    ``workers`` counts GPUs; with ``gpus_per_node`` G they sit on workers / G servers of G
    GPUs each (``intra`` fabric, ``nics`` NICs), named ``node0/gpu0`` …; ``rack_size`` and
    ``rack_uplink`` put those servers into racks. ``worker_device`` / ``worker_batch`` are
    the device and batch of every worker group that does not set its own (used with a
    workload file, whose times are then rescaled). ``transport`` is a catalog name or a
    per-connection cap (:mod:`ddlperf.transport`).
    """
    for flag, count in (("--workers", workers), ("--ps", ps), ("--gpus-per-node", gpus_per_node),
                        ("--nics", nics), ("--rack-size", rack_size)):
        _check_count(flag, count)
    data, source = _cluster_data(config)
    listed = "workers" if "workers" in data else "nodes" if "nodes" in data else None
    if workers is not None:
        if workers <= 0:
            raise InputError("--workers", f"must be at least 1, got {workers}")
        if listed:
            named = "" if source == "cluster" else f" {source}"
            raise InputError("--workers", f"the --config file{named} already lists {listed}",
                             f"drop --workers or remove '{listed}' from the file")
    servers_flags = gpus_per_node is not None or intra is not None or nics is not None
    if servers_flags and listed:
        data = _servers_from_flags_on_file(data, listed, gpus_per_node, intra, nics)
    elif servers_flags:
        data.pop("workers", None)
        data["nodes"] = [_node_group(workers or DEFAULTS["workers"], gpus_per_node, intra,
                                     nics)]
    elif workers is not None:
        data["workers"] = [{"count": workers}]
    if "nodes" not in data:
        data.setdefault("workers", [{"count": DEFAULTS["workers"]}])
    if worker_device is not None or worker_batch is not None:
        key = "workers" if "workers" in data else "nodes"
        groups = data[key]
        if isinstance(groups, int) and not isinstance(groups, bool):
            groups = [{"count": groups}]
        elif not isinstance(groups, list):
            groups = [groups]
        defaults = {k: v for k, v in (("device", worker_device), ("batch_size", worker_batch))
                    if v is not None}
        data[key] = [{**defaults, **{k: v for k, v in g.items() if v is not None}}
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
    if transport is not None:
        data["transport"] = transport
    flags = {}
    for key, value, parse in (("bandwidth", bandwidth, parse_link_rate),
                              ("latency", latency, parse_duration),
                              ("goodput", goodput, _goodput)):
        if value is not None:
            flags[key] = parse(value, f"--{key}")  # a bad flag is named as the flag
            data[key] = value
    data.setdefault("bandwidth", DEFAULTS["bandwidth"])
    data.setdefault("latency", DEFAULTS["latency"])
    _warn_implausible(data, source, flags)
    try:
        return Cluster.from_dict(data, field=source)
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


def _cluster_data(
    config: Cluster | str | Path | dict[str, Any] | None,
) -> tuple[dict[str, Any], str]:
    """The cluster as given (a file's own keys, nothing defaulted yet) and its name."""
    if isinstance(config, Cluster):
        return config.to_dict(), "cluster"
    if isinstance(config, dict):
        return copy.deepcopy(config), "cluster"
    if config is None:
        return {}, "cluster"
    path = Path(config)
    stamp = path.stat().st_mtime_ns if path.is_file() else None
    return copy.deepcopy(_read_cluster_file(str(path), stamp)), str(path)


@lru_cache(maxsize=32)
def _read_cluster_file(path: str, _stamp: int | None) -> dict[str, Any]:
    """A cluster file's mapping (cached per modification time: sweeps read it per point)."""
    data = read_structured(path, "--config")
    if isinstance(data, dict) and "cluster" in data:
        data = data["cluster"]
    if not isinstance(data, dict):
        raise InputError(path, "must be a mapping with 'workers' (and optionally 'ps')")
    if "layers" in data:
        raise InputError("--config", f"{Path(path).name} is a workload (it has 'layers'), not "
                         "a cluster", "give it with --workload")
    return data


def _goodput(value: Any, field: str) -> float:
    """The payload share of the line rate: a number in (0, 1]."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(field, f"{value!r} is not a number", "e.g. 0.956") from None
    if not 0 < number <= 1:  # also refuses nan
        raise InputError(field, f"must be in (0, 1], got {value!r}",
                         "the payload share of the line rate, e.g. 0.956 for TCP/Ethernet")
    return number


def _warn_implausible(data: dict[str, Any], source: str, flags: dict[str, float]) -> None:
    """Warn about rates and latencies no real cluster has (a number without its unit)."""
    def check(kind: str, raw: Any, field: str, parse: Any) -> None:
        try:
            value = parse(raw, field)
        except InputError:
            return  # validation reports it
        warn_if_implausible(kind, value, raw, field)

    for key, kind, parse in (("bandwidth", "bandwidth", parse_link_rate),
                             ("latency", "latency", parse_duration)):
        if key in data:
            field = f"--{key}" if key in flags else f"{source}: {key}"
            check(kind, data[key], field, parse)
    parts = []
    for key in ("workers", "nodes"):
        groups = data.get(key)
        parts += ([(f"{key}[{i}]", g) for i, g in enumerate(groups)]
                  if isinstance(groups, list) else [(key, groups)])
    parts += [("ps", data.get("ps")), ("racks", data.get("racks"))]
    for name, part in parts:
        if isinstance(part, dict):
            for key in ("bandwidth", "uplink", "downlink"):
                if part.get(key) is not None:
                    check("bandwidth", part[key], f"{source}: {name}.{key}", parse_link_rate)


def make_strategy(
    arch: str = "ps",
    sync: str = "bsp",
    staleness: int | None = None,
    sharding: str = "round_robin",
    overlap: bool = True,
    bucket_size: str | float | None = None,
    allreduce: str = "ring",
    local_aggregation: bool = False,
    step_barrier: bool = False,
) -> Strategy:
    """A Strategy with one-line errors for incoherent combinations.

    Options that do not apply to the architecture (a staleness bound without SSP, an
    all-reduce algorithm for a PS, local aggregation for all-reduce) are dropped;
    :func:`ignored_flags` says so in the notes.
    """
    data: dict[str, Any] = {
        "arch": arch, "sync": sync, "sharding": sharding, "overlap": overlap,
        "allreduce": allreduce if arch == "allreduce" else "ring",
        "local_aggregation": local_aggregation and arch == "ps",
        "step_barrier": step_barrier and arch == "ps"}
    if staleness is not None and sync == "ssp":
        data["staleness"] = staleness
    if bucket_size is not None:
        warn_if_implausible("size", parse_size(bucket_size, "--bucket-size"), bucket_size,
                            "--bucket-size")
        data["bucket_bytes"] = bucket_size
    from ddlperf.schema import validate

    try:
        return validate(Strategy, data, prefix="strategy")
    except InputError as exc:
        raise _as_flag(exc, "strategy") from None


# ``timeline``: a TrackLog the simulator fills (for explain and the HTML report)
SIMULATE_OPTIONS = ("iterations", "warmup", "seed", "replications", "jitter", "trace",
                    "timeline", "jobs")


def ignored_flags(arch: str, sync: str, method: str | None = None,
                  **given: Any) -> list[str]:
    """A note for each given flag that has no effect on this scenario (never an error).

    ``given`` holds flag values (``None`` = not given): ``placement``, ``sharding``,
    ``bucket_size``, ``staleness``, ``allreduce``, ``local_aggregation``, ``step_barrier`` and
    the simulate options.
    """
    def flag(name: str) -> str:
        return "--" + name.replace("_", "-")

    notes = []
    if arch == "allreduce":
        notes += [f"{flag(k)} does not apply to all-reduce (no parameter servers): ignored"
                  for k in ("placement", "sharding") if given.get(k) is not None]
        if given.get("local_aggregation"):
            notes.append("--local-aggregation applies to --arch ps only (all-reduce: see "
                         "--allreduce hierarchical): ignored")
        if given.get("step_barrier"):
            notes.append("--step-barrier applies to --arch ps only: ignored")
    else:
        notes += [f"{flag(k)} applies to --arch allreduce only: ignored"
                  for k in ("bucket_size", "allreduce")
                  if given.get(k) is not None and given.get(k) != "ring"]
    if given.get("staleness") is not None and sync != "ssp":
        notes.append("--staleness applies to --sync ssp only: ignored")
    if method is not None and method != "simulate":
        notes += [f"{flag(k)} applies to --method simulate only: ignored"
                  for k in SIMULATE_OPTIONS if given.get(k) is not None]
    return notes


def scenario(
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
    arch: str | None = None,
    sync: str | None = None,
    staleness: int | None = None,
    sharding: str | None = None,
    overlap: bool | None = None,
    bucket_size: str | float | None = None,
    bandwidth: str | float | None = None,
    latency: str | float | None = None,
    goodput: float | None = None,
    gpus_per_node: int | None = None,
    intra: str | float | None = None,
    nics: int | None = None,
    rack_size: int | None = None,
    rack_uplink: str | float | None = None,
    allreduce: str | None = None,
    local_aggregation: bool | None = None,
    step_barrier: bool | None = None,
    transport: str | None = None,
    dtype: str | None = None,
    math: str | None = None,
    grad_dtype: str | None = None,
    accumulation: int | None = None,
) -> Scenario:
    """The resolved scenario :func:`predict` predicts (for tools that look inside it:
    ``explain``, ``plan``). Same keywords as :func:`predict` without the method options."""
    the_workload = make_workload(model, workload, batch_size, device, dtype, math, grad_dtype,
                                 accumulation)
    if strategy is None:
        strategy = make_strategy(arch or "ps", sync or "bsp", staleness,
                                 sharding or "round_robin", True if overlap is None else overlap,
                                 bucket_size, allreduce or "ring", bool(local_aggregation),
                                 bool(step_barrier))
    the_cluster = make_cluster(cluster, workers, ps, bandwidth, latency, goodput, placement,
                               strategy.arch, gpus_per_node=gpus_per_node, intra=intra,
                               nics=nics, rack_size=rack_size, rack_uplink=rack_uplink,
                               transport=transport,
                               **worker_defaults(workload, batch_size, device))
    return resolve(the_workload, the_cluster, strategy)


def reject_unknown_keywords(function: str, given: Any, extra: tuple[str, ...] = ()) -> None:
    """A keyword that is not :func:`scenario`'s (nor one of ``extra``) is a TypeError naming
    the nearest known one — not a silently ignored misspelling that leaves the default."""
    known = [*inspect.signature(scenario).parameters, *extra]
    unknown = sorted(set(given) - set(known))
    if unknown:
        import difflib

        close = (["cluster"] if unknown[0] == "config"  # the CLI's name for it
                 else difflib.get_close_matches(unknown[0], known))
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r}{hint}")


def predict(model: str | None = None, *, method: str = "analytic", **kwargs: Any) -> Prediction:
    """Predict one scenario. With no arguments: the built-in default (resnet50, 8×V100, 2 PS).

    Takes :func:`scenario`'s keywords; ``None`` means the default (``arch='ps'``,
    ``sync='bsp'``, ``sharding='round_robin'``, ``overlap=True``, …). The simulate options
    (``iterations``, ``warmup``, ``seed``, ``replications``, ``jitter``, ``trace``,
    ``timeline``, ``jobs``) apply to ``method="simulate"``; given with the analytic method,
    they (like any flag that has no effect) become a note.
    """
    if method not in METHODS:
        raise InputError("--method", f"unknown method {method!r}", f"use one of {METHODS}")
    reject_unknown_keywords("predict", kwargs, SIMULATE_OPTIONS)
    simulate_options = {k: kwargs.pop(k) for k in SIMULATE_OPTIONS if k in kwargs}
    sc = scenario(model, **kwargs)
    notes = ignored_flags(sc.strategy.arch, sc.strategy.sync, method,
                          **{k: kwargs.get(k) for k in ("placement", "sharding", "bucket_size",
                                                         "staleness", "allreduce",
                                                         "local_aggregation",
                                                         "step_barrier")},
                          **simulate_options)
    if method == "simulate":
        from ddlperf.predictors.simulate import predict_simulate

        prediction = predict_simulate(sc, **simulate_options)
    else:
        from ddlperf.predictors.analytic import predict_analytic

        prediction = predict_analytic(sc)
    if sc.memory:
        prediction.inputs["memory"] = sc.memory
    prediction.notes.extend(notes)
    from ddlperf.predictors.arrangement import lockstep_figure, lockstep_note, lockstep_of
    from ddlperf.result_keys import LOCKSTEP_KEY

    lockstep = lockstep_figure(sc, prediction)
    if lockstep is not None:
        prediction.arrangement = {
            LOCKSTEP_KEY: lockstep,
            "lockstep_above_pct": 100 * (lockstep / prediction.iteration_time_s - 1),
            "lockstep_of": lockstep_of(sc)}
        note = lockstep_note(sc, prediction, lockstep)
        if note:
            prediction.notes.append(note)
    return prediction


def _predict_signature() -> inspect.Signature:
    """predict(model, *, method, <scenario's keywords>, <simulate options>) for help()."""
    model, *rest = inspect.signature(scenario).parameters.values()
    method = inspect.Parameter("method", inspect.Parameter.KEYWORD_ONLY, default="analytic",
                               annotation="str")
    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None)
             for name in SIMULATE_OPTIONS]
    return inspect.Signature([model, method, *rest, *extra], return_annotation="Prediction")


predict.__signature__ = _predict_signature()  # type: ignore[attr-defined]

