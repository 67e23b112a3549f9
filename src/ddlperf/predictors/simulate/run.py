"""One simulated run: build engine, network and model, run to the last iteration, measure.

Steady-state figures come from the window between "every worker has started iteration
``warmup``" and "every worker has started iteration ``warmup + iterations``".

Breakdown per worker and measured iteration t (period p, own compute c):

* wait: time blocked on other workers. SSP: the time spent at the staleness bound. BSP and
  all-reduce: max over workers of c_t − own c_t (in a synchronous step everyone waits for the
  slowest; with jitter the slowest changes from step to step), capped at p − c. ASP: 0.
* communication: the rest of the period that is not compute, p − c − wait.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddlperf.predictors.simulate.allreduce import RingModel
from ddlperf.predictors.simulate.engine import Engine
from ddlperf.predictors.simulate.jitter import unit_generators
from ddlperf.predictors.simulate.network import Network
from ddlperf.predictors.simulate.ps import PSModel
from ddlperf.predictors.simulate.record import Recorder
from ddlperf.predictors.simulate.tracks import TrackLog
from ddlperf.predictors.simulate.units import Unit
from ddlperf.scenario import Scenario


@dataclass
class UnitMeasure:
    """Per measured iteration of one unit: period, own compute and sync wait (seconds)."""

    period: np.ndarray
    compute: np.ndarray
    wait: np.ndarray


@dataclass
class RunResult:
    units: list[Unit]
    measures: list[UnitMeasure]
    utilization: list[tuple[str, float]]  # share of the measured window each resource was busy
    events: int


def simulate_once(
    sc: Scenario, units: list[Unit], warmup: int, iterations: int, jitter: float | None,
    seed: int, replication: int, noisy: bool, log: TrackLog | None = None,
    ring_steps: str = "coalesced", starts: list[float] | None = None,
) -> RunResult:
    """Simulate ``warmup + iterations`` iterations of ``sc`` once; ``starts``: when each unit
    begins its first iteration (default: all at 0; PS only)."""
    engine = Engine()
    # Local reallocation changes rates only by rounding, which can reorder events that tie
    # exactly; ties happen between identical noiseless workers, so those runs stay exact.
    net = Network(engine, local=noisy)
    rngs = unit_generators(seed, replication, len(units)) if noisy else None
    model: PSModel | RingModel

    def warm() -> None:
        net.reset_accounting()
        model.on_warm()

    recorder = Recorder(engine, len(units), warmup, iterations, warm)
    if sc.strategy.arch == "allreduce":
        model = RingModel(sc, units, engine, net, recorder, jitter, rngs, log, ring_steps)
    else:
        model = PSModel(sc, units, engine, net, recorder, jitter, rngs, log)
    if starts is not None and isinstance(model, PSModel):
        model.start(starts)
    else:
        model.start()
    engine.run()
    if not recorder.finished:
        raise RuntimeError("simulation ended before every worker finished (deadlock)")
    span = recorder.end_at - recorder.warm_at
    utilization = model.utilization(span) if span > 0 else []
    rule = _wait_rule(sc)
    return RunResult(units, measure(recorder, warmup, rule), utilization, net.flows_completed)


def _wait_rule(sc: Scenario) -> str:
    if sc.strategy.arch == "allreduce" or sc.strategy.effective_sync == "bsp":
        return "slowest"
    return "gate" if sc.strategy.sync == "ssp" else "none"


def measure(recorder: Recorder, warmup: int, rule: str) -> list[UnitMeasure]:
    """Per-unit periods, compute and wait over the measured window (see module docstring)."""
    periods, computes, gates = [], [], []
    for starts, compute, gate in zip(recorder.starts, recorder.compute, recorder.gate):
        p = np.diff(np.asarray(starts[warmup:], dtype=float))
        n = len(p)
        periods.append(p)
        computes.append(np.asarray(compute[warmup:warmup + n], dtype=float))
        gates.append(np.array([gate.get(t, 0.0) for t in range(warmup + 1, warmup + 1 + n)]))
    out = []
    if rule == "slowest":
        n = min(len(p) for p in periods)
        slowest = np.max([c[:n] for c in computes], axis=0)
        for p, c in zip(periods, computes):
            wait = np.clip(slowest - c[:n], 0.0, np.maximum(p[:n] - c[:n], 0.0))
            out.append(UnitMeasure(p[:n], c[:n], wait))
    else:
        for p, c, g in zip(periods, computes, gates):
            wait = np.minimum(g, p - c) if rule == "gate" else np.zeros_like(p)
            out.append(UnitMeasure(p, c, np.maximum(wait, 0.0)))
    return out
