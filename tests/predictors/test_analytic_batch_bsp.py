"""The batched BSP period equals the per-point model's, rows whose worker's link holds its
shard connections (the shared-link event loop per point, inside the batch) included."""

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlperf.api import make_cluster, make_strategy, make_workload
from ddlperf.predictors.analytic_batch import batch_key
from ddlperf.predictors.analytic_batch_bsp import Points, batch_layout, binding, bsp_period
from ddlperf.predictors.analytic_ps_bsp import connections_bind, ps_bsp
from ddlperf.scenario import resolve
from tests.conftest import make_workload as toy_workload


def point_scenario(template, row):
    """``template`` with the worker count and numbers of one batch row: the scenario the
    point stands for, as far as the BSP period goes (the per-point reference)."""
    n, gup, gdown, sup, sdown, supd, alpha = (float(v) for v in row)
    group = replace(template.groups[0], count=int(n), up=gup, down=gdown)
    shards = tuple(replace(s, up=sup, down=sdown, update_s_per_byte=supd)
                   for s in template.shards)
    return replace(template, groups=(group,), shards=shards, latency_s=alpha)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 64), st.integers(2, 6),
       st.lists(st.floats(1e7, 1e11), min_size=4, max_size=4))
def test_binding_equals_the_per_point_rule(n, shards, rates):
    # the rows whose worker's shard connections share its link are exactly those where the
    # per-point model runs the shared-link loop (analytic_ps_bsp.connections_bind), per
    # direction; ties do not bind
    w = toy_workload([(0.01, 0.02, [1_000_000]), (0.01, 0.02, [2_000_000])])
    sc = resolve(w, make_cluster(workers=2, ps=shards, bandwidth="1Gbps"),
                 make_strategy("ps", "bsp"))
    gup, gdown, sup, sdown = (r / 8 for r in rates)
    tie = n * gup / shards  # shard rate at which the push shares add up to the uplink
    rows = np.array([[n, gup, gdown, sup, sdown, 0.0, 0.0],
                     [n, gup, gup, tie, tie, 0.0, 0.0]])
    push, pull = binding(shards, Points(*rows.T.copy()))
    expected = [connections_bind(point_scenario(sc, row)) for row in rows]
    assert list(zip(push.tolist(), pull.tolist())) == expected


def _rows(sc, workers, rates):
    """One row per (worker count, rate): every link at the rate, 5 us, a PS update cost."""
    return np.array([[n, r, r, r * ratio, r * ratio, 1e-10, 5e-6]
                     for n in workers for r in rates for ratio in (1.0, 0.5, 4.0)])


@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("sharding", ["round_robin", "greedy", "even"])
@pytest.mark.parametrize("shards", [2, 3, 8])
def test_binding_rows_batched_equal_the_per_point_model(overlap, sharding, shards):
    # fewer workers than shards (and one worker, as ASP's cycle needs): the worker's link
    # binds in one or both directions; the batch runs the same loop per row
    sc = resolve(make_workload("resnet18"), make_cluster(workers=2, ps=shards, bandwidth=1e9),
                 make_strategy(sync="bsp", sharding=sharding, overlap=overlap))
    assert batch_key(sc) is not None
    lay = batch_layout(sc)
    assert lay is not None
    rows = _rows(sc, (1, 2, shards - 1, shards + 3), (1e8, 1.25e9, 2.5e10))
    push, pull = binding(shards, Points(*rows.T.copy()))
    assert push.any() and pull.any() and not (push & pull).all()
    periods = bsp_period(sc, lay, Points(*rows.T.copy()))
    for row, period in zip(rows, periods.tolist()):
        expected = ps_bsp(point_scenario(sc, row))[1]
        assert math.isclose(period, expected, rel_tol=1e-12), row
