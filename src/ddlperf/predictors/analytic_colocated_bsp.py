"""BSP parameter server with colocated shards: one pass as a fluid network over the NICs.

A colocated shard's host NIC carries, on its uplink, the shard's pulls to every other worker
and its own worker's pushes to the other shards; on its downlink the other workers' pushes
into the shard and its own worker's pulls from the other shards. Each is a TCP connection of
its own (one per worker and shard, each way), and the simulator, like the kernel, shares
every link max-min fairly among the connections that have bytes waiting.

The view used before (:func:`~ddlperf.predictors.analytic_colocated.colocated_view` with its
scaled rate, still ASP/SSP's) made a host worker one FIFO at the rate at which its model
crosses in the time both roles need, left the shard the NIC's full rate, and kept every
worker's link a FIFO. Three things it misses, each seen in the simulator's traces:

- *The roles run at once.* The workers drift out of phase (a host runs ahead of the workers
  whose pulls cross its own NIC), so a host's pushes run while its shard pulls to a worker
  that is behind, each connection at half the NIC. With 12 MB on 2 workers (9 MB on one
  shard) the last, largest gradient crosses at half rate twice, push and then pull, on the
  critical path: 0.653 s simulated, 0.586 s for the view (−10.3%).
- *A worker's connections share its link.* A 100 Mbit worker with two colocated shards sends
  to both at once, as to dedicated ones: 0.917 s, not the FIFO's 0.853 s (−7%).
- *The far end is shared too.* A pull from a shard crosses its host's uplink and the
  receiver's downlink, and on each it is one of several connections; a rate per link (the
  max over the two ends, as the dedicated model takes it) is optimistic where both are
  shared (−3% for 3 workers and 3 shards).

So a pass (one iteration of the max-plus map) is run as that network (:class:`_Fluid`):
every connection on the two links it crosses, each link shared max-min fairly among the
connections with an item ready (progressive filling, :func:`capped_max_min_rates`), each connection
sending its items in the order they become ready. A group of identical workers is one
connection per shard that counts once on its own worker's link and once per worker on the
shard host's. The iteration is the dedicated model's — pull, forward (a layer once its
parameters arrived), backward, push, per-tensor update on the host's CPU — but its steps are
set off inside the run, since they depend on transfers that share links with them: a group's
forward and backward once its last pull arrived (its pushes then join the network), a
shard's update of a tensor once every group's gradient of it arrived, and with overlap the
next iteration's pull of it then; the last iteration's pushes (as the last pass found them)
are on the links from the start. A run recomputes the rates only when the set of connections
with an item ready changes (an item that ends while its successor waits changes nothing):
resnet50 with 8 workers and 2 colocated shards takes 0.2 s, with 16 and 16 about 2 s (the
simulator 5 s). An earlier form solved the pass's links with guessed ready times and
repeated until they agreed (3-11 solves per pass, 15x slower at 16 shards).
The passes run to their period, which may be a cycle: with out-of-phase workers the
iterations can alternate (resnet50, 8 workers, 2 shards: 0.4237 and 0.4316 s), and an
iteration takes their mean, as the simulator's mean step period does (0.4277 s both). Where
they settle on neither (a slow host's iterations wander between 0.65 and 0.75 s) the mean of
the second half of the passes stands for the run's mean.
After a step barrier every pull waits for every update: one pass, and only this iteration's
traffic on the links. Without overlap (and no barrier) a shard sends its pulls once its own
updates are done (:mod:`~ddlperf.predictors.shard_release`), so the passes run to a period
as with overlap, the links carrying the last iteration's pushes and the next iteration's
pulls of the shards that are done. A transport's per-connection cap bounds every
connection; its receive cap is one more link per process (a shard's, a worker's).

Against the simulator over the issue's grids: mean 0.01% (worst −0.5%) over 56 points, and
0.00% (worst −0.2%) over 162 BSP points of the dev matrix's synthetic workloads; 60 random
colocated clusters (1–6 workers in mixed groups, asymmetric links, slow workers, update
costs, every sharding, overlap and step barrier at random) mean 0.36%. Known limit, the one
outlier there: two workers, each hosting a shard with half of every tensor (even sharding),
one computing slower. The simulator's period then grows by 21 ms an iteration (a backlog
that one iteration hands to the next grows) from 1.11 s to 1.53 s and stays there, while
the passes settle on 1.13 s, its second iteration (imbalanced12 at 100 Mbit, speed 0.8:
−24%; uniform8 −2%; three or more workers, or round-robin and greedy sharding, exact). Giving
a pass the pulls and pushes of two earlier iterations changes nothing; the pass map has a
fixed point there that the simulated run leaves.

One-GPU hosts, every shard colocated (``placement: colocated``); servers with several GPUs
keep the view (its docstring).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable

import numpy as np

from ddlperf.prediction import ResourceUse
from ddlperf.predictors.assembly import GroupTime
from ddlperf.predictors.connections import connection_busy
from ddlperf.predictors.shard_release import shard_release
from ddlperf.predictors.timeline import backward_ready, forward_order, serial_finish
from ddlperf.scenario import GroupPlan, Scenario

# Passes of the one-iteration map at most (a period or a cycle of periods is found in a
# few; the longest seen on the grids took 12).
MAX_PASSES = 40
# Longest cycle of pass periods recognised as the steady state, and how closely its periods
# must repeat (the cycles close in geometrically, ~10x per pass).
MAX_CYCLE = 4
CYCLE_SETTLED = 1e-6


def applies(sc: Scenario) -> bool:
    """Every shard sits on a one-GPU worker's host (this module's case)."""
    return (bool(sc.shards) and all(s.host is not None for s in sc.shards)
            and all(g.gpus == 1 for g in sc.groups))


def capped_max_min_rates(active: list[int], paths: list[list[tuple[int, float]]],
                  capacity: list[float], cap: list[float]) -> list[float]:
    """Per-flow rate of each ``active`` connection, max-min fair (progressive filling; unlike
    the simulator's dense test oracle ``simulate.maxmin.max_min_rates``, with per-flow caps
    and a connection's flows counted per link):
    connection c stands for identical flows, ``paths[c]`` the (link, flows of c on it)
    it crosses, each flow at most ``cap[c]``."""
    weight: dict[int, float] = {}  # flows of unfrozen connections on each link
    crossing: dict[int, list[int]] = {}
    for c in active:
        for link, w in paths[c]:
            weight[link] = weight.get(link, 0.0) + w
            crossing.setdefault(link, []).append(c)
    left = {link: capacity[link] for link in weight}  # what frozen ones leave of each link
    rate: dict[int, float] = {}
    by_cap = sorted(active, key=lambda c: cap[c])
    lowest = 0  # the first connection of by_cap that may be unfrozen
    while len(rate) < len(active):
        level, tight = min((left[link] / w, link) for link, w in weight.items())
        while by_cap[lowest] in rate:
            lowest += 1
        if cap[by_cap[lowest]] <= level:
            level = cap[by_cap[lowest]]
            frozen = [c for c in by_cap[lowest:] if cap[c] <= level and c not in rate]
        else:
            frozen = [c for c in crossing[tight] if c not in rate]
        level = max(level, 0.0)
        for c in frozen:
            rate[c] = level
            for link, w in paths[c]:
                left[link] -= w * level
                weight[link] -= w
                if weight[link] <= 1e-12:
                    del weight[link]
    return [rate[c] for c in active]


class _Fluid:
    """Connections sharing links max-min fairly (:func:`capped_max_min_rates`), each sending its
    items one after another in the order they become ready, as the simulator's fluid network
    does. Events are an item's end, an item becoming ready on an idle connection and a
    timer; the callbacks of :meth:`run` may add items (ready now or later) and timers, so
    what a transfer's end sets off (a forward pass, an update, the next pull) joins the
    same run."""

    def __init__(self, capacity: list[float]) -> None:
        self.capacity = capacity
        self.paths: list[list[tuple[int, float]]] = []
        self.caps: list[float] = []
        self.items: list[list[tuple[float, float, object]]] = []  # (ready, bytes, tag)
        self.head: list[int] = []  # the item each connection sends (or waits for) next
        self.timers: list[tuple[float, tuple, object]] = []
        self.waiting: list[tuple[float, int]] = []  # idle connections' next ready item
        self.active: set[int] = set()
        self.now = -math.inf

    def connection(self, path: list[tuple[int, float]], cap: float = math.inf) -> int:
        """A connection of identical flows over ``path`` ((link, flows on it) pairs), each
        flow at most ``cap``."""
        self.paths.append(path)
        self.caps.append(cap)
        self.items.append([])
        self.head.append(0)
        return len(self.paths) - 1

    def add(self, c: int, ready: float, size: float, tag: object = None) -> None:
        """An item on connection ``c``, sent after those ready no later (not before the one
        being sent)."""
        mine, first = self.items[c], self.head[c] + (c in self.active)
        at = bisect.bisect_right([item[0] for item in mine[first:]], ready) + first
        mine.insert(at, (ready, size, tag))
        if c not in self.active and at == self.head[c]:
            heapq.heappush(self.waiting, (ready, c))

    def timer(self, at: float, order: tuple, tag: object) -> None:
        heapq.heappush(self.timers, (at, order, tag))

    def run(self, ended: Callable[[object, float], None],
            timed: Callable[[object, float], None]) -> None:
        """Until nothing is left: ``ended(tag, time)`` at each item's end, ``timed(tag,
        time)`` at each timer.

        Rates change only when the set of connections with an item ready changes; an item
        that ends while the next one on its connection is ready changes nothing. So each
        active connection's current item has a projected end (a heap), and only a change of
        the set recomputes the rates and the projections."""
        waiting, timers, active = self.waiting, self.timers, self.active
        known: dict[tuple[int, ...], list[float]] = {}  # rates per set of active connections
        rate: dict[int, float] = {}
        since: dict[int, tuple[float, float]] = {}  # (time, bytes left then) per connection
        version = [0] * len(self.paths)
        ends: list[tuple[float, int, int]] = []  # (projected end, version, connection)
        self.now = min([w[0] for w in waiting] + [t[0] for t in timers], default=0.0)
        changed = True
        while True:
            now = self.now
            while waiting and waiting[0][0] <= now:  # idle connections with an item
                c = heapq.heappop(waiting)[1]
                mine = self.items[c]
                if c not in active and self.head[c] < len(mine) and mine[self.head[c]][0] <= now:
                    active.add(c)
                    since[c] = (now, mine[self.head[c]][1])
                    changed = True
            while timers and timers[0][0] <= now:
                at, _order, tag = heapq.heappop(timers)
                timed(tag, at)
            if waiting and waiting[0][0] <= now:
                continue
            if changed:
                key = tuple(sorted(active))
                rates = known.get(key)
                if rates is None:
                    rates = known[key] = capped_max_min_rates(list(key), self.paths, self.capacity,
                                                       self.caps)
                ends.clear()
                for c, r in zip(key, rates):
                    at, left = since[c]
                    left -= rate.get(c, 0.0) * (now - at)
                    since[c], rate[c] = (now, left), r
                    version[c] += 1
                    if r > 0:
                        ends.append((now + left / r, version[c], c))
                heapq.heapify(ends)
                changed = False
            while ends and ends[0][1] != version[ends[0][2]]:
                heapq.heappop(ends)
            step = min(ends[0][0] if ends else math.inf,
                       waiting[0][0] if waiting else math.inf,
                       timers[0][0] if timers else math.inf)
            if step == math.inf:
                return
            self.now = now = max(step, now)
            while ends and ends[0][0] <= now:
                _end, v, c = heapq.heappop(ends)
                if v != version[c]:
                    continue
                mine = self.items[c]
                tag = mine[self.head[c]][2]
                self.head[c] += 1
                if self.head[c] < len(mine) and mine[self.head[c]][0] <= now:
                    size = mine[self.head[c]][1]  # the next item, at the same rate
                    since[c] = (now, size)
                    version[c] += 1
                    heapq.heappush(ends, (now + size / rate[c], version[c], c))
                else:
                    active.discard(c)
                    rate.pop(c)
                    version[c] += 1
                    changed = True
                    if self.head[c] < len(mine):
                        heapq.heappush(waiting, (mine[self.head[c]][0], c))
                ended(tag, now)


def network_finish(conn: np.ndarray, ready: np.ndarray, size: np.ndarray,
                   paths: list[list[tuple[int, float]]], capacity: list[float],
                   cap: list[float]) -> np.ndarray:
    """Finish time of every entry (an item of ``size`` bytes on connection ``conn``, ready at
    ``ready``) in :class:`_Fluid`, nothing set off by their ends."""
    net = _Fluid(capacity)
    for path, most in zip(paths, cap):
        net.connection(path, most)
    for e in np.lexsort((np.arange(len(conn)), ready)).tolist():
        net.add(int(conn[e]), float(ready[e]), float(size[e]), e)
    finish = np.full(len(conn), -np.inf)

    def ended(tag: object, time: float) -> None:
        finish[tag] = time

    net.run(ended, lambda tag, time: None)
    return finish


class _Colocated:
    """The scenario's fixed layout: groups (a host worker is a group of its own), the shard
    each group hosts, each shard's tensors and bytes, link rates."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.host_group = [next(i for i, g in enumerate(sc.groups)
                                if g.first <= s.host < g.first + g.count)  # type: ignore[operator]
                           for s in sc.shards]
        self.hosts = {g: k for k, g in enumerate(self.host_group)}
        self.rows = [np.flatnonzero(sc.placement[:, k] > 0) for k in range(len(sc.shards))]
        self.holds = sc.placement > 0  # (tensors, shards)
        self.holders = self.holds.sum(axis=1)  # shards holding each tensor
        self.tensor_parts = [[(int(k), float(sc.placement[j, k]))
                              for k in np.flatnonzero(self.holds[j])]
                             for j in range(len(sc.tensor_bytes))]  # per tensor: (shard, bytes)
        self.parts = [sc.placement[r, k] for k, r in enumerate(self.rows)]
        self.order = forward_order(sc)
        layers = sc.tensor_layer[self.order]
        self.starts = np.flatnonzero(np.r_[True, layers[1:] != layers[:-1]])
        self.layer_has = layers[self.starts]

    def run_pass(self, release: np.ndarray, before: list[float],
                 last: list[np.ndarray] | None, mixed: bool, per_shard: bool = False
                 ) -> tuple[list[np.ndarray], list[float], np.ndarray]:
        """One iteration: this iteration's pulls (released at ``release``); each group's
        forward and backward once its last pull arrived (after ``before``, its last backward
        end), then its pushes; each shard's update of a tensor once every group's gradient
        of it arrived (a FIFO on the host's CPU). With ``mixed`` (overlap, no step barrier)
        the links also carry the last iteration's pushes (``last``) and the next
        iteration's pulls, each released by its update; with ``per_shard`` (no overlap, no
        step barrier) the next iteration's pulls of a tensor once every shard holding it has
        applied all its updates. Returns each group's gradient-ready times and backward end,
        and each tensor's update finish."""
        sc, groups, alpha = self.sc, self.sc.groups, self.sc.latency_s
        n_groups, n_tensors = len(groups), len(sc.tensor_bytes)
        # links: each group's worker uplink (2g) and downlink (2g + 1), a host's its NIC; with
        # a receive cap one process link per group (2G + g) and per shard (3G + k)
        capacity = [rate for group in groups for rate in (group.up, group.down)]
        intake = sc.receive_capped
        if intake:
            capacity += [sc.receive_cap] * (n_groups + len(sc.shards))
        net = _Fluid(capacity)
        pull: dict[tuple[int, int], int] = {}
        push: dict[tuple[int, int], int] = {}
        for g, group in enumerate(groups):
            for k in range(len(sc.shards)):
                h = self.host_group[k]
                if h == g:
                    continue
                path = [(2 * h, group.count), (2 * g + 1, 1.0)]
                pull[k, g] = net.connection(path + ([(2 * n_groups + g, 1.0)] if intake
                                                    else []), sc.connection_cap)
                path = [(2 * g, 1.0), (2 * h + 1, group.count)]
                push[g, k] = net.connection(path + ([(3 * n_groups + k, group.count)]
                                                    if intake else []), sc.connection_cap)
        arrival = [np.full(n_tensors, -np.inf) for _ in groups]
        outstanding = [0] * n_groups  # pulls a group still waits for
        for (k, g), c in pull.items():
            for j, size in zip(self.rows[k].tolist(), self.parts[k].tolist()):
                net.add(c, float(release[j]), size, ("pull", g, j))
                outstanding[g] += 1
            if last is not None:  # the last iteration's pushes, still on their way
                for j, size in zip(self.rows[k].tolist(), self.parts[k].tolist()):
                    net.add(push[g, k], float(last[g][j]), size)
        gathered = [np.full(len(rows), -np.inf) for rows in self.rows]  # gradients at shards
        missing = [np.full(len(rows), n_groups) for rows in self.rows]
        readies: list[np.ndarray] = [np.empty(0)] * n_groups
        ends = [0.0] * n_groups
        updates = np.full(n_tensors, -np.inf)
        busy = [-np.inf] * len(sc.shards)  # each shard's update FIFO
        left = [len(rows) for rows in self.rows]  # per_shard: updates each shard has to do
        holders_left = self.holders.copy()  # per_shard: shards not done with each tensor
        released = np.full(n_tensors, -np.inf)  # per_shard: when they all were

        def gradient(k: int, i: int, time: float) -> None:
            gathered[k][i] = max(gathered[k][i], time)
            missing[k][i] -= 1
            if missing[k][i] == 0:
                net.timer(gathered[k][i], (k, i), ("update", k, i))

        def computed(g: int) -> None:
            for k, rows in enumerate(self.rows):
                if self.host_group[k] == g:
                    arrival[g][rows] = np.maximum(arrival[g][rows], release[rows])
            ready, end = self.compute(groups[g], arrival[g], before[g])
            readies[g], ends[g] = ready, end
            for k, rows in enumerate(self.rows):
                if self.host_group[k] == g:  # its own shard: no network
                    for i, j in enumerate(rows.tolist()):
                        gradient(k, i, float(ready[j]))
                else:
                    for i, (j, size) in enumerate(zip(rows.tolist(), self.parts[k].tolist())):
                        net.add(push[g, k], float(ready[j]), size, ("push", k, i))

        def ended(tag: object, time: float) -> None:
            if tag is None:
                return
            kind, a, b = tag  # type: ignore[misc]
            if kind == "pull":
                arrival[a][b] = max(arrival[a][b], time + alpha)
                outstanding[a] -= 1
                if outstanding[a] == 0:
                    computed(a)
            else:
                gradient(a, b, time + alpha)

        def timed(tag: object, time: float) -> None:
            _kind, k, i = tag  # type: ignore[misc]
            j = int(self.rows[k][i])
            busy[k] = max(time, busy[k]) + float(self.parts[k][i]) * sc.shards[k].update_s_per_byte
            updates[j] = max(updates[j], busy[k])
            if mixed:  # the next iteration's pull of it
                for g in range(n_groups):
                    if g != self.host_group[k]:
                        net.add(pull[k, g], busy[k], float(self.parts[k][i]))
            elif per_shard:
                left[k] -= 1
                if left[k] == 0:
                    shard_done(k, busy[k])

        def shard_done(k: int, time: float) -> None:
            """The next iteration's pulls of every tensor whose shards are all done now."""
            for j in self.rows[k].tolist():
                released[j] = max(released[j], time)
                holders_left[j] -= 1
                if holders_left[j]:
                    continue
                for kk, size in self.tensor_parts[j]:
                    for g in range(n_groups):
                        if g != self.host_group[kk]:
                            net.add(pull[kk, g], float(released[j]), size)

        for g in range(n_groups):
            if outstanding[g] == 0:
                computed(g)
        net.run(ended, timed)
        return readies, ends, updates

    def compute(self, group: GroupPlan, got: np.ndarray, before: float
                ) -> tuple[np.ndarray, float]:
        """Forward (a layer once its parameters arrived) and backward of a group's worker:
        gradient-ready times and backward end (as :func:`ps_bsp`'s pass)."""
        sc = self.sc
        if sc.strategy.overlap:
            layer_arrival = np.zeros(len(group.forward))
            layer_arrival[self.layer_has] = np.maximum.reduceat(got[self.order], self.starts)
            layer_arrival[0] = max(layer_arrival[0], before)
            forward_end = float(serial_finish(layer_arrival, group.forward)[-1])
        else:
            forward_end = max(float(got.max()), before) + group.forward_s
        ready, end = backward_ready(sc, group, forward_end + group.unattributed_s)
        return (ready if sc.strategy.overlap else np.full_like(ready, end)), end


def colocated_bsp(sc: Scenario) -> tuple[list[GroupTime], float, list[ResourceUse]]:
    """The BSP period with colocated shards: the one-iteration map (:meth:`run_pass`)
    iterated to its period, or to a cycle of periods (an iteration then takes their mean)."""
    model = _Colocated(sc)
    strategy = sc.strategy
    mixed = strategy.overlap and not strategy.step_barrier  # iterations meet on the NICs
    per_shard = not strategy.overlap and not strategy.step_barrier  # so they do here
    release = np.zeros(len(sc.tensor_bytes))
    before = [-np.inf] * len(sc.groups)
    last: list[np.ndarray] | None = None  # the last iteration's pushes, in this pass's time
    periods: list[float] = []
    for _ in range(MAX_PASSES if mixed or per_shard else 1):
        readies, ends, updates = model.run_pass(release, before, last, mixed, per_shard)
        period = max(float(updates.max()), *ends)
        periods.append(period)
        if mixed or per_shard:
            last = [r - period for r in readies]
        if per_shard:
            updates = shard_release(model.rows, model.holds, updates)
        release, before = updates - period, [end - period for end in ends]
        cycle = _cycle(periods)
        if cycle:
            return _times(sc, cycle), cycle, _resources(sc, model, cycle)
    # no period nor cycle (the iterations wander, as the simulator's do): the mean over the
    # second half of the passes, as a run's mean step period after its warm-up
    mean = float(np.mean(periods[len(periods) // 2:]))
    return _times(sc, mean), mean, _resources(sc, model, mean)


def _cycle(periods: list[float]) -> float | None:
    """The mean period once the passes repeat (one period, or a cycle of a few: the
    iterations then alternate, and an iteration takes their mean)."""
    for m in range(1, MAX_CYCLE + 1):
        if len(periods) > m and all(abs(periods[-1 - i] - periods[-1 - m - i])
                                    <= CYCLE_SETTLED * periods[-1]
                                    for i in range(min(m, len(periods) - m))):
            return float(np.mean(periods[-m:]))
    return None


def _times(sc: Scenario, period: float) -> list[GroupTime]:
    slowest = max(g.compute_s for g in sc.groups)
    return [GroupTime(period, g.compute_s, period - slowest, slowest - g.compute_s)
            for g in sc.groups]


def _resources(sc: Scenario, model: _Colocated, period: float) -> list[ResourceUse]:
    """Busy time per iteration: a host's NIC under its shard's name (both roles, as the
    simulator reports it), every other worker's links under its own, each shard's update."""
    shard_bytes = sc.placement.sum(axis=0)
    total = float(sc.tensor_bytes.sum())
    n = sc.worker_count
    busy = []
    for k, shard in enumerate(sc.shards):
        host = sc.groups[model.host_group[k]]
        volume = (n - 1) * float(shard_bytes[k]) + total - float(shard_bytes[k])
        busy += [(f"{shard.name} downlink", volume / host.down),
                 (f"{shard.name} uplink", volume / host.up),
                 (f"{shard.name} update", float(shard_bytes[k]) * shard.update_s_per_byte)]
    busy += connection_busy(sc)
    for g, group in enumerate(sc.groups):
        if g not in model.hosts:
            busy += [(group.nic_name("uplink"), total / group.nic_up),
                     (group.nic_name("downlink"), total / group.nic_down)]
    return [ResourceUse(name, b, b / period) for name, b in busy]
