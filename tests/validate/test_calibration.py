"""In-session calibration: the step timers' two ways of running beside each other."""

from __future__ import annotations

import pytest

from ddlperf.validate.calibration import (
    _timed_lockstep,
    _timer_argv,
    synchronous,
)
from ddlperf.validate.plan import plan_matrix
from tests.validate.helpers import write


def test_lockstep_timers_take_every_step_together():
    # mobilenet_v2 at batch 1: ~0.1 s a step; every step starts on both at once, so both
    # count the same steps (a free-running pair would not).
    argv = _timer_argv("mobilenet_v2", 1, 0.2, 0.6, lockstep=True)
    first, second = _timed_lockstep([argv, argv], 0.2, 0.6, timeout=120)
    assert len(first["durations"]) == len(second["durations"]) >= 2
    assert first["median"] > 0 and second["median"] > 0


@pytest.mark.parametrize(("strategy", "expected"), [
    ("arch: ps, sync: bsp", True), ("arch: ps, sync: ssp, staleness: 2", True),
    ("arch: allreduce", True), ("arch: ps, sync: asp", False)])
def test_quota_timing_follows_the_runs_synchronization(tmp_path, strategy, expected):
    # the workers of a synchronous run wait for the quota'd one every iteration
    text = ("scenarios:\n  - {name: s, model: mobilenet_v2, batch_size: 4, compute: real, "
            f"workers: 2, {strategy}, cpu_quota: {{w1: 0.5}}}}\n")
    plan = plan_matrix(write(tmp_path, text))[1][0]
    assert synchronous(plan) is expected
