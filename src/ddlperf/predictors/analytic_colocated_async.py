"""The ASP/SSP queueing network where shards share their hosts' NICs (colocated PS).

A colocated shard's host NIC is one link with two roles: it carries the shard's traffic with
the other workers (their pushes in on its downlink, their pulls out on its uplink) and its
own worker's traffic with the other shards (its pushes out, its pulls in). The earlier view
(a host worker's rate scaled down as if the roles followed each other every iteration) made
the busiest host the slowest worker; the simulator's fluid network has it the fastest where
most of its own bytes stay local (fresh9-ssp-coloc-3s under ASP: the host of the biggest
shard at 0.36 s simulated, the others 0.84 s). So here each link is a station of its own,
visited by every worker whose bytes cross it:

- a host's downlink and uplink (one per host): the other workers' pushes to and pulls from
  its shard, and its own worker's pulls from and pushes to the other shards;
- a dedicated shard's downlink and uplink, as in the dedicated model;
- each other worker's own uplink and downlink (a station per worker, met only by it:
  ``copies`` = its group's count), which all its remote bytes cross;
- each shard's update, and with a receive cap each shard process's intake.

A push crosses its stations at once (one transfer, as long as the longest residence); so does
a pull, and with overlap the push, update and pull are one pipelined transfer (as in the
dedicated model, where the part is the busiest shard's). Because a host's downlink carries
the others' pushes and its own pulls, transfers are labelled per station and worker class
(:func:`~ddlperf.predictors.queueing.mva`), and a customer then counts in a station's queue
only for its own residence there: a flow held back at another link takes only its bytes'
worth of this one, as under max-min sharing. One-GPU hosts only (``colocated_view``);
docs/models.md has the figures against the simulator.
"""

from __future__ import annotations

import numpy as np

from ddlperf.scenario import GroupPlan, Scenario, ShardPlan

PUSH, PULL, UPDATE = 0, 1, 2


def shares_host_nics(sc: Scenario) -> bool:
    """Whether this network applies: some shard on a one-GPU host (servers of several GPUs
    keep the dedicated model's view of their NICs)."""
    return any(s.host is not None for s in sc.shards) and all(g.gpus == 1 for g in sc.groups)


def host_workers(shard: ShardPlan, group: GroupPlan) -> int:
    """How many of ``group``'s workers talk to ``shard`` without the network (its host's)."""
    if shard.host is not None and group.first <= shard.host < group.first + group.count:
        return shard.host_gpus
    return 0


def remote_share(shard: ShardPlan, group: GroupPlan) -> float:
    """The share of ``group``'s workers whose traffic with ``shard`` crosses the network."""
    return 1.0 - host_workers(shard, group) / group.count


def colocated_stations(sc: Scenario) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray,
                                               np.ndarray]:
    """Demands (S, C), station names, floors (S, C), copies (S,) and transfer labels (S, C).

    A floor is the visit at the sender's own rate (a flow into a faster link is capped by its
    sender's): a link serves several such flows at full speed before any slows."""
    shard_bytes = sc.placement.sum(axis=0)
    groups = sc.groups
    classes = len(groups)
    remote = np.array([[remote_share(s, g) for g in groups] for s in sc.shards])  # (K, C)
    moved = remote.T @ shard_bytes  # each class's bytes over the network, each way (C,)
    ups = np.array([g.up for g in groups])
    downs = np.array([min(g.down, sc.receive_cap) for g in groups])
    none = np.zeros(classes)
    rows: list[tuple[str, np.ndarray, np.ndarray, int, np.ndarray]] = []

    def add(name: str, demand: np.ndarray, floor: np.ndarray, label: np.ndarray,
            copies: int = 1) -> None:
        rows.append((name, demand, floor, copies, label))

    host_class: dict[int, int] = {}  # host worker -> its class (a group of one)
    for shard in sc.shards:
        if shard.host is not None:
            host_class.setdefault(shard.host, next(
                c for c, g in enumerate(groups) if g.first <= shard.host < g.first + g.count))
    for host, c_host in host_class.items():
        on_host = [k for k, s in enumerate(sc.shards) if s.host == host]
        first = sc.shards[on_host[0]]
        served = remote[on_host].T @ shard_bytes[on_host]  # (C,): 0 for the host itself
        own = np.arange(classes) == c_host
        name = groups[c_host].worker_name(host - groups[c_host].first)
        add(f"{name} downlink", np.where(own, moved, served) / first.down,
            np.where(own, 0.0, served / ups), np.where(own, PULL, PUSH))
        add(f"{name} uplink", np.where(own, moved, served) / first.up,
            np.where(own, 0.0, served / downs), np.where(own, PUSH, PULL))
    for k, shard in enumerate(sc.shards):
        if shard.host is None:
            part = remote[k] * shard_bytes[k]
            add(f"{shard.name} downlink", part / shard.down, part / ups,
                np.full(classes, PUSH))
            add(f"{shard.name} uplink", part / shard.up, part / downs, np.full(classes, PULL))
        add(f"{shard.name} update",
            np.full(classes, shard_bytes[k] * shard.update_s_per_byte), none,
            np.full(classes, UPDATE))
        if sc.receive_capped:  # the shard process takes in every push, at most the cap
            add(f"{shard.name} receive", remote[k] * shard_bytes[k] / sc.receive_cap, none,
                np.full(classes, PUSH))
    for c, g in enumerate(groups):
        if any(hc == c for hc in host_class.values()):
            continue  # its own links are its host's, above
        mine = (np.arange(classes) == c) * moved[c]
        add(f"{g.name} uplink", mine / g.up, none, np.full(classes, PUSH), g.count)
        add(f"{g.name} downlink", mine / downs[c], none, np.full(classes, PULL), g.count)
    names = [r[0] for r in rows]
    demand = np.array([r[1] for r in rows])
    floor = np.array([r[2] for r in rows])
    copies = np.array([r[3] for r in rows], dtype=float)
    labels = np.array([r[4] for r in rows])
    if sc.strategy.overlap:  # push, update and pull pipelined: one transfer
        labels = np.zeros_like(labels)
    return demand, names, floor, copies, labels
