"""A worker as a chain of compute operations per iteration, gated by its dependencies.

One iteration is ``[optimizer step] forward(layer 0 … L−1) [unattributed] backward(L−1 … 0)``
(the optimizer step only where the worker applies updates itself, i.e. all-reduce). The chain
runs one operation at a time on the worker's :class:`~.compute.Processor` and asks its model
(PS or ring, by overriding the hooks) before it may go on:

* ``can_start(t)``: may iteration ``t`` begin (all-reduce of ``t−1`` done, SSP bound)?
* ``layer_ready(l)``: have layer ``l``'s parameters arrived (PS pull)?

and tells it what happened: ``forward_done``, ``gradients_ready(l, t)`` after each backward
layer, ``backward_done``. When a gate is closed the chain simply stops; the model calls
:meth:`Worker.poke` when something it waits for has changed.
"""

from __future__ import annotations

import numpy as np

from ddlperf.predictors.simulate.compute import Processor
from ddlperf.predictors.simulate.engine import Engine
from ddlperf.predictors.simulate.jitter import OpDurations
from ddlperf.predictors.simulate.record import Recorder
from ddlperf.predictors.simulate.units import Unit
from ddlperf.scenario import Scenario

OPT, FWD, MISC, BWD = 0, 1, 2, 3


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
        self._last_forward = max((k for k, (kind, _) in enumerate(ops) if kind == FWD),
                                 default=-1)

    # -- hooks for the models ----------------------------------------------------------------

    def can_start(self, t: int) -> bool:
        return True

    def layer_ready(self, layer: int) -> bool:
        return True

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
            self._times = self.durations.draw()
            self._compute = 0.0
            self.recorder.iteration_started(self.unit.index, t, gate)
        kind, layer = self.ops[i]
        if kind == FWD and not self.layer_ready(layer):
            return
        self.running = True
        duration = self._times[i]
        self._compute += duration
        self.processor.submit(duration, self._done, (), self.labels[i], t)

    def _done(self) -> None:
        self.running = False
        t, i = self.t, self.i
        kind, layer = self.ops[i]
        last = i + 1 == len(self.ops)
        compute = self._compute
        # Advance first: a hook may poke() this worker, which must see the next operation.
        if last:
            self.t, self.i = t + 1, 0
            self._begun = False
        else:
            self.i = i + 1
        if i == self._last_forward:
            self.forward_done(t)
        elif kind == BWD:
            self.gradients_ready(layer, t)
        if last:
            self.recorder.iteration_ended(self.unit.index, t, compute)
            self.backward_done(t)
        if not self.running:
            self._next()


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
    if jitter is None:
        fwd_cv = np.array([layer.forward_cv for layer in layers], dtype=float)
        bwd_cv = np.array([layer.backward_cv for layer in layers], dtype=float)
        other = 0.0
    else:
        fwd_cv = bwd_cv = np.full(len(layers), float(jitter))
        other = float(jitter)
    ops, base, cv, labels = iteration_ops(
        group.forward, group.backward, group.unattributed_s, optimizer_s, fwd_cv, bwd_cv, other,
        [layer.name for layer in layers])
    return ops, OpDurations(base, cv, rng), labels


def has_jitter(sc: Scenario, jitter: float | None) -> bool:
    """Whether any compute operation is noisy (then every worker is simulated on its own)."""
    if jitter is not None:
        return jitter > 0
    return any(layer.forward_cv > 0 or layer.backward_cv > 0 for layer in sc.workload.layers)
