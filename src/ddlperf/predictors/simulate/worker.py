"""A worker as a chain of compute operations per iteration, gated by its dependencies.

One iteration is ``[optimizer step] forward(layer 0 … L−1) [unattributed] backward(L−1 … 0)``
(the optimizer step only where the worker applies updates itself, i.e. all-reduce). The chain
runs one operation at a time on the worker's :class:`~.compute.Processor` and asks its model
(PS or ring, by overriding the hooks) before it may go on:

* ``can_start(t)``: may iteration ``t`` begin (all-reduce of ``t−1`` done, SSP bound)?
* ``layer_ready(l)``: have layer ``l``'s parameters arrived (PS pull)?

and tells it what happened: ``forward_done``, ``gradients_ready(l, t)`` after each backward
layer, ``backward_done``. When a gate is closed the chain simply stops (``gate_closed(l)``
says so); the model calls :meth:`Worker.poke` when something it waits for has changed.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from ddlperf.predictors.simulate.compute import Processor
from ddlperf.predictors.simulate.engine import Engine
from ddlperf.predictors.simulate.jitter import OpDurations
from ddlperf.predictors.simulate.record import Recorder
from ddlperf.predictors.simulate.units import Unit
from ddlperf.scenario import Scenario

OPT: Final = 0  # (Final: constants of the compiled module, see setup.py)
FWD: Final = 1
MISC: Final = 2
BWD: Final = 3


def iteration_ops(
    forward: np.ndarray, backward: np.ndarray, unattributed: float, optimizer: float,
    forward_cv: np.ndarray, backward_cv: np.ndarray, other_cv: float, names: list[str],
) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray, list[str]]:
    """Operation list ``(kind, layer)``, base durations, cvs and trace labels of one iteration.

    Zero-length optimizer/unattributed steps are left out (they would only cost events).
    """
    n = len(forward)
    ops: list[tuple[int, int]] = []
    base: list[float] = []
    cv: list[float] = []
    labels: list[str] = []
    if optimizer > 0:
        ops.append((OPT, -1))
        base.append(optimizer)
        cv.append(other_cv)
        labels.append("optimizer step")
    for layer in range(n):
        ops.append((FWD, layer))
        base.append(float(forward[layer]))
        cv.append(float(forward_cv[layer]))
        labels.append(f"forward {names[layer]}")
    if unattributed > 0:
        ops.append((MISC, -1))
        base.append(unattributed)
        cv.append(other_cv)
        labels.append("unattributed")
    for layer in range(n - 1, -1, -1):
        ops.append((BWD, layer))
        base.append(float(backward[layer]))
        cv.append(float(backward_cv[layer]))
        labels.append(f"backward {names[layer]}")
    return ops, np.array(base), np.array(cv), labels


class Worker:
    """Runs iterations forever (the recorder stops the engine); subclasses add dependencies."""

    def __init__(
        self, engine: Engine, unit: Unit, processor: Processor, durations: OpDurations,
        ops: list[tuple[int, int]], labels: list[str], recorder: Recorder,
    ) -> None:
        self.engine = engine
        self.unit = unit
        self.index: int = unit.index  # (read per chain: a native field, Unit is Python)
        self.processor = processor
        self.durations = durations
        self.ops = ops
        self.labels = labels
        self.recorder = recorder
        self.t = 0  # current iteration
        self.i = 0  # next operation of the iteration
        self.running = False
        self._blocked_at: float | None = None
        self._begun = False  # iteration ``t`` has passed its start gate
        self._times: list[float] = []
        self._compute = 0.0
        self._until = 0  # last operation of the running chain
        self._stop: list[int] | None = None  # per op: where its chain ends (set on first use)
        # Forward gates exist only where a model overrides layer_ready.
        self._gated = type(self).layer_ready is not Worker.layer_ready
        #: a chain's hooks are called when it is planned (see :meth:`chain_planned`)
        self.ahead = False
        self._last_forward = max((k for k, (kind, _) in enumerate(ops) if kind == FWD),
                                 default=-1)

    # -- hooks for the models ----------------------------------------------------------------

    def can_start(self, t: int) -> bool:
        return True

    def layer_ready(self, layer: int) -> bool:
        return True

    def gate_closed(self, layer: int) -> None:
        """The chain stopped at the closed forward gate of ``layer``."""

    def forward_done(self, t: int) -> None:
        """Every forward gate of iteration ``t`` has passed."""

    def gradients_ready(self, layer: int, t: int) -> None:
        """Backward of ``layer`` in iteration ``t`` ended."""

    def backward_done(self, t: int) -> None:
        """Iteration ``t``'s compute is over."""

    # -- the chain -----------------------------------------------------------------------------

    def start(self) -> None:
        self._next()

    def poke(self) -> None:
        """Something this worker may be waiting for has changed: try to continue."""
        if not self.running:
            self._next()

    def _next(self) -> None:
        t, i = self.t, self.i
        if i == 0 and not self._begun:
            if not self.can_start(t):
                if self._blocked_at is None:
                    self._blocked_at = self.engine.now
                return
            blocked = self._blocked_at
            gate = 0.0 if blocked is None else self.engine.now - blocked
            self._blocked_at = None
            self._begun = True
            self._times = times = self.durations.draw()
            compute = 0.0
            for x in times:  # the order the ops run in (the sums of reduce(add, times, 0.0))
                compute += x
            self._compute = compute
            self.recorder.iteration_started(self.index, t, gate)
        ops = self.ops
        kind, layer = ops[i]
        if kind == FWD and not self.layer_ready(layer):
            self.gate_closed(layer)
            return
        self.running = True
        stop = self._stop
        if stop is None:
            stop = self._stop = self._chain_stops()
        j = stop[i]
        if j > i and self._gated:
            # Gates only open during an iteration: open now means open when the op starts.
            j = self.open_until(i, j)
        self._until = j
        times = self._times
        if j == i:
            self.processor.submit(times[i], self._done, (), self.labels[i], t)
            return
        # A chain of operations as one busy period: the same sums as one event per op.
        now = self.engine.now
        if self.ahead:
            ends = _ends(times, i, j, now)
            self.chain_planned(i, j, ends)
            records = None
            if self.processor.log is not None:
                labels = self.labels
                records = [(labels[k], ends[k - i], ends[k - i + 1], t) for k in range(i, j + 1)]
            self.processor.run_chain(ends[-1], self._done, records)
            return
        if self.processor.log is None:
            end = now
            for k in range(i, j + 1):
                end += times[k]
            self.processor.run_chain(end, self._done, None)
            return
        ends = _ends(times, i, j, now)
        labels = self.labels
        records = [(labels[k], ends[k - i], ends[k - i + 1], t) for k in range(i, j + 1)]
        self.processor.run_chain(ends[-1], self._done, records)

    def open_until(self, i: int, j: int) -> int:
        """The last operation ``k`` of ``i`` … ``j`` such that the forward gates of
        operations ``i + 1`` … ``k`` are open now (models may answer it faster)."""
        ops = self.ops
        k = i
        while k < j:
            kind, layer = ops[k + 1]
            if kind == FWD and not self.layer_ready(layer):
                break
            k += 1
        return k

    def _chain_stops(self) -> list[int]:
        """Per operation ``i``: the first operation ``j >= i`` whose end others may see.

        Operations ``i … j`` can run as one chain (one event, at the end of ``j``) when the
        ones before ``j`` are quiet (see :meth:`quiet_end`). Never chained: the last operation
        (the iteration ends there), and a stream shared with a colocated PS shard (its updates
        queue between our operations).
        """
        last = len(self.ops) - 1
        stops = list(range(last + 1))
        if self.unit.hosts is not None:
            return stops
        for k in range(last - 1, -1, -1):
            kind, layer = self.ops[k]
            if self.quiet_end(kind, layer):
                stops[k] = stops[k + 1]
        return stops

    def chain_planned(self, i: int, j: int, ends: list[float]) -> None:
        """With ``ahead``: operations ``i`` … ``j`` will run as one chain, operation ``k``
        ending at ``ends[k - i + 1]``; the model hands over what their quiet ends produce
        (``forward_done`` is then not called again at the chain's end)."""

    def quiet_end(self, kind: int, layer: int) -> bool:
        """True if nobody needs to see this operation's end when it happens: then it may be
        chained with the next, and its ``gradients_ready`` is not called (``forward_done``
        still is, at the end of the chain). Models override; default: every end is seen."""
        return False

    def _done(self) -> None:
        """Operations ``i`` … ``_until`` ended (one, or a chain of quiet ones)."""
        self.running = False
        t, i, j = self.t, self.i, self._until
        forward = self._last_forward
        if i <= forward < j and not self.ahead:
            self.forward_done(t)
        kind, layer = self.ops[j]
        last = j + 1 == len(self.ops)
        # Advance first: a hook may poke() this worker, which must see the next operation.
        if last:
            self.t, self.i = t + 1, 0
            self._begun = False
        else:
            self.i = j + 1
        if j == forward:
            self.forward_done(t)
        elif kind == BWD:
            self.gradients_ready(layer, t)
        if last:
            self.recorder.iteration_ended(self.index, t, self._compute)
            self.backward_done(t)
        if not self.running:
            self._next()


def _ends(times: list[float], i: int, j: int, now: float) -> list[float]:
    """``now`` and the running sums of ``times[i]`` … ``times[j]`` from it: when each
    operation of a chain ends (the floats of ``accumulate(times[i:j + 1], initial=now)``)."""
    ends = [now]
    end = now
    for k in range(i, j + 1):
        end += times[k]
        ends.append(end)
    return ends


def unit_operations(
    sc: Scenario, unit: Unit, optimizer_s: float, jitter: float | None,
    rng: np.random.Generator | None,
) -> tuple[list[tuple[int, int]], OpDurations, list[str]]:
    """Operations, their (noisy) durations and labels for one unit of ``sc``.

    ``jitter`` None: the workload's per-layer forward/backward cv (0 for the optimizer and
    unattributed steps); a number: that cv for every operation.
    """
    group = unit.group
    layers = sc.workload.layers
    names = tuple(layer.name for layer in layers)
    key: tuple[object, ...] = (group.forward.tobytes(), group.backward.tobytes(),
                               group.unattributed_s, optimizer_s, jitter, names)
    if jitter is None:
        key += (tuple(layer.forward_cv for layer in layers),
                tuple(layer.backward_cv for layer in layers))
    made = _OPS_CACHE.get(key)
    if made is None:
        if jitter is None:
            fwd_cv = np.array(key[-2], dtype=float)
            bwd_cv = np.array(key[-1], dtype=float)
            other = 0.0
        else:
            fwd_cv = bwd_cv = np.full(len(layers), float(jitter))
            other = float(jitter)
        made = iteration_ops(group.forward, group.backward, group.unattributed_s, optimizer_s,
                             fwd_cv, bwd_cv, other, list(names))
        if len(_OPS_CACHE) >= 64:
            _OPS_CACHE.clear()
        _OPS_CACHE[key] = made
    ops, base, cv, labels = made
    return ops, OpDurations(base, cv, rng), labels


#: iteration_ops results by content: the workers of a group (1024 in a big ring) share them
_OPS_CACHE: dict[tuple, tuple[list[tuple[int, int]], np.ndarray, np.ndarray, list[str]]] = {}


def has_jitter(sc: Scenario, jitter: float | None) -> bool:
    """Whether any compute operation is noisy (then every worker is simulated on its own)."""
    if jitter is not None:
        return jitter > 0
    return any(layer.forward_cv > 0 or layer.backward_cv > 0 for layer in sc.workload.layers)
