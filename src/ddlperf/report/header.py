"""The lines above a result table: what was predicted or measured, from the resolved inputs.

Everything here is read from the Prediction itself (its workers and ``inputs``), never from
the flags, so a mixed cluster, a rescaled workload file or a measurement is described as it
was actually modelled or run.
"""

from __future__ import annotations

from typing import Any

from ddlperf.prediction import Prediction
from ddlperf.units import format_bandwidth, format_duration, format_size


def worker_groups(p: Prediction) -> list[tuple[str, int, str | None, int]]:
    """(group, count, device, batch) runs of consecutive identical workers, in order."""
    runs: list[tuple[str, int, str | None, int]] = []
    for w in p.workers:
        if runs and runs[-1][0] == w.group and runs[-1][2:] == (w.device, w.batch_size):
            group, count, device, batch = runs[-1]
            runs[-1] = (group, count + 1, device, batch)
        else:
            runs.append((w.group, 1, w.device, w.batch_size))
    return runs


def _workers_text(runs: list[tuple[str, int, str | None, int]]) -> str:
    batches = {batch for *_rest, batch in runs}
    if len(runs) == 1 or (len(batches) == 1 and len({d for _g, _c, d, _b in runs}) == 1):
        count = sum(c for _g, c, _d, _b in runs)
        device = runs[0][2] or "?"
        return f"{count} × {device} · batch {runs[0][3]}/worker"
    return " + ".join(f"{count} × {device or '?'} (batch {batch})"
                      for _g, count, device, batch in runs)


def servers_text(cluster: dict[str, Any]) -> str | None:
    """``on 4 servers × 8 GPUs (150GB/s intra, 2 NICs), racks of 2 (100Gbps uplink)``, or
    None for one-GPU hosts (``workers:``)."""
    if "nodes" not in cluster:
        return None
    shapes = []
    for g in cluster["nodes"]:
        extra = []
        if g.get("gpus", 1) > 1 and g.get("intra"):
            extra.append(f"{format_size(g['intra'] / 8)}/s intra")
        if g.get("nics", 1) > 1:
            extra.append(f"{g['nics']} NICs")
        shape = f"{g.get('count', 1)} servers × {g.get('gpus', 1)} GPUs"
        shapes.append(shape + (f" ({', '.join(extra)})" if extra else ""))
    text = "on " + " + ".join(shapes)
    racks = cluster.get("racks")
    if racks:
        text += f", racks of {racks['servers']} ({format_bandwidth(racks['uplink'])} uplink)"
    return text


def _rates(cluster: dict[str, Any]) -> list[float]:
    """Every configured line rate (worker groups, servers, PS), bits/s."""
    top = cluster.get("bandwidth", 0.0)
    rates = []
    for part in [*cluster.get("workers", []), *cluster.get("nodes", []),
                 cluster.get("ps", {})]:
        if part is cluster.get("ps") and not part.get("count"):
            continue
        both = part.get("bandwidth", top)
        rates += [part.get("uplink", both), part.get("downlink", both)]
    return rates or [top]


def _links_text(cluster: dict[str, Any]) -> str:
    rates = _rates(cluster)
    low, high = min(rates), max(rates)
    if low == high:
        return f"{format_bandwidth(low)} links"
    return f"links {format_bandwidth(low)}–{format_bandwidth(high)}"


def _strategy_text(p: Prediction) -> str:
    s = p.inputs.get("strategy", {})
    c = p.inputs.get("cluster", {})
    ps = c.get("ps", {})
    if s.get("arch") == "allreduce":
        parts = [f"{s.get('allreduce', 'ring')} all-reduce"]
    else:
        parts = [f"PS ×{ps.get('count', 0)} {ps.get('placement', 'dedicated')}"
                 + (" (local aggregation)" if s.get("local_aggregation") else "")]
    sync = s.get("sync", "bsp")
    parts.append(f"SSP s={s.get('staleness')}" if sync == "ssp" else sync.upper())
    if s.get("step_barrier"):
        parts.append("step barrier")
    parts.append(f"overlap {'on' if s.get('overlap', True) else 'off'}")
    return " · ".join(parts)


def _transport_text(cluster: dict[str, Any]) -> str:
    """`` · grpc-tf1`` (the notes say its cap), `` · cap 200MB/s`` for a cap of
    one's own; nothing for the default (plain TCP)."""
    from ddlperf.transport import CUSTOM_NAME

    t = cluster.get("transport")
    if not t:
        return ""
    if t.get("name") == CUSTOM_NAME and t.get("cap"):
        return f" · cap {format_size(t['cap'] / 8)}/s"
    return f" · {t.get('name')}"


def rescale_line(p: Prediction) -> str | None:
    """Say when the workers' device or batch differs from the workload's own (times rescaled)."""
    w = p.inputs.get("workload", {})
    ref_device, ref_batch = w.get("device"), w.get("batch_size")
    changed = [(device, batch) for _g, _c, device, batch in worker_groups(p)
               if (device is not None and device != ref_device) or batch != ref_batch]
    if not changed:
        return None
    targets = ", ".join(dict.fromkeys(f"{device or ref_device} batch {batch}"
                                      for device, batch in changed))
    return (f"times rescaled from the workload's own {ref_device or 'unnamed device'} "
            f"batch {ref_batch} to {targets}")


def _measurement_lines(p: Prediction) -> list[str]:
    info = p.inputs.get("measure", {})
    c = p.inputs.get("cluster", {})
    w = p.inputs.get("workload", {})
    runs = [(g, count, device_only(device), batch)
            for g, count, device, batch in worker_groups(p)]
    compute = f"compute: {info.get('compute', '?')}"
    if info.get("launcher") == "torchrun":
        where = [f"real hosts (torchrun) · {compute}",
                 "links as configured (real NICs) · latency: the real network's"]
    else:
        where = [f"emulated cluster on this machine (HTB-shaped links) · {compute}",
                 "latency not emulated (no netem on this kernel)"]
    return [f"measured: {w.get('name')} ({format_size(w.get('parameter_bytes', 0))} "
            f"parameters) · {_workers_text(runs)}",
            f"{_strategy_text(p)} · {_links_text(c)}", *where]


def device_only(device: str | None) -> str:
    """``V100 (emulated device time)`` → ``V100``: the header says what is emulated once."""
    return (device or "?").split(" (")[0]


def scenario_lines(p: Prediction) -> list[str]:
    """Two or three short lines (they read well at 80 columns) describing the scenario."""
    if p.kind == "measurement":
        return _measurement_lines(p)
    w = p.inputs.get("workload", {})
    c = p.inputs.get("cluster", {})
    lines = [
        f"{w.get('name')} ({format_size(w.get('parameter_bytes', 0))} parameters) · "
        f"{_workers_text(worker_groups(p))}",
        f"{_strategy_text(p)} · {_links_text(c)} · latency "
        f"{format_duration(c.get('latency', 0))}{_transport_text(c)}",
    ]
    servers = servers_text(c)
    if servers:
        lines.insert(1, servers)
    rescaled = rescale_line(p)
    if rescaled:
        lines.append(rescaled)
    return lines


def speedup_text(speedup: float) -> str:
    """Two decimals, or two significant digits below 0.01× (never a bare ``0.00×``)."""
    if speedup >= 0.01 or speedup == 0:
        return f"{speedup:.2f}×"
    return f"{speedup:.2g}×"


def speedup_note(p: Prediction) -> str | None:
    """Why a speedup is below 1 (the cluster is slower than one worker alone)."""
    if p.speedup >= 1:
        return None
    single = p.single_worker
    comm = p.breakdown_s.get("communication", 0.0) + p.breakdown_s.get("wait", 0.0)
    compute = p.breakdown_s.get("compute", 0.0)
    return (f"speedup {speedup_text(p.speedup)} < 1: the cluster is slower than "
            f"{single.get('worker')} alone on {device_only(single.get('device'))} "
            f"({single.get('throughput_samples_per_s', 0):,.1f} samples/s), because each "
            f"iteration spends {format_duration(comm)} communicating or waiting against "
            f"{format_duration(compute)} of compute")
