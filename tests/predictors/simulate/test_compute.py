"""Compute streams: booking a job ahead of its arrival gives the times of submitting it then."""

from __future__ import annotations

import numpy as np

from ddlperf.predictors.simulate.compute import Processor
from ddlperf.predictors.simulate.engine import Engine


def _jobs(seed: int) -> list[tuple[float, float]]:
    """(arrival, duration) pairs in arrival order: bursts that queue, gaps that idle, ties."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.choice([0.0, 0.1, 1.0, 3.0], size=40) * rng.random(40))
    return [(float(a), float(d)) for a, d in zip(arrivals, rng.random(40) * 2.0)]


def _submitted(jobs: list[tuple[float, float]]) -> tuple[list[float], list]:
    eng = Engine()
    log: list = []
    proc = Processor(eng, "p", log)
    ends: list[float] = []
    for k, (arrival, duration) in enumerate(jobs):
        eng.at(arrival, proc.submit, duration, lambda: ends.append(eng.now), (), f"j{k}", k)
    eng.run()
    return ends, log


def _reserved(jobs: list[tuple[float, float]], lead: float) -> tuple[list[float], list]:
    """Each job booked ``lead`` seconds before it arrives (as a connection tells a shard)."""
    eng = Engine()
    log: list = []
    proc = Processor(eng, "p", log)
    ends: list[float] = []
    for k, (arrival, duration) in enumerate(jobs):
        eng.at(max(arrival - lead, 0.0), proc.reserve, arrival, duration,
               lambda: ends.append(eng.now), (), f"j{k}", k)
    eng.run()
    return ends, log


def test_reserve_gives_the_times_of_a_submission_at_the_arrival() -> None:
    for seed in range(5):
        jobs = _jobs(seed)
        ends, log = _submitted(jobs)
        assert any(start > arrival for (arrival, _), (_, start, _, _) in zip(jobs, log))  # queued
        for lead in (0.0, 0.05, 0.5):
            got_ends, got_log = _reserved(jobs, lead)
            assert got_ends == ends  # same floats, same FIFO order
            assert got_log == log


def test_reserved_jobs_run_back_to_back_from_their_arrival() -> None:
    eng = Engine()
    proc = Processor(eng, "p", [])
    ends: list[float] = []
    for arrival, duration in ((1.0, 2.0), (1.5, 1.0), (10.0, 0.5)):
        proc.reserve(arrival, duration, lambda: ends.append(eng.now), ())
    eng.run()
    assert ends == [3.0, 4.0, 10.5]
    assert [(start, end) for _, start, end, _ in proc.log] == [(1.0, 3.0), (3.0, 4.0),
                                                                (10.0, 10.5)]
