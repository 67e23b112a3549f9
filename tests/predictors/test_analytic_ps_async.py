"""ASP's one-worker cycle, cached per workload by the content of the one-worker scenario."""

from dataclasses import replace

import pytest

from ddlperf.api import make_cluster, make_strategy, make_workload, predict
from ddlperf.predictors import analytic_ps_async
from ddlperf.predictors.analytic_ps_async import alone_cycle
from ddlperf.predictors.analytic_ps_bsp import ps_bsp
from ddlperf.scenario import resolve


@pytest.fixture
def workload():
    """The process's resnet18 (zoo workloads are built once), its cycles forgotten."""
    model = make_workload("resnet18")
    model.derived_cache.pop("alone_cycles", None)
    return model


def _solo_period(sc):
    group = sc.groups[0]
    return ps_bsp(replace(sc, groups=(replace(group, count=1, first=0),)))[1]


def test_worker_counts_share_one_cycle_and_rates_do_not(workload, monkeypatch):
    computed = []
    real = analytic_ps_async.ps_bsp
    monkeypatch.setattr(analytic_ps_async, "ps_bsp",
                        lambda sc: computed.append(sc) or real(sc))
    strategy = make_strategy(sync="asp")
    cycles = {}
    for bandwidth in (1e9, 1e10):
        for workers in (3, 5, 9):
            sc = resolve(workload, make_cluster(workers=workers, ps=4, bandwidth=bandwidth),
                         strategy)
            cycles[bandwidth, workers] = alone_cycle(sc, sc.groups[0])
            assert cycles[bandwidth, workers] == _solo_period(sc)
    assert len(computed) == 2  # one per link rate, whatever the worker count
    assert cycles[1e9, 3] != cycles[1e10, 3]


def test_sharding_and_overlap_are_part_of_the_cycle(workload):
    cycles = set()
    for sharding in ("round_robin", "greedy"):
        for overlap in (True, False):
            sc = resolve(workload, make_cluster(workers=2, ps=3, bandwidth=1e9),
                         make_strategy(sync="asp", sharding=sharding, overlap=overlap))
            cycle = alone_cycle(sc, sc.groups[0])
            assert cycle == _solo_period(sc)
            cycles.add(cycle)
    assert len(cycles) == 4


def test_the_cache_starts_again_when_full(workload, monkeypatch):
    monkeypatch.setattr(analytic_ps_async, "MAX_ALONE_CYCLES", 2)
    for bandwidth in (1e9, 2e9, 3e9):
        sc = resolve(workload, make_cluster(workers=2, ps=2, bandwidth=bandwidth),
                     make_strategy(sync="asp"))
        assert alone_cycle(sc, sc.groups[0]) == _solo_period(sc)
    assert len(workload.derived_cache["alone_cycles"]) == 1


def test_ssp_holds_a_host_of_every_shard_alone_and_keeps_the_others_apart():
    """Identical workers, one host holding every shard: SSP holds only the host (its traffic
    is local), so everyone runs at the remote workers' ASP period, not BSP's schedule."""
    from tests.conftest import make_workload

    w = make_workload([(0.015, 0.03, [250_000])] * 6 + [(0.003, 0.006, [4_000_000])])
    kw = dict(workload=w, workers=4, ps=1, placement="colocated", bandwidth="300Mbps")
    ssp = predict(sync="ssp", staleness=3, method="analytic", **kw)
    asp = predict(sync="asp", method="analytic", **kw)
    bsp = predict(sync="bsp", method="analytic", **kw)
    remote = [w.iteration_time_s for w in asp.workers[1:]]
    assert [w.iteration_time_s for w in ssp.workers] == pytest.approx(
        [ssp.iteration_time_s] * 4, rel=1e-5)
    assert ssp.iteration_time_s == pytest.approx(max(remote), rel=1e-6)
    assert ssp.iteration_time_s < 0.8 * bsp.iteration_time_s
    assert ssp.workers[0].wait_s > 0.1 and ssp.workers[1].wait_s == 0.0


def _toy(tmp_path, layers=8):
    import json

    path = tmp_path / "toy.json"
    path.write_text(json.dumps({
        "format": "ddlperf.workload/1", "name": "toy", "batch_size": 32, "device": "V100",
        "layers": [{"name": f"l{k}", "forward_s": 0.01, "backward_s": 0.02,
                    "tensors": [{"name": f"l{k}.w", "bytes": 1_000_000}]}
                   for k in range(layers)]}))
    return str(path)


def test_asp_on_dedicated_shards_at_one_rate_takes_lockstep_where_the_network_is_slower(
        tmp_path):
    """Two workers on two dedicated shards: the network put ASP 12% above BSP, the simulator
    (and four measured rows, fresh17-*) at BSP's period."""
    kw = {"workload": _toy(tmp_path), "workers": 2, "ps": 2, "bandwidth": "50Mbps"}
    asp = predict(sync="asp", **kw)
    bsp = predict(sync="bsp", **kw)
    assert asp.iteration_time_s == pytest.approx(bsp.iteration_time_s, rel=1e-12)
    assert asp.iteration_time_s == pytest.approx(
        predict(sync="asp", method="simulate", **kw).iteration_time_s, rel=0.01)
    assert asp.arrangement is None  # lockstep is the prediction itself


def test_asp_of_workers_at_two_speeds_pins_the_slowest_at_lockstep_where_the_network_is_slower(
        tmp_path):
    """One of two workers at 0.7 speed on two dedicated shards: the network put ASP 13% above
    BSP (and above SSP with any staleness). The simulator's slow worker ends at BSP's period
    and the fast one a little faster, as the measured row fresh20-asp-2w-2s-slow07-50m did
    (1.861 and 1.803 s against BSP's 1.845 s): the slowest at BSP's period, the fast one
    faster in the network's proportion."""
    cluster = {"workers": [{"name": "fast", "count": 1}, {"name": "slow", "speed": 0.7}],
               "bandwidth": "50Mbps", "ps": 2}
    kw = {"workload": _toy(tmp_path), "cluster": cluster}
    asp = predict(sync="asp", **kw)
    bsp = predict(sync="bsp", **kw)
    fast, slow = asp.workers
    assert slow.iteration_time_s == pytest.approx(bsp.iteration_time_s, rel=1e-12)
    assert fast.iteration_time_s < slow.iteration_time_s
    assert asp.iteration_time_s < bsp.iteration_time_s
    assert asp.iteration_time_s <= predict(sync="ssp", staleness=3, **kw).iteration_time_s
    # nobody waits at a barrier under ASP
    assert fast.wait_s == 0.0 and slow.wait_s == 0.0
    assert bsp.workers[0].wait_s > 0.05
    simulated = predict(sync="asp", method="simulate", **kw)
    assert asp.iteration_time_s == pytest.approx(simulated.iteration_time_s, rel=0.01)
    for mine, theirs in zip(asp.workers, simulated.workers):
        assert mine.iteration_time_s == pytest.approx(theirs.iteration_time_s, rel=0.02)


def test_asp_of_workers_at_two_speeds_keeps_the_network_below_lockstep(tmp_path):
    """Where the network puts some worker below BSP's period (a fast PS link, four workers on
    one shard), ASP keeps the network's rates: the fast workers do not wait for the slow."""
    cluster = {"workers": [{"name": "fast", "count": 3}, {"name": "slow", "speed": 0.5}],
               "bandwidth": "1Gbps", "ps": 1}
    kw = {"workload": _toy(tmp_path), "cluster": cluster}
    asp = predict(sync="asp", **kw)
    bsp = predict(sync="bsp", **kw)
    assert asp.iteration_time_s < bsp.iteration_time_s
    assert min(w.iteration_time_s for w in asp.workers) < bsp.iteration_time_s


def test_asp_with_colocated_shards_keeps_the_network_above_lockstep(tmp_path):
    """A host's NIC carries its worker's pull and the others' pushes to its shard: the
    simulator's ASP runs far above BSP's schedule there, and so does the network's."""
    kw = {"workload": _toy(tmp_path), "workers": 2, "ps": 2, "bandwidth": "50Mbps",
          "placement": "colocated", "overlap": False}
    asp = predict(sync="asp", **kw).iteration_time_s
    bsp = predict(sync="bsp", **kw).iteration_time_s
    simulated = predict(sync="asp", method="simulate", **kw).iteration_time_s
    assert asp > 1.2 * bsp and simulated > 1.2 * bsp
    assert asp == pytest.approx(simulated, rel=0.05)
