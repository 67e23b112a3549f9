"""The cluster a prediction is given: per-worker speeds (CPU quotas), the calibrated PS
update cost, or every link at its probed rate."""

from __future__ import annotations

from typing import Any

from ddlperf.cluster import Cluster


def with_worker_overrides(cluster: Cluster, overrides: dict[int, dict[str, Any]],
                          **top: Any) -> Cluster:
    """The cluster with per-worker changes (``{index: {"speed": …, "uplink": …}}``): groups
    that hold a changed worker are split into single workers, in order; ``speed`` multiplies
    the group's, ``cpu_cap``/``comm_cpu_s_per_byte`` and link rates replace its; ``top``
    replaces top-level keys (e.g. ``goodput``, ``ps``)."""

    def worker(group: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
        single = _changed(group, change)
        for key in ("uplink", "downlink"):
            if key in change:
                single.pop("bandwidth", None)
                single[key] = change[key]
        return single

    data = cluster.to_dict()
    data["workers"] = _split(data["workers"], overrides, worker)
    data.update(top)
    return Cluster.from_dict(data)


def with_server_overrides(cluster: Cluster, overrides: dict[int, dict[str, Any]]) -> Cluster:
    """A ``nodes:`` cluster with per-server changes (``{server index: {"speed": …}}``), as
    :func:`with_worker_overrides` does for workers: groups holding a changed server are
    split into single servers; ``speed`` multiplies, the CPU fields replace."""
    data = cluster.to_dict()
    data["nodes"] = _split(data["nodes"], overrides, _changed)
    return Cluster.from_dict(data)


def _split(groups: list[dict[str, Any]], overrides: dict[int, dict[str, Any]],
           member: Any) -> list[dict[str, Any]]:
    """Groups that hold a changed member split into single members (``member(group,
    change)``), in order; the others as they are."""
    out: list[dict[str, Any]] = []
    first = 0
    for group in groups:
        indices = range(first, first + int(group.get("count", 1)))
        first += len(indices)
        if any(i in overrides for i in indices):
            out += [member(group, overrides.get(i, {})) for i in indices]
        else:
            out.append(group)
    return out


def _changed(group: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """One member of ``group`` with ``change``: ``speed`` multiplies, CPU fields replace."""
    single = {**group, "count": 1}
    if "speed" in change:
        single["speed"] = float(group.get("speed", 1.0)) * float(change["speed"])
    for key in ("cpu_cap", "comm_cpu_s_per_byte", "intra_cpu_s_per_byte"):
        if key in change:
            single[key] = float(change[key])
    return single


def with_quotas(cluster: Cluster, speeds: dict[str, dict[str, Any]], per_byte: float,
                intra_per_byte: float | None = None) -> Cluster:
    """The quota'd workers (``w1``; on servers every GPU of the server, ``node0/gpu1``) with
    their timed ``speed``, the quota as ``cpu_cap`` and the CPU each byte they move costs
    (:mod:`ddlperf.host_cpu`): ``per_byte`` over the NIC and, on an emulated server whose
    fabric is TCP over its loopback, ``intra_per_byte`` over that (docs/validation.md)."""
    if not cluster.nodes:
        return with_worker_overrides(cluster, {
            int(name[1:]): {"speed": s["speed"], "cpu_cap": s["quota"],
                            "comm_cpu_s_per_byte": per_byte} for name, s in speeds.items()})
    by_server: dict[int, dict[str, Any]] = {}
    for name, s in speeds.items():
        server = int(name.split("/")[0].removeprefix("node"))
        by_server[server] = {"speed": s["speed"], "cpu_cap": s["quota"],
                             "comm_cpu_s_per_byte": per_byte}
        if intra_per_byte is not None:
            by_server[server]["intra_cpu_s_per_byte"] = intra_per_byte
    return with_server_overrides(cluster, by_server)


def with_ps_update(cluster: Cluster, seconds_per_byte: float) -> Cluster:
    data = cluster.to_dict()
    data["ps"] = {**data.get("ps", {}), "update_s_per_byte": seconds_per_byte}
    return Cluster.from_dict(data)


def probed_cluster(cluster: Cluster, probe: dict[str, dict[str, Any]]) -> Cluster:
    """Every link at its own probed payload rate (goodput 1.0): per worker, and the slowest
    direction over the PS shards (one PS group). A link the probe could not measure as its
    own (:func:`~ddlperf.measure.probe.own_rate_bps`) keeps its configured rate × goodput."""
    from ddlperf.measure.probe import own_rate_bps

    def rate(host: str, direction: str, configured: float) -> float:
        return own_rate_bps(probe.get(host), direction) or configured * cluster.goodput

    data_ps = cluster.to_dict().get("ps", {})
    shards = sorted(k for k in probe if k.startswith("ps"))
    if shards:
        data_ps = {k: v for k, v in data_ps.items() if k != "bandwidth"}
        data_ps["uplink"] = min(rate(k, "uplink", cluster.ps_up()) for k in shards)
        data_ps["downlink"] = min(rate(k, "downlink", cluster.ps_down()) for k in shards)
    if cluster.nodes:
        return _probed_servers(cluster, rate, data_ps)
    overrides = {
        i: {"uplink": rate(f"w{i}", "uplink", cluster.worker_up(g)),
            "downlink": rate(f"w{i}", "downlink", cluster.worker_down(g))}
        for i, g in enumerate(_worker_groups(cluster))}
    return with_worker_overrides(cluster, overrides, goodput=1.0, ps=data_ps)


def _probed_servers(cluster: Cluster, rate: Any, data_ps: dict[str, Any]) -> Cluster:
    """A ``nodes:`` cluster with each server's NICs at their probed rate (the emulated eth0
    carries all ``nics``; each NIC gets its share) and rack links at configured × goodput
    (not probed); fabric rates are data rates and stay as they are."""
    data = cluster.to_dict()
    groups: list[dict[str, Any]] = []
    server = 0
    for group, source in zip(data["nodes"], cluster.nodes, strict=True):
        for _ in range(int(group.get("count", 1))):
            nics = source.nics
            single = {k: v for k, v in group.items() if k != "bandwidth"}
            single["count"] = 1
            for direction, configured in (("uplink", cluster.worker_up(source)),
                                          ("downlink", cluster.worker_down(source))):
                single[direction] = rate(f"node{server}", direction, nics * configured) / nics
            groups.append(single)
            server += 1
    data["nodes"] = groups
    if cluster.racks is not None:
        data["racks"] = {"servers": cluster.racks.servers,
                         "uplink": cluster.racks.uplink * cluster.goodput,
                         "downlink": cluster.racks.down * cluster.goodput}
    data.update(goodput=1.0, ps=data_ps)
    return Cluster.from_dict(data)


def worker_up_bps(cluster: Cluster, index: int) -> float:
    """Worker ``index``'s sending line rate (bits/s) in a ``workers:`` cluster."""
    return cluster.worker_up(_worker_groups(cluster)[index])


def quota_server(plan: Any) -> Any:
    """The node group of the first quota'd GPU rank (None on a ``workers:`` cluster)."""
    if not plan.cluster.nodes:
        return None
    server = int(sorted(plan.cpu_quota)[0].split("/")[0].removeprefix("node"))
    return [g for g in plan.cluster.nodes for _ in range(g.count)][server]


def quota_nic_bps(plan: Any) -> float:
    """The sending line rate of the first quota'd worker's NIC (bits/s): what the
    communication-CPU calibration runs at."""
    first = sorted(plan.cpu_quota)[0]
    if not plan.cluster.nodes:
        return worker_up_bps(plan.cluster, int(first[1:]))
    return plan.cluster.worker_up(quota_server(plan))


def _worker_groups(cluster: Cluster) -> list[Any]:
    return [g for g in cluster.workers for _ in range(g.count)]
