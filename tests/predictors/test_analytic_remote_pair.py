"""ASP's remote pair: the two remote workers of a host holding every shard run in lockstep
(BSP's schedule of the two alone with the shards), as the simulator starts them."""

from __future__ import annotations

import pytest

from ddlperf.api import predict
from ddlperf.api import scenario as api_scenario
from ddlperf.predictors.analytic_colocated import colocated_view
from ddlperf.predictors.analytic_ps_async import remote_pair
from tests.conftest import make_workload

WL = make_workload([(0.01, 0.02, [1_000_000])] * 8)


def _view(**kw):
    return colocated_view(api_scenario(workload=WL, sync="asp", bandwidth="200Mbps", **kw))


@pytest.mark.parametrize("kw,found", [
    (dict(workers=3, ps=1, placement="colocated"), True),  # w1, w2 share w0's NIC
    (dict(workers=2, ps=1), False),  # a dedicated shard: such a pair parts
    (dict(workers=3, ps=1), False),
    (dict(workers=4, ps=1, placement="colocated"), False),  # three remote workers
    (dict(workers=3, ps=2, placement="colocated"), False),  # shards on two hosts
    (dict(workers=2, ps=1, placement="colocated"), False),  # one remote worker
])
def test_the_pair_is_found_only_on_a_host_holding_every_shard(kw, found):
    assert (remote_pair(_view(**kw)) is not None) is found


def test_a_pair_of_different_workers_is_not_one():
    cluster = {"bandwidth": 200e6, "ps": {"count": 1, "placement": "colocated"},
               "workers": [{"name": "h", "count": 1}, {"name": "a", "count": 1},
                           {"name": "b", "count": 1, "speed": 0.5}]}
    sc = colocated_view(api_scenario(workload=WL, sync="asp", cluster=cluster))
    assert remote_pair(sc) is None


@pytest.mark.parametrize("bandwidth", ["100Mbps", "200Mbps", "1Gbps"])
def test_analytic_gives_the_pair_the_simulators_lockstep_period(bandwidth):
    kw = dict(workload=WL, workers=3, ps=1, placement="colocated", sync="asp",
              bandwidth=bandwidth)
    analytic = predict(method="analytic", **kw)
    simulate = predict(method="simulate", iterations=20, warmup=3, **kw)
    a = {w.name: w.iteration_time_s for w in analytic.workers}
    s = {w.name: w.iteration_time_s for w in simulate.workers}
    assert a["w1"] == pytest.approx(s["w1"], rel=1e-6)
    assert a["w2"] == pytest.approx(a["w1"], rel=1e-12)
    assert a["w0"] < a["w1"]  # the shard's own host computes alone, at its own pace
    bsp = predict(workload=WL, workers=2, ps=1, bandwidth=bandwidth, method="analytic")
    assert a["w1"] == pytest.approx(bsp.iteration_time_s, rel=1e-9)
