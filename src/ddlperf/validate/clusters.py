"""The cluster a prediction is given: per-worker speeds (CPU quotas), the calibrated PS
update cost, or every link at its probed rate."""

from __future__ import annotations

from typing import Any

from ddlperf.cluster import Cluster


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
