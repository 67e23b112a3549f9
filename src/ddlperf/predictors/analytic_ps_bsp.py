"""BSP parameter server in closed form: per-link FIFO pipelines iterated to their period.

One iteration is pull → forward → backward → push → update, each link and each shard's
optimizer a FIFO server (finish_j = max(ready_j, finish_{j−1}) + work_j), except a worker's link
to several dedicated shards: one connection per shard, sharing it
(:func:`~ddlperf.predictors.shared_link.connections_finish`). The slowest worker
and the busiest shard link set the pace; heterogeneous workers and shard imbalance are exact
inputs, overlap (WFBP) is a switch. The asynchronous models reuse its contention-free cycle.
Shards colocated on one-GPU hosts have a model of their own
(:mod:`~ddlperf.predictors.analytic_colocated_bsp`: their NICs carry two roles at once).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddlperf.prediction import ResourceUse
from ddlperf.predictors import analytic_colocated_bsp as colocated
from ddlperf.predictors.assembly import GroupTime
from ddlperf.predictors.connections import (
    capped_rate,
    connection_busy,
    receive_rate,
    stream_s_per_byte,
)
from ddlperf.predictors.server_links import (
    aggregates,
    host_endpoints,
    ps_endpoint_rates,
    ps_endpoints,
    ps_link_busy,
)
from ddlperf.predictors.shard_release import shard_release
from ddlperf.predictors.shared_connections import ConnectionItems, ShiftedRepeats
from ddlperf.predictors.shared_link import connections_finish, shared_link_finish
from ddlperf.predictors.timeline import backward_ready, forward_order, serial_finish
from ddlperf.scenario import GroupPlan, Scenario, ShardPlan

# Passes of the one-iteration map before its period is taken as converged.
MAX_PASSES = 8


def _ps_senders(sc: Scenario) -> np.ndarray:
    """Endpoints (workers, or servers when aggregating) whose traffic to each shard crosses
    the network (a colocated host's do not)."""
    n = sum(ps_endpoints(sc, g) for g in sc.groups)
    return np.array([n - _at_host(sc, s) for s in sc.shards], dtype=float)


def own_link_bytes(sc: Scenario, group: GroupPlan) -> np.ndarray:
    """Each tensor's bytes that cross ``group``'s own link: all of them, but the part on a
    shard in its own process (a one-GPU host alone with a shard among dedicated ones: the
    ASP model's alone cycle), which moves in memory."""
    local = [k for k, shard in enumerate(sc.shards)
             if shard.host is not None and group.gpus == 1 and group.count == 1
             and group.first == shard.host]
    if not local:
        return sc.tensor_bytes
    return sc.tensor_bytes - sc.placement[:, local].sum(axis=1)


def _at_host(sc: Scenario, shard: ShardPlan) -> int:
    if shard.host is None:
        return 0
    return host_endpoints(sc, sc.group_of(shard.host))


@dataclass(frozen=True)
class _PsLayout:
    """Index arrays that depend only on the workload and the placement (cached per sweep)."""

    holds: np.ndarray  # (tensors, shards): shard k holds (part of) tensor j; gradient order
    owner_flat: np.ndarray | None  # whole-tensor placement: flat (J, K) index of the holder
    order: np.ndarray  # tensors in forward order (by owning layer)
    layer_has: np.ndarray  # layers owning at least one tensor
    layer_starts: np.ndarray  # first forward-ordered tensor of each such layer
    shard_rows: tuple[np.ndarray, ...]  # tensors (gradient order) held by each shard
    shard_parts: tuple[np.ndarray, ...]  # their bytes on that shard
    ready_sorted: bool  # gradient order follows reverse layer order (ready times ascend)
    connections: ConnectionItems  # the tensors on each shard's connection


def ready_in_gradient_order(sc: Scenario) -> bool:
    """Gradient order follows reverse layer order, so gradients become ready in that order."""
    return bool(np.all(np.diff(sc.tensor_layer) <= 0))


def ps_layout(sc: Scenario) -> _PsLayout:
    key = ("ps_layout", sc.strategy.sharding, len(sc.shards))
    cache = sc.workload.derived_cache
    if key not in cache:
        holds = sc.placement > 0
        owner_flat = None
        if np.all(holds.sum(axis=1) == 1):
            owner_flat = np.arange(len(holds)) * holds.shape[1] + np.argmax(holds, axis=1)
        order = forward_order(sc)
        layers_fwd = sc.tensor_layer[order]
        starts = np.flatnonzero(np.r_[True, layers_fwd[1:] != layers_fwd[:-1]])
        rows = tuple(np.flatnonzero(holds[:, k]) for k in range(holds.shape[1]))
        cache[key] = _PsLayout(
            holds=holds,
            owner_flat=owner_flat,
            order=order,
            layer_has=layers_fwd[starts],
            layer_starts=starts,
            shard_rows=rows,
            shard_parts=tuple(sc.placement[r, k] for k, r in enumerate(rows)),
            ready_sorted=ready_in_gradient_order(sc),
            connections=ConnectionItems.of(sc.placement),
        )
    return cache[key]


def per_tensor(layout: _PsLayout, matrix: np.ndarray) -> np.ndarray:
    """Latest finish over the shards that hold each tensor."""
    if layout.owner_flat is not None:
        return matrix.ravel()[layout.owner_flat]
    return np.where(layout.holds, matrix, -np.inf).max(axis=1)


def ps_bsp(sc: Scenario) -> tuple[list[GroupTime], float, list[ResourceUse]]:
    """Iterate the one-iteration map of a max-plus system until its period settles.

    With overlap, a tensor's pull starts as soon as the shard has applied its update, so the
    pulls of one iteration overlap the pushes of the last tensors (PS uplinks and downlinks
    are independent directions); without, once every shard holding it has applied all its
    updates of the iteration (a shard answers its pulls once its own work is done;
    :mod:`~ddlperf.predictors.shard_release`). Starting from "all pulls at once", each pass
    feeds the update times of the last pass back as pull releases; the period converges in a
    few passes. With a
    step barrier the first pass is the iteration: every pull starts once every update is done.
    """
    if colocated.applies(sc):  # every shard on a one-GPU worker's host
        return colocated.colocated_bsp(sc)
    layout = ps_layout(sc)
    senders = _ps_senders(sc)
    zeros = np.zeros(len(sc.tensor_bytes))
    repeats = ShiftedRepeats()  # a pass's shared links, as the last pass's shifted
    updates, ends = _bsp_pass(sc, layout, senders, zeros, [-np.inf] * len(sc.groups), repeats)
    period = max(float(updates.max()), *ends)
    if not sc.strategy.step_barrier:
        overlap = sc.strategy.overlap
        for _ in range(MAX_PASSES - 1):
            release = (updates if overlap
                       else shard_release(layout.shard_rows, layout.holds, updates))
            if not overlap and release.min() == release.max():
                break  # the shards finish together: the next pass is this one
            updates, ends = _bsp_pass(sc, layout, senders, release - period,
                                      [end - period for end in ends], repeats)
            new_period = max(float(updates.max()), *ends)
            settled = abs(new_period - period) <= 1e-9 * new_period
            period = new_period
            if settled:
                break

    slowest = max(g.compute_s for g in sc.groups)
    times = [
        GroupTime(period, g.compute_s, period - slowest, slowest - g.compute_s)
        for g in sc.groups
    ]
    shard_bytes = sc.placement.sum(axis=0)
    busy = []
    for k, shard in enumerate(sc.shards):
        volume = float(senders[k] * shard_bytes[k])
        busy.append((f"{shard.name} downlink", volume / shard.down))
        busy.append((f"{shard.name} uplink", volume / shard.up))
        busy.append((f"{shard.name} update", float(shard_bytes[k]) * shard.update_s_per_byte))
    busy += connection_busy(sc)
    busy += ps_link_busy(sc)
    resources = [ResourceUse(name, b, b / period) for name, b in busy]
    return times, period, resources


def _bsp_pass(
    sc: Scenario, layout: _PsLayout, senders: np.ndarray, release: np.ndarray,
    previous_end: list[float], repeats: ShiftedRepeats,
) -> tuple[np.ndarray, list[float]]:
    """One BSP iteration: pull → forward → backward → push → update, as FIFO links.

    ``release`` (gradient order) is when each tensor's pull may start and ``previous_end``
    when each group finished its last backward, both relative to this iteration's origin.
    Returns each tensor's update finish and each group's backward end.
    """
    overlap = sc.strategy.overlap
    alpha = sc.latency_s
    sizes, placement = sc.tensor_bytes, sc.placement
    ps_up = np.array([s.up for s in sc.shards])

    # Pull: each shard's uplink sends its tensors to every worker as they are released.
    up_ready = np.where(layout.holds, release[:, None], -np.inf)
    pull_s_per_byte = stream_s_per_byte(sc, senders, ps_up)
    pulled_each = serial_finish(up_ready, placement * pull_s_per_byte)
    pulled = per_tensor(layout, pulled_each)
    by_release = np.argsort(release, kind="stable")
    ready_in_order = release[by_release]

    readies, ends = [], []
    for index, (group, before) in enumerate(zip(sc.groups, previous_end)):
        down = receive_rate(sc, ps_endpoint_rates(sc, group)[1])  # its process takes in all
        if not per_connection(sc):
            down_done = np.empty(len(sizes))
            down_done[by_release] = serial_finish(
                ready_in_order, own_link_bytes(sc, group)[by_release] / down)
            arrival = np.maximum(pulled, down_done) + alpha
        else:  # its connections share its downlink where their shares add up to more
            shared = _shared(sc, layout, release, 1.0 / pull_s_per_byte, down,
                             repeats, ("pull", index))
            arrival = per_tensor(layout, np.maximum(pulled_each, shared)) + alpha
        if aggregates(sc, group):  # all-gather the pulled slices over the fabric
            arrival = _inside_server(sc, group, arrival)
        if overlap:  # a layer starts once its parameters arrived and the previous layer ended
            layer_arrival = np.zeros(len(group.forward))
            layer_arrival[layout.layer_has] = np.maximum.reduceat(arrival[layout.order],
                                                                  layout.layer_starts)
            layer_arrival[0] = max(layer_arrival[0], before)
            forward_end = float(serial_finish(layer_arrival, group.forward)[-1])
        else:
            forward_end = max(float(arrival.max()), before) + group.forward_s
        ready, backward_end = backward_ready(sc, group, forward_end + group.unattributed_s)
        if not overlap:
            ready = np.full_like(ready, backward_end)
        if aggregates(sc, group):  # reduce-scatter the gradients over the fabric first
            ready = _inside_server(sc, group, ready)
        readies.append(ready)
        ends.append(backward_end)

    # Push: each endpoint's uplink (its connections, one per shard) and each shard's downlink.
    sent = _sent(sc, layout, readies, repeats)
    if len(sc.groups) == 1 and layout.ready_sorted:
        updates = _shards_one_group(sc, layout, readies[0], sent, senders)
    else:
        updates = _shards_general(sc, layout, readies, sent)
    return updates, ends


def binds(caps: np.ndarray, capacity: float) -> bool:
    """An endpoint's link can hold its connections below their shares at the shards: the
    shares add up to more than the link (a tie does not)."""
    return bool(len(caps) and float(np.sum(caps)) > capacity * (1 + 1e-9))


def per_connection(sc: Scenario) -> bool:
    """Several dedicated shards: an endpoint's link is shared by its connections. One shard:
    the link is one FIFO. Colocated shards on one-GPU hosts do not come here
    (:mod:`~ddlperf.predictors.analytic_colocated_bsp` shares every link among its
    connections); on multi-GPU servers they keep the FIFO."""
    return len(sc.shards) > 1 and all(s.host is None for s in sc.shards)


def connections_bind(sc: Scenario) -> tuple[bool, bool]:
    """Some endpoint's link holds its shard connections below their shares at the shards:
    (pushing on its uplink, pulling on its downlink) — where :func:`connections_finish` runs."""
    if not per_connection(sc):
        return False, False
    push, pull = _shares(sc)
    rates = [ps_endpoint_rates(sc, group) for group in sc.groups]
    return (any(binds(push, up) for up, _down in rates),
            any(binds(pull, receive_rate(sc, down)) for _up, down in rates))


def _shares(sc: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """Each connection's share of its shard's downlink (push) and uplink (pull).

    Pulls leave every shard for all endpoints at once (a tensor's update releases them all),
    and identical endpoints push in lockstep, so the link's share among all senders is what a
    connection gets. Mixed groups push at their own times: a slower group's gradients arrive
    once the others' are in, and then its connections have the shards' links to themselves,
    limited only by its own link, so its connections are capped by the shard's link alone.
    Several groups always push at different times here: the scenario splits workers into
    groups by what they differ in, and the compute-noise view splits identical workers into
    rank classes for the same reason (their draws finish at different times)."""
    senders = _ps_senders(sc)
    pushing = senders if _push_together(sc) else np.ones_like(senders)
    push = 1.0 / stream_s_per_byte(sc, pushing, np.array([s.down for s in sc.shards]),
                                   receiving=True)
    pull = 1.0 / stream_s_per_byte(sc, senders, np.array([s.up for s in sc.shards]))
    return push, pull


def _push_together(sc: Scenario) -> bool:
    """Whether every endpoint pushes in lockstep (one group of identical workers)."""
    return len(sc.groups) == 1


def _shared(sc: Scenario, layout: _PsLayout, ready: np.ndarray, shares: np.ndarray,
            link: float, repeats: ShiftedRepeats, key: tuple[str, int]) -> np.ndarray:
    """(tensor, shard) finish times of an endpoint's connections on its ``link`` (bytes/s)
    where they bind it (:func:`connections_finish`); −inf everywhere where they do not.
    ``repeats``: the last pass's, for ``key`` (direction and group)."""
    if not binds(shares, link):
        return np.full(sc.placement.shape, -np.inf)
    return repeats.finish(key, ready, lambda: connections_finish(
        ready, sc.placement, shares, link, layout.connections))


def _sent(sc: Scenario, layout: _PsLayout, readies: list[np.ndarray],
          repeats: ShiftedRepeats) -> np.ndarray:
    """When each (tensor, shard) part has left the endpoint (−inf: no constraint beyond the
    shard's downlink). One shard (or colocated ones on servers, :func:`per_connection`): the
    endpoint's uplink is a FIFO. Several dedicated shards: one connection
    per shard shares the uplink (:func:`connections_finish`) where the connections' shares
    at the shards add up to more than the uplink; otherwise each runs at its share, which
    the shards' downlink FIFOs already model."""
    if not per_connection(sc):
        sent = np.full(len(sc.tensor_bytes), -np.inf)
        for group, ready in zip(sc.groups, readies):
            sent = np.maximum(sent, serial_finish(
                ready, own_link_bytes(sc, group) / ps_endpoint_rates(sc, group)[0]))
        return np.broadcast_to(sent[:, None], sc.placement.shape)
    shares = _shares(sc)[0]
    sent = np.full(sc.placement.shape, -np.inf)
    for index, (group, ready) in enumerate(zip(sc.groups, readies)):
        sent = np.maximum(sent, _shared(sc, layout, ready, shares,
                                        ps_endpoint_rates(sc, group)[0], repeats,
                                        ("push", index)))
    return sent


def _inside_server(sc: Scenario, group: GroupPlan, ready: np.ndarray) -> np.ndarray:
    """Local aggregation's reduce-scatter (or all-gather) of each tensor inside a server: a
    FIFO over the fabric in the order tensors become ready, (G−1) steps of 1/G of the tensor,
    their latencies paid on arrival (as a connection pays them)."""
    g = group.gpus
    order = np.argsort(ready, kind="stable")
    work = (g - 1) / g * sc.tensor_bytes[order] / group.intra
    done = np.empty_like(ready)
    done[order] = serial_finish(ready[order], work) + (g - 1) * sc.latency_s
    return done


def _shards_one_group(
    sc: Scenario, layout: _PsLayout, ready: np.ndarray, sent: np.ndarray, senders: np.ndarray
) -> np.ndarray:
    """All shards at once: one FIFO per column of a (tensors × shards) matrix.

    Tensors a shard does not hold are zero-work items; with ready times in order they leave
    each FIFO unchanged, so every shard's downlink and update queue is one matrix operation.
    """
    down = np.array([s.down for s in sc.shards])
    update = np.array([s.update_s_per_byte for s in sc.shards])
    done = serial_finish(ready[:, None],
                         sc.placement * stream_s_per_byte(sc, senders, down, receiving=True))
    arrived = np.maximum(done, sent) + sc.latency_s
    if np.any(update > 0):
        arrived = serial_finish(arrived, sc.placement * update)
    return per_tensor(layout, arrived)


def _shards_general(
    sc: Scenario, layout: _PsLayout, readies: list[np.ndarray], sent: np.ndarray
) -> np.ndarray:
    """Shard by shard, for mixed worker groups.

    TCP shares a shard's downlink between its senders: each group's gradient stream is a
    FIFO, and the streams share the link max-min fairly while they are active
    (:mod:`ddlperf.predictors.shared_link`); a tensor is complete at the shard when the last
    group delivered it. Merging all streams into one FIFO instead would make a straggler's
    first gradient wait behind the fast workers' last ones.
    """
    updates = np.full(len(sc.tensor_bytes), -np.inf)
    for k, shard in enumerate(sc.shards):
        rows = layout.shard_rows[k]
        if not len(rows):
            continue
        part = layout.shard_parts[k]
        counts = [
            ps_endpoints(sc, group) - (_at_host(sc, shard) if shard.host is not None
                                       and group.first <= shard.host < group.first + group.count
                                       else 0)
            for group in sc.groups
        ]
        caps = [capped_rate(sc, ps_endpoint_rates(sc, group)[0]) for group in sc.groups]
        # the shard's process takes in every stream: its receive cap bounds the link's rate
        # (loopback streams of a colocated server share it too; not counted here)
        capacity = min(shard.down, sc.receive_cap)
        done = np.full(len(rows), -np.inf)
        for finish in shared_link_finish([ready[rows] for ready in readies], part,
                                         [float(c) for c in counts], caps, capacity):
            done = np.maximum(done, finish)
        arrived = np.maximum(done, sent[rows, k]) + sc.latency_s
        # Update: the shard applies a tensor once all N gradients of it arrived (FIFO).
        by_time = np.argsort(arrived, kind="stable")
        finish = serial_finish(arrived[by_time], part[by_time] * shard.update_s_per_byte)
        updates[rows[by_time]] = np.maximum(updates[rows[by_time]], finish)
    return updates
