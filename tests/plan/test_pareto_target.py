"""The incremental Pareto front and the target's measures."""

from __future__ import annotations

import itertools
import random

import pytest

from ddlperf.errors import InputError
from ddlperf.plan.pareto import Front
from ddlperf.plan.target import Target


def test_front_equals_the_brute_force_front():
    rng = random.Random(3)
    points = [(rng.choice(range(20)), rng.choice(range(20))) for _ in range(300)]
    front = Front()
    for cost, speed in points:
        front.add(cost, speed, lambda c=cost, s=speed: {"c": c, "s": s})
    kept = [(r["c"], r["s"]) for r in front.rows()]
    brute = sorted({p for p in points
                    if not any(q[0] <= p[0] and q[1] >= p[1] and q != p for q in points)})
    assert kept == brute
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in itertools.pairwise(kept))


def test_target_measures():
    t = Target(deadline_s=7200, samples=3.6e6, budget=10)
    m = t.measures({"throughput_samples_per_s": 1000, "price_per_hour": 4})
    assert m == {"meets": True, "job_s": 3600, "cost": 4.0, "within_budget": True}
    m = t.measures({"throughput_samples_per_s": 1000, "price_per_hour": 40})
    assert m["meets"] is False and m["within_budget"] is False


@pytest.mark.parametrize("kwargs", [{}, {"throughput": 1, "deadline_s": 1, "samples": 1},
                                    {"deadline_s": 10}, {"throughput": -1},
                                    {"throughput": 5, "budget": 0}])
def test_bad_targets(kwargs):
    with pytest.raises(InputError):
        Target(**kwargs)
