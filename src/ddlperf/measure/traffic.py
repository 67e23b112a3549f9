"""The payload a run must move: flows between ranks, and what each link carries of them.

Every transfer of an iteration is a :class:`Flow` between two ranks. A flow between ranks of
one host crosses that host's loopback (a server's intra-node fabric: counted per rank class,
:meth:`~ddlperf.measure.emulated.EmulatedCluster.loopback_bytes`); any other flow crosses the
sender host's NIC uplink and the receiver's downlink, and, when the two are in different
racks, the sending rack's uplink and the receiving rack's downlink (dedicated PS hosts sit on
the core switch, outside every rack). Link names are the predictors': ``w3 uplink``, ``node1
nic0 uplink``, ``ps0 downlink``, ``rack0 uplink``, ``node1 intra`` (all the server's ranks
together; per rank ``node1/gpu0 intra``).

What the trainers send (element counts exactly as they slice; the trainers' docstrings say
the protocols):
- PS: each worker pushes its gradient parts to, and pulls the parameter parts from, every
  shard; with local aggregation each GPU first sends every other GPU of its server that GPU's
  slice (reduce-scatter), pushes and pulls only its own slice's pieces, then sends its slice
  to every other GPU (all-gather, after each pull).
- Flat ring all-reduce: rank r sends 2(N−1)/N × S to rank r + 1 (gloo's ring), ranks server
  by server. Hierarchical: reduce-scatter and all-gather inside the server as above, and a
  ring of the servers' GPUs of one local index over their 1/G slice: 2(S−1)/S of it each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ddlperf.measure.trainer_common import (
    aggregation_pieces,
    element_size,
    rank_table,
    slice_bounds,
)


@dataclass(frozen=True)
class Flow:
    """``bytes`` of payload from rank ``src`` to rank ``dst``, on behalf of ``worker``."""

    src: str
    dst: str
    bytes: float
    worker: str


@dataclass(frozen=True)
class Place:
    """Where a rank runs: its host, the name its host's NIC links go by, its rack."""

    host: str
    link: str
    rack: int | None
    ranks_on_host: int


def places(spec: dict[str, Any]) -> dict[str, Place]:
    """Rank name → :class:`Place`."""
    table = rank_table(spec)
    per_host: dict[str, int] = {}
    for entry in table:
        per_host[entry["host"]] = per_host.get(entry["host"], 0) + 1
    by_host: dict[str, tuple[str, int | None]] = {}
    for w in spec["workers"]:
        host = str(w.get("host", w["name"]))
        by_host.setdefault(host, (str(w.get("link", host)), w.get("rack")))
    out = {}
    for entry in table:
        link, rack = by_host.get(entry["host"], (entry["host"], None))
        out[entry["name"]] = Place(entry["host"], link, rack, per_host[entry["host"]])
    return out


def _server_peers(workers: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Host → its workers in local-rank order."""
    hosts: dict[str, list[dict[str, Any]]] = {}
    for w in workers:
        hosts.setdefault(w["host"], []).append(w)
    return hosts


def expected_flows(spec: dict[str, Any], pushes: float = 1.0, pulls: float = 1.0
                   ) -> list[Flow]:
    """The flows of ``pushes`` gradient exchanges (pushes, all-reduces, reduce-scatters) and
    ``pulls`` parameter deliveries (pulls and their all-gathers) per worker."""
    table = rank_table(spec)
    size = element_size(spec["dtype"])
    workers = [e for e in table if e["role"] == "worker"]
    for e in workers:
        info = spec["workers"][e["index"]]
        e["local"], e["gpus"] = int(info.get("local", 0)), int(info.get("gpus", 1))
    flows: list[Flow] = []
    numels = [int(t["numel"]) for t in spec["tensors"]]
    if spec["arch"] == "allreduce":
        return _allreduce_flows(spec, workers, sum(numels), size, pushes)
    shard = {e["index"]: e["name"] for e in table if e["role"] == "ps"}
    aggregate = bool(spec.get("local_aggregation"))
    servers = _server_peers(workers)
    for w in workers:
        name = w["name"]
        peers = [p for p in servers[w["host"]] if p is not w] if aggregate else []
        for j, tensor_parts in enumerate(spec["parts"]):
            if aggregate:
                numel, g, gpus = numels[j], w["local"], w["gpus"]
                lo, hi = slice_bounds(numel, g, gpus)
                for p in peers:
                    a, b = slice_bounds(numel, p["local"], gpus)
                    flows.append(Flow(name, p["name"], pushes * size * (b - a), name))
                    flows.append(Flow(name, p["name"], pulls * size * (hi - lo), p["name"]))
                pieces = aggregation_pieces(tensor_parts, numel, g, gpus)
            else:
                pieces = [tuple(part) for part in tensor_parts]
            for (k, _s, n) in pieces:
                flows.append(Flow(name, shard[k], pushes * size * n, name))
                flows.append(Flow(shard[k], name, pulls * size * n, name))
    return flows


def _allreduce_flows(spec: dict[str, Any], workers: list[dict[str, Any]], numel: int,
                     size: int, pushes: float) -> list[Flow]:
    n = len(workers)
    if n < 2:
        return []
    servers = _server_peers(workers)
    gpus = workers[0]["gpus"]
    if spec.get("allreduce") != "hierarchical" or gpus == 1:
        volume = pushes * 2 * (n - 1) / n * size * numel
        return [Flow(w["name"], workers[(i + 1) % n]["name"], volume, w["name"])
                for i, w in enumerate(workers)]
    flows = []
    hosts = list(servers)
    count = len(hosts)
    for w in workers:
        lo, hi = slice_bounds(numel, w["local"], gpus)
        for p in servers[w["host"]]:
            if p is w:
                continue
            a, b = slice_bounds(numel, p["local"], gpus)
            flows.append(Flow(w["name"], p["name"], pushes * size * (b - a), w["name"]))
            flows.append(Flow(w["name"], p["name"], pushes * size * (hi - lo), w["name"]))
        if count > 1:
            following = servers[hosts[(hosts.index(w["host"]) + 1) % count]][w["local"]]
            volume = pushes * 2 * (count - 1) / count * size * (hi - lo)
            flows.append(Flow(w["name"], following["name"], volume, w["name"]))
    return flows


def link_loads(spec: dict[str, Any], flows: list[Flow]) -> dict[str, dict[str, float]]:
    """Link name → {worker: bytes} (see the module docstring for the names)."""
    where = places(spec)
    loads: dict[str, dict[str, float]] = {}

    def add(link: str, flow: Flow) -> None:
        box = loads.setdefault(link, {})
        box[flow.worker] = box.get(flow.worker, 0.0) + flow.bytes

    for flow in flows:
        src, dst = where[flow.src], where[flow.dst]
        if src.host == dst.host:
            add(f"{src.host} intra", flow)
            add(f"{flow.src} intra", flow)
            continue
        add(f"{src.link} uplink", flow)
        add(f"{dst.link} downlink", flow)
        if src.rack != dst.rack:
            if src.rack is not None:
                add(f"rack{src.rack} uplink", flow)
            if dst.rack is not None:
                add(f"rack{dst.rack} downlink", flow)
    return loads


def host_links(spec: dict[str, Any]) -> dict[str, str]:
    """Host → the name its NIC links go by (``node0 nic0``, ``w3``, ``ps0``)."""
    return {p.host: p.link for p in places(spec).values()}


def rank_payload(spec: dict[str, Any], name: str) -> dict[str, float]:
    """What rank ``name`` sends per iteration: ``sent`` in all, ``remote`` to other hosts
    (through the host's NIC: what its NIC counters must show at least)."""
    where = places(spec)
    sent = remote = 0.0
    for flow in expected_flows(spec):
        if flow.src == name:
            sent += flow.bytes
            if where[flow.dst].host != where[name].host:
                remote += flow.bytes
    return {"sent": sent, "remote": remote}
