"""The batched BSP period of a parameter server: the FIFO passes of
:mod:`ddlperf.predictors.analytic_ps_bsp` with a trailing batch axis (one column per point).

Split from :mod:`ddlperf.predictors.analytic_batch`, which decides what can be batched and
assembles the results; this module holds the fixed point alone: the placement layout (each
distinct shard column's FIFO over its own tensors, padded), the per-point numbers, the FIFOs
whose work does not change between passes, and the passes themselves. Each point's column is
computed on its own, with the same floating-point operations as the per-point model — a
point whose worker's shard connections hold its link (:func:`binding`) too: its shared link
is computed for its own numbers (:func:`~ddlperf.predictors.shared_connections.entries_finish`,
the columns of all such points of a pass in one call, with the points' last passes in a
:class:`~ddlperf.predictors.shared_connections.ShiftedColumns`), the rest of its pass with
the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ddlperf.predictors.analytic_ps_bsp import MAX_PASSES, ps_layout, ready_in_gradient_order
from ddlperf.predictors.shard_release import shard_release
from ddlperf.predictors.shared_connections import ShiftedColumns, entries_finish
from ddlperf.predictors.timeline import serial_finish
from ddlperf.scenario import Scenario


@dataclass(frozen=True)
class Layout:
    """Distinct placement columns, each FIFO over its own tensors (padded)."""

    idx: np.ndarray  # (P, U): gradient-order tensor index; pads point at row J (a -inf row)
    part: np.ndarray  # (P, U): bytes of that tensor on the column's shards; pads 0
    flat: np.ndarray  # (J,): index into the flattened (P·U) array of each tensor's slot


def batch_layout(sc: Scenario) -> Layout | None:
    """None when a tensor sits on several distinct columns or gradients are out of order."""
    key = ("batch_layout", sc.strategy.sharding, len(sc.shards))
    cache = sc.workload.derived_cache
    if key not in cache:
        cache[key] = _build_layout(sc)
    return cache[key]


def _build_layout(sc: Scenario) -> Layout | None:
    if not ready_in_gradient_order(sc):
        return None
    placement = sc.placement
    columns: list[np.ndarray] = []
    seen: set[bytes] = set()
    for k in range(placement.shape[1]):
        col = placement[:, k]
        if not np.any(col > 0) or col.tobytes() in seen:
            continue
        seen.add(col.tobytes())
        columns.append(col)
    if not columns:
        return None
    held = np.array([c > 0 for c in columns])  # (U, J)
    if not np.all(held.sum(axis=0) == 1):
        return None
    rows = [np.flatnonzero(h) for h in held]
    n_tensors = placement.shape[0]
    depth = max(len(r) for r in rows)
    idx = np.full((depth, len(rows)), n_tensors, dtype=np.intp)
    part = np.zeros((depth, len(rows)))
    flat = np.empty(n_tensors, dtype=np.intp)
    for u, r in enumerate(rows):
        idx[: len(r), u] = r
        part[: len(r), u] = columns[u][r]
        flat[r] = np.arange(len(r)) * len(rows) + u
    return Layout(idx=idx, part=part, flat=flat)


@dataclass
class Points:
    """Per-point inputs of one batch, all (B,)."""

    n: np.ndarray  # worker count (float)
    gup: np.ndarray
    gdown: np.ndarray
    sup: np.ndarray
    sdown: np.ndarray
    supd: np.ndarray
    alpha: np.ndarray

    def take(self, cols: np.ndarray | slice) -> Points:
        return Points(*(getattr(self, f)[cols] for f in POINT_FIELDS))

    @classmethod
    def of(cls, workers: Sequence[int], values: Sequence[Sequence[float]]) -> Points:
        v = np.array(values, dtype=float).reshape(len(workers), 6).T
        return cls(np.array(workers, dtype=float), *v)

    def solo(self) -> Points:
        """The same numbers with one worker."""
        return Points(np.ones(len(self.n)), *(getattr(self, f) for f in POINT_FIELDS[1:]))

    def rows(self) -> np.ndarray:
        """(B, 7), C-contiguous: one row of numbers per point."""
        return np.ascontiguousarray(np.stack([getattr(self, f) for f in POINT_FIELDS], axis=1))


POINT_FIELDS = ("n", "gup", "gdown", "sup", "sdown", "supd", "alpha")


# ---------------------------------------------------------------- parameter server, BSP


class _Fifo:
    """``serial_finish`` with fixed work: its running totals are computed once per batch."""

    def __init__(self, total: np.ndarray, base: np.ndarray) -> None:
        self.total = total
        self.base = base  # total before each item

    @classmethod
    def of(cls, work: np.ndarray) -> _Fifo:
        total = np.cumsum(work, axis=0)
        return cls(total, total - work)

    def finish(self, ready: np.ndarray) -> np.ndarray:
        """Same operations as ``serial_finish(ready, work)``."""
        return self.total + np.maximum.accumulate(ready - self.base, axis=0)

    def take(self, cols: np.ndarray) -> _Fifo:
        return _Fifo(self.total[..., cols], self.base[..., cols])


@dataclass
class _Links:
    """The FIFOs whose work does not change between passes (per point, last axis)."""

    pull: _Fifo  # (P, U, B) shard uplinks
    pushed: _Fifo  # (P, U, B) shard downlinks
    applied: _Fifo | None  # (P, U, B) shard update queues; None: no point has update work
    updating: np.ndarray  # (B,) the points with update work
    # one shard (the worker's link a FIFO; None with several shards, whose connections the
    # shards' FIFOs and the shared links model): (J, B) the worker's uplink, each tensor's
    # time on its downlink, and the downlink in gradient order (the first pass's)
    sent: _Fifo | None
    down_work: np.ndarray | None
    first_down: _Fifo | None
    # (B,): the worker's uplink (push) or downlink (pull) holds its shard connections below
    # their shares (:func:`binding`); the shared links' last pass per point of the batch
    # (``index``: each column's point)
    bind_push: np.ndarray
    bind_pull: np.ndarray
    repeats: ShiftedColumns
    index: np.ndarray

    @classmethod
    def of(cls, sc: Scenario, lay: Layout, p: Points) -> _Links:
        """Links of equal rates (bit for bit) in every point share their FIFO's totals."""
        part = lay.part[:, :, None]
        updating = p.supd > 0
        pull = _Fifo.of(part * (p.n / p.sup))
        sent = first_down = down_work = None
        if len(sc.shards) == 1:
            sent = _Fifo.of(sc.tensor_bytes[:, None] / p.gup)
            down_work = sc.tensor_bytes[:, None] / p.gdown
            first_down = sent if _same(p.gup, p.gdown) else _Fifo.of(down_work)
        bind_push, bind_pull = binding(len(sc.shards), p)
        return cls(
            pull=pull,
            pushed=pull if _same(p.sup, p.sdown) else _Fifo.of(part * (p.n / p.sdown)),
            applied=_Fifo.of(part * p.supd) if np.any(updating) else None,
            updating=updating,
            sent=sent,
            down_work=down_work,
            first_down=first_down,
            bind_push=bind_push,
            bind_pull=bind_pull,
            repeats=ShiftedColumns(len(p.n)),
            index=np.arange(len(p.n)),
        )

    def take(self, cols: np.ndarray) -> _Links:
        return _Links(self.pull.take(cols), self.pushed.take(cols),
                      None if self.applied is None else self.applied.take(cols),
                      self.updating[cols],
                      None if self.sent is None else self.sent.take(cols),
                      None if self.down_work is None else self.down_work[:, cols],
                      None if self.first_down is None else self.first_down.take(cols),
                      self.bind_push[cols], self.bind_pull[cols], self.repeats,
                      self.index[cols])


def binding(shards: int, p: Points) -> tuple[np.ndarray, np.ndarray]:
    """(push, pull) per point: ``analytic_ps_bsp.binds`` of a worker's shard connections on
    its uplink and downlink, for what a batch holds (one group of one-GPU workers, identical
    dedicated shards, no caps): ``shards`` connections, each at its share of a shard's link
    (n senders), add up to more than the worker's link."""
    if shards < 2:
        none = np.zeros(len(p.n), dtype=bool)
        return none, none
    push = shards * (1.0 / (p.n / p.sdown))
    pull = shards * (1.0 / (p.n / p.sup))
    return push > p.gup * (1 + 1e-9), pull > p.gdown * (1 + 1e-9)


def _shared_links(sc: Scenario, links: _Links, cols: np.ndarray, ready: np.ndarray,
                  shares: np.ndarray, rates: np.ndarray, key: str) -> np.ndarray:
    """(J, len(cols)): when each tensor has crossed the worker's link of each point in
    ``cols``, its connections (one per shard, each at most its ``shares``) sharing the link
    (``rates``) — ``analytic_ps_bsp._shared`` per point, with the point's last pass, all
    columns at once (:func:`~ddlperf.predictors.shared_connections.entries_finish`)."""
    connections = ps_layout(sc).connections
    ready, shares, rates = ready[:, cols], shares[cols], rates[cols]

    def compute(mask: np.ndarray) -> np.ndarray:
        return connections.per_item(entries_finish(connections, ready[:, mask], shares[mask],
                                                   rates[mask]))

    return links.repeats.finish(key, links.index[cols], ready, compute)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """The same numbers, bit for bit (so anything computed from them is the same too)."""
    return a.tobytes() == b.tobytes()


def _bsp_pass(
    sc: Scenario, lay: Layout, p: Points, links: _Links, release: np.ndarray,
    before: np.ndarray, first: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """``analytic_ps_bsp._bsp_pass`` for one group and dedicated shards, batched over points.

    ``first``: ``release`` is all zeros (the first pass).

    Forward only needs the latest arrival relative to its layer's place in the forward FIFO:
    ``serial_finish(layer_arrival, forward)[-1]`` is ``total + max_l(arrival_l − base_l)``
    with ``arrival_l`` the latest of layer l's tensors (0 for a layer without any, and at
    least ``before`` for the first layer). Subtracting a constant is monotonic in floating
    point too, so ``max_t(arrival_t) − base_l = max_t(arrival_t − base_l)``: one maximum
    over the tensors, in any order, gives the same number — so arrivals stay in the order
    the worker's downlink delivered them (no scatter back to gradient order).
    """
    overlap = sc.strategy.overlap
    points = release.shape[1]
    pad = np.full((1, points), -np.inf)
    forward = _forward_fifo(sc)

    # Pull: each (distinct) shard's uplink sends its tensors as they are released.
    pulled = links.pull.finish(np.concatenate((release, pad))[lay.idx])
    pulled = pulled.reshape(-1, points)[lay.flat]
    if len(sc.shards) > 1:  # connections at their shares, or sharing the downlink
        arrival = pulled + p.alpha
        base = forward.tensor_base[:, None]
        if links.bind_pull.any():
            cols = np.flatnonzero(links.bind_pull)
            shared = _shared_links(sc, links, cols, release, 1.0 / (p.n / p.sup), p.gdown,
                                   "pull")
            arrival[:, cols] = np.maximum(pulled[:, cols], shared) + p.alpha[cols]
    elif first:  # all released at 0: the stable order is the gradient order
        assert links.first_down is not None
        down_done = links.first_down.finish(release)
        base = forward.tensor_base[:, None]
    else:  # the worker's downlink in release order; arrivals kept in that order
        by_release = np.argsort(release, axis=0, kind="stable")
        flat = by_release * points + np.arange(points)  # into the (J, B) arrays, flattened
        assert links.down_work is not None
        down_done = serial_finish(release.take(flat), links.down_work.take(flat))
        pulled = pulled.take(flat)
        base = forward.tensor_base[by_release]
    if len(sc.shards) == 1:
        arrival = np.maximum(pulled, down_done) + p.alpha
    if overlap:
        latest = (arrival - base).max(axis=0)
        latest = np.maximum(latest, forward.empty_layers)
        latest = np.maximum(latest, before - forward.first_base)
        forward_end = forward.total + latest
    else:
        forward_end = np.maximum(arrival.max(axis=0), before) + sc.groups[0].forward_s
    return _push(sc, lay, p, links, forward_end)


@dataclass(frozen=True)
class _ForwardFifo:
    """The forward FIFO's constants (``serial_finish(·, forward)``'s running totals)."""

    total: float  # its last running total
    tensor_base: np.ndarray  # (J,): the total before each tensor's layer
    empty_layers: float  # max over layers without tensors of (0 − base); -inf: none
    first_base: float  # the total before the first layer (its work subtracted from its total)


def _forward_fifo(sc: Scenario) -> _ForwardFifo:
    g = sc.groups[0]
    key = ("batch_forward_fifo", id(g.forward))
    cache = sc.workload.derived_cache
    if key not in cache:
        work = g.forward[:, None]
        total = np.cumsum(work, axis=0)
        base = (total - work)[:, 0]
        empty = np.ones(len(base), dtype=bool)
        empty[sc.tensor_layer] = False
        cache[key] = (_ForwardFifo(
            total=float(total[-1, 0]), tensor_base=base[sc.tensor_layer],
            empty_layers=float((0.0 - base[empty]).max()) if empty.any() else -np.inf,
            first_base=float(base[0]),
        ), g.forward)  # keeps the array (and so its id) alive with the entry
    return cache[key][0]


def _push(
    sc: Scenario, lay: Layout, p: Points, links: _Links, forward_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Backward after ``forward_end``, then push: the worker's uplink, each shard's downlink
    and update queue, as FIFOs. Returns each tensor's update time and the end of backward."""
    g = sc.groups[0]
    n_tensors, points = len(sc.tensor_bytes), len(forward_end)
    pad = np.full((1, points), -np.inf)
    backward_start = forward_end + g.unattributed_s
    backward_end = backward_start + g.backward_s
    if sc.strategy.overlap:
        grad_ready = g.ready_offset[:, None] + backward_start
        start = backward_start
    else:
        grad_ready = np.broadcast_to(backward_end, (n_tensors, points))
        start = backward_end
    # the same sums in the shards' slots (pads: −inf + start = −inf)
    done = links.pushed.finish(_slot_ready(sc, lay)[:, :, None] + start)
    if len(sc.shards) > 1:  # connections at their shares, or sharing the uplink
        arrived = done + p.alpha
        if links.bind_push.any():
            cols = np.flatnonzero(links.bind_push)
            sent = _shared_links(sc, links, cols, grad_ready, 1.0 / (p.n / p.sdown), p.gup,
                                 "push")
            sent = np.concatenate((sent, pad[:, : len(cols)]))[lay.idx]
            arrived[:, :, cols] = np.maximum(done[:, :, cols], sent) + p.alpha[cols]
    else:
        assert links.sent is not None
        sent = links.sent.finish(grad_ready)
        arrived = np.maximum(done, np.concatenate((sent, pad))[lay.idx]) + p.alpha
    if links.applied is not None:
        applied = links.applied.finish(arrived)
        updating = links.updating
        arrived = applied if updating.all() else np.where(updating, applied, arrived)
    return arrived.reshape(-1, points)[lay.flat], backward_end


def _slot_ready(sc: Scenario, lay: Layout) -> np.ndarray:
    """(P, U): when each shard slot's gradient is ready after backward starts (with overlap;
    0 after backward ends without), −inf for pads."""
    g = sc.groups[0]
    key = ("batch_slot_ready", sc.strategy.sharding, len(sc.shards), sc.strategy.overlap,
           id(g.ready_offset))
    cache = sc.workload.derived_cache
    if key not in cache:
        offsets = g.ready_offset if sc.strategy.overlap else np.zeros(len(g.ready_offset))
        cache[key] = (np.concatenate((offsets, [-np.inf]))[lay.idx], g.ready_offset)
    return cache[key][0]


def bsp_period(sc: Scenario, lay: Layout, p: Points) -> np.ndarray:
    """``analytic_ps_bsp.ps_bsp`` period per point; each point stops iterating once it settled."""
    points = len(p.n)
    links = _Links.of(sc, lay, p)
    updates, ends = _bsp_pass(sc, lay, p, links, np.zeros((len(sc.tensor_bytes), points)),
                              np.full(points, -np.inf), first=True)
    period = np.maximum(updates.max(axis=0), ends)
    if not sc.strategy.step_barrier:
        overlap = sc.strategy.overlap
        held = None if overlap else ps_layout(sc)  # without overlap: who holds each tensor
        active = np.arange(points)
        sub_p, sub_links = p, links
        for _ in range(MAX_PASSES - 1):
            whole = len(active) == points
            last = period[active]
            upd = updates if whole else updates[:, active]
            end = ends if whole else ends[active]
            release = (upd if held is None
                       else shard_release(held.shard_rows, held.holds, upd))
            if held is not None:  # shards that finish together: the next pass is this one
                apart = release.min(axis=0) != release.max(axis=0)
                if not apart.all():
                    if not apart.any():
                        break
                    active, release, end, last = (active[apart], release[:, apart],
                                                  end[apart], last[apart])
                    sub_p, sub_links = p.take(active), links.take(active)
                    whole = False
            upd, end = _bsp_pass(sc, lay, sub_p, sub_links, release - last, end - last)
            new = np.maximum(upd.max(axis=0), end)
            settled = np.abs(new - last) <= 1e-9 * new
            if whole:
                period, updates, ends = new, upd, end
            else:
                period[active] = new
                updates[:, active] = upd
                ends[active] = end
            if settled.all():
                break
            if settled.any():
                active = active[~settled]
                sub_p, sub_links = p.take(active), links.take(active)
    return period
