"""What a run records: SSP holds told ahead of their time count only if the run gets there."""

from __future__ import annotations

from ddlperf.predictors.simulate.engine import Engine
from ddlperf.predictors.simulate.record import Recorder


def test_holds_told_ahead_count_once_their_time_comes_before_the_end() -> None:
    engine = Engine()
    rec = Recorder(engine, 1, warmup=0, iterations=2, on_warm=lambda: None)
    rec.iteration_started(0, 0, 0.0)
    rec.held(0, 1, 0.25)  # now
    rec.held(0, 1, 0.5, at=2.0)  # a longer hold of version 1, told ahead: counts
    rec.held(0, 2, 0.75, at=2.5)  # counts
    rec.held(0, 2, 1.0, at=7.0)  # after the run's end: never happened
    engine.at(3.0, rec.iteration_started, 0, 1, 0.0)
    engine.at(4.0, rec.iteration_started, 0, 2, 0.0)  # the last start: the run ends
    engine.run()
    assert rec.finished and rec.end_at == 4.0
    assert rec.gate[0] == {1: 0.5, 2: 0.75}


def test_many_holds_told_ahead_are_recorded_as_their_times_pass() -> None:
    engine = Engine()
    rec = Recorder(engine, 1, warmup=0, iterations=1, on_warm=lambda: None)
    rec.iteration_started(0, 0, 0.0)
    for k in range(3000):  # more than are kept waiting: the past ones go in on the way
        engine.at(k * 1e-3, rec.held, 0, 1 + k % 3, k * 1e-6, k * 1e-3 + 0.5)
    engine.at(10.0, rec.iteration_started, 0, 1, 0.0)
    engine.run()
    assert rec.gate[0] == {1 + k: max(j * 1e-6 for j in range(k, 3000, 3)) for k in range(3)}
