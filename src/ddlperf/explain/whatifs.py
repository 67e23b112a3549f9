"""What-ifs: small changes to a scenario, each re-predicted with the same method and options.

A what-if is a change to the keyword arguments of :func:`ddlperf.api.predict` — the same
call with ``ps`` one higher, or with ``cluster`` set to the resolved cluster with one link
twice as fast — so its number is, by construction, what a direct ``predict`` of the changed
scenario returns (a test checks it). Changes that alter the training algorithm itself (ASP or
SSP instead of BSP, and back) are marked: they change convergence, not only speed, so their
gain in samples/s is not a gain in time to accuracy.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ddlperf.errors import InputError
from ddlperf.prediction import Prediction
from ddlperf.scenario import Scenario
from ddlperf.units import format_bandwidth, format_size

# The SSP bound proposed instead of BSP: the smallest staleness Ho et al. (2013) evaluated.
SSP_STALENESS = 3
# Keyword arguments of predict() that make_cluster() reads: replaced by an explicit cluster.
CLUSTER_FLAGS = ("workers", "ps", "bandwidth", "latency", "goodput", "placement",
                 "gpus_per_node", "intra", "nics", "rack_size", "rack_uplink", "transport")


@dataclass
class WhatIf:
    """One changed scenario and its prediction (``error``: why it could not be predicted)."""

    key: str
    title: str
    change: dict[str, Any]  # predict() keywords that differ from the base call
    how: str  # the same change on the command line or in the cluster file
    changes_convergence: bool = False
    iteration_time_s: float | None = None
    throughput_samples_per_s: float | None = None
    bottleneck: str | None = None
    gain: float | None = None  # throughput / base throughput − 1
    error: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict, repr=False)  # the full call

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key, "title": self.title, "change": _jsonable(self.change),
            "how": self.how, "changes_convergence": self.changes_convergence,
            "iteration_time_s": self.iteration_time_s,
            "throughput_samples_per_s": self.throughput_samples_per_s,
            "bottleneck": self.bottleneck, "gain": self.gain, "error": self.error,
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def candidates(sc: Scenario, base: Prediction, kwargs: dict[str, Any]) -> list[WhatIf]:
    """The what-ifs that apply to this scenario (not yet predicted)."""
    out: list[WhatIf] = []
    strategy = sc.strategy
    ps = strategy.arch == "ps"
    cluster = sc.cluster

    def add(key: str, title: str, change: dict[str, Any], how: str,
            convergence: bool = False) -> None:
        out.append(WhatIf(key, title, change, how, convergence,
                          kwargs={**kwargs, **change}))

    if ps:
        k = cluster.ps.count
        if cluster.ps.placement == "dedicated" or k + 1 <= cluster.server_count:
            add("ps+1", f"one more PS shard ({k} → {k + 1})", {"ps": k + 1}, f"--ps {k + 1}")
        for policy in ("round_robin", "greedy", "even"):
            if policy != strategy.sharding:
                add(f"sharding={policy}", f"{policy} sharding instead of {strategy.sharding}",
                    {"sharding": policy}, f"--sharding {policy}")
    link = _link_to_double(sc, base)
    if link is not None:
        doubled = _double_link(sc, link)
        if doubled is not None:
            title, data, how = doubled
            add("2x-link", title, _with_cluster(data), how)
    if ps:
        add("allreduce", "ring all-reduce instead of the parameter server",
            {"arch": "allreduce", "ps": 0, "sync": "bsp", "staleness": None,
             "sharding": "round_robin", "placement": None, "local_aggregation": False,
             "step_barrier": False},
            "--arch allreduce")
    else:
        servers = cluster.server_count
        add("ps-colocated", f"a parameter server instead: {servers} shards, one on each server "
            "(BSP, same machines)",
            {"arch": "ps", "ps": servers, "placement": "colocated", "allreduce": "ring",
             "bucket_size": None},
            f"--arch ps --ps {servers} --placement colocated")
    if sc.multi_gpu:
        if not ps:
            other = "ring" if strategy.allreduce == "hierarchical" else "hierarchical"
            add(f"allreduce={other}", f"{other} all-reduce instead of {strategy.allreduce}",
                {"allreduce": other}, f"--allreduce {other}")
        elif strategy.effective_sync == "bsp":
            on = not strategy.local_aggregation
            add("local-aggregation", ("local aggregation: sum each server's gradients, push "
                                      "once" if on else "no local aggregation"),
                {"local_aggregation": on},
                "--local-aggregation" if on else "--no-local-aggregation")
    if not ps:
        size = strategy.bucket_bytes
        for factor, word in ((2.0, "larger"), (0.5, "smaller")):
            add(f"bucket×{factor:g}", f"{word} buckets ({format_size(size)} → "
                f"{format_size(size * factor)})", {"bucket_size": size * factor},
                f"--bucket-size {format_size(size * factor).replace(' ', '')}")
    on = not strategy.overlap
    add("overlap", f"overlap {'on' if on else 'off'}", {"overlap": on},
        "--overlap" if on else "--no-overlap")
    grad = str(sc.workload.provenance.get("grad_dtype", "")).lower()
    if kwargs.get("workload") is None and grad in ("fp32", "float32", "tf32"):
        add("fp16-gradients", "fp16 gradients (half the bytes on every link)",
            {"grad_dtype": "fp16"}, "--grad-dtype fp16")
    for change in _slowest_worker_changes(sc, base):
        add(*change)
    if ps:
        if strategy.effective_sync == "bsp":
            add("asp", "ASP instead of BSP", {"sync": "asp", "staleness": None,
                                              "local_aggregation": False,
                                              "step_barrier": False},
                "--sync asp", convergence=True)
            add("ssp", f"SSP (s={SSP_STALENESS}) instead of BSP",
                {"sync": "ssp", "staleness": SSP_STALENESS, "local_aggregation": False,
                 "step_barrier": False},
                f"--sync ssp --staleness {SSP_STALENESS}", convergence=True)
        else:
            add("bsp", f"BSP instead of {strategy.sync.upper()}",
                {"sync": "bsp", "staleness": None}, "--sync bsp", convergence=True)
    return out


def evaluate(what_ifs: list[WhatIf], base: Prediction,
             predict: Callable[..., Prediction]) -> list[WhatIf]:
    """Predict each what-if with ``predict(**kwargs)``; sorted by gain, failures last."""
    for w in what_ifs:
        try:
            p = predict(**w.kwargs)
        except InputError as exc:
            w.error = str(exc)
            continue
        w.iteration_time_s = p.iteration_time_s
        w.throughput_samples_per_s = p.throughput_samples_per_s
        w.bottleneck = p.bottleneck
        w.gain = p.throughput_samples_per_s / base.throughput_samples_per_s - 1.0
    return sorted(what_ifs, key=lambda w: (w.gain is None, -(w.gain or 0.0)))


# ---------------------------------------------------------------- changes to the cluster


def _with_cluster(data: dict[str, Any]) -> dict[str, Any]:
    """Predict with this cluster mapping instead of the flags that built the original."""
    return {"cluster": data, **dict.fromkeys(CLUSTER_FLAGS)}


def _link_to_double(sc: Scenario, p: Prediction) -> str | None:
    """The bottleneck if it is a link, else the busiest link (None: no link reported)."""
    links = [r for r in p.resources if not r.name.endswith(" update")]
    if not links:
        return None
    if any(r.name == p.bottleneck for r in links):
        return p.bottleneck
    return max(links, key=lambda r: r.utilization).name


_PS_LINK = re.compile(r"^ps(\d+) (uplink|downlink)$")
_WORKER_LINK = re.compile(r"^w(\d+) (uplink|downlink)$")
_NODE_NIC = re.compile(r"^node(\d+) nic\S* (uplink|downlink)$")
_NODE_INTRA = re.compile(r"^node(\d+) intra$")
_RACK = re.compile(r"^rack\d+ (uplink|downlink)$")


def _double_link(sc: Scenario, name: str) -> tuple[str, dict[str, Any], str] | None:
    """(title, cluster mapping with that link at twice its rate, how) or None if unknown."""
    cluster = sc.cluster
    data = cluster.to_dict()
    inner = re.match(r"^ring \((.*)\)$", name)
    if inner:
        name = inner.group(1)
    if match := _PS_LINK.match(name):
        if cluster.ps.placement == "dedicated":
            up, down = cluster.ps_up(), cluster.ps_down()
            data["ps"] = {**data["ps"], "uplink": 2 * up, "downlink": 2 * down}
            data["ps"].pop("bandwidth", None)
            return (f"2× bandwidth on the PS shards' links ({_rate(up, down)} → "
                    f"{_rate(2 * up, 2 * down)})", data,
                    f"--config with ps: {{uplink: {format_bandwidth(2 * up)}, downlink: "
                    f"{format_bandwidth(2 * down)}}}")
        server = int(match.group(1))  # colocated shard k lives on worker server k
        return _double_group_nic(sc, data, _group_of_server(sc, server))
    if match := _WORKER_LINK.match(name):
        return _double_group_nic(sc, data, sc.group_of(int(match.group(1))).name)
    if match := _NODE_NIC.match(name):
        return _double_group_nic(sc, data, _group_of_server(sc, int(match.group(1))))
    if match := _NODE_INTRA.match(name):
        group = _group_of_server(sc, int(match.group(1)))
        index, entry = _group_entry(data, "nodes", group)
        if entry is None or entry.get("intra") is None:
            return None
        rate = float(entry["intra"])
        data["nodes"][index] = {**entry, "intra": 2 * rate}
        return (f"2× intra-node fabric on {group} servers ({format_bandwidth(rate)} → "
                f"{format_bandwidth(2 * rate)})", data,
                f"--intra {format_bandwidth(2 * rate).replace(' ', '')}")
    transport = cluster.transport
    if name.endswith("connection") and transport is not None \
            and transport.cap_bps is not None:  # the transport's per-connection cap
        cap = transport.cap_bps
        data["transport"] = {**transport.spec(), "cap": 2 * cap}
        how = (f"--transport {format_size(cap / 4)}/s" if transport.receive_bps is None else
               f"transport: {{name: {transport.name}, cap: {format_size(cap / 4)}/s}}")
        return (f"2× the per-connection cap of {transport.name} "
                f"({format_size(cap / 8)}/s → {format_size(cap / 4)}/s)", data, how)
    if name.endswith(" receive") and transport is not None \
            and transport.receive_bps is not None:  # the transport's per-process receive cap
        cap = transport.receive_bps
        data["transport"] = {**transport.spec(), "receive": 2 * cap}
        return (f"2× the per-process receive cap of {transport.name} "
                f"({format_size(cap / 8)}/s → {format_size(cap / 4)}/s)", data,
                f"transport: {{name: {transport.name}, receive: {format_size(cap / 4)}/s}}")
    if _RACK.match(name) and cluster.racks is not None:
        up, down = cluster.racks.uplink, cluster.racks.down
        data["racks"] = {**data["racks"], "uplink": 2 * up, "downlink": 2 * down}
        return (f"2× rack uplinks ({_rate(up, down)} → {_rate(2 * up, 2 * down)})", data,
                f"--rack-uplink {format_bandwidth(2 * up).replace(' ', '')}")
    return None


def _rate(up: float, down: float) -> str:
    if up == down:
        return format_bandwidth(up)
    return f"{format_bandwidth(up)} up / {format_bandwidth(down)} down"


def _group_of_server(sc: Scenario, server: int) -> str:
    group = next(g for g in sc.groups if g.first_server <= server < g.first_server + g.servers)
    return group.name


def _group_entry(data: dict[str, Any], key: str, name: str) -> tuple[int, dict[str, Any] | None]:
    for i, entry in enumerate(data.get(key, [])):
        if entry.get("name", "w" if key == "workers" else "node") == name:
            return i, entry
    return -1, None


def _double_group_nic(sc: Scenario, data: dict[str, Any],
                      group: str) -> tuple[str, dict[str, Any], str] | None:
    key = "nodes" if sc.cluster.nodes else "workers"
    index, entry = _group_entry(data, key, group)
    if entry is None:
        return None
    source = (sc.cluster.nodes or sc.cluster.workers)[index]
    up, down = sc.cluster.worker_up(source), sc.cluster.worker_down(source)
    new = {k: v for k, v in entry.items() if k != "bandwidth"}
    data[key][index] = {**new, "uplink": 2 * up, "downlink": 2 * down}
    what = "NICs" if key == "nodes" else "links"
    several = len(data[key]) > 1
    everyone = "every server" if key == "nodes" else "every worker"
    title = (f"2× bandwidth on the {what} of {'group ' + group if several else everyone}"
             f" ({_rate(up, down)} → {_rate(2 * up, 2 * down)})")
    how = (f"--config with {key}[{index}] uplink/downlink {format_bandwidth(2 * up)}"
           if several else f"--bandwidth {format_bandwidth(2 * up).replace(' ', '')} "
           "(leaving the PS links as they are)")
    return title, data, how


def _slowest_worker_changes(sc: Scenario, p: Prediction) -> list[tuple[str, str, dict, str]]:
    """Drop one worker of the slowest group, or make it one of the fastest group."""
    if len(sc.groups) < 2:
        return []
    slow = max(sc.groups, key=lambda g: g.compute_s)
    fast = min(sc.groups, key=lambda g: g.compute_s)
    if slow.compute_s <= fast.compute_s * (1 + 1e-9):
        return []
    key = "nodes" if sc.cluster.nodes else "workers"
    out: list[tuple[str, str, dict, str]] = []
    data = sc.cluster.to_dict()
    s_index, s_entry = _group_entry(data, key, slow.name)
    f_index, f_entry = _group_entry(data, key, fast.name)
    if s_entry is None or f_entry is None or s_index == f_index:
        return []
    unit = "server" if key == "nodes" and slow.gpus > 1 else "worker"
    worker = slow.worker_name()
    dropped = [dict(e) for e in data[key]]
    if s_entry.get("count", 1) > 1:
        dropped[s_index]["count"] = s_entry["count"] - 1
    else:
        del dropped[s_index]
    if dropped and sc.cluster.ps.placement == "colocated" and sc.cluster.ps.count > sum(
            e.get("count", 1) for e in dropped):
        dropped = []
    if dropped:
        out.append(("drop-slowest", f"without the slowest {unit} ({worker}, group {slow.name})",
                    _with_cluster({**data, key: dropped}),
                    f"--config with {key}[{s_index}] count − 1"))
    replaced = [dict(e) for e in data[key]]
    replaced[f_index]["count"] = f_entry.get("count", 1) + 1
    if s_entry.get("count", 1) > 1:
        replaced[s_index]["count"] = s_entry["count"] - 1
    else:
        del replaced[s_index]
    out.append(("replace-slowest", f"the slowest {unit} ({worker}) replaced by one like "
                f"group {fast.name}", _with_cluster({**data, key: replaced}),
                f"--config with {key}[{s_index}] count − 1, {key}[{f_index}] count + 1"))
    return out
