"""PS without overlap: a shard answers a worker's pulls once its own updates are done
(predictors/shard_release.py), in the simulator and in every analytic model."""

import numpy as np
import pytest

from ddlperf.api import predict
from ddlperf.cluster import Cluster
from ddlperf.predictors.shard_release import shard_release
from tests.conftest import make_workload

# the dev matrix's biglast: six 0.25 MB layers, a 4 MB and a 1 MB one (greedy on 3 shards:
# 4.5, 1.5 and 0.5 MB)
BIGLAST = make_workload([(0.015, 0.030, [250_000])] * 6
                        + [(0.003, 0.006, [4_000_000]), (0.001, 0.002, [1_000_000])])
# 6 MB + 6 × 1 MB: round robin on 2 shards holds 9 MB and 3 MB
IMBALANCED12 = make_workload([(0.020, 0.040, [6_000_000])] + [(0.008, 0.016, [1_000_000])] * 6)
UNIFORM8 = make_workload([(0.010, 0.020, [1_000_000])] * 8)


def cluster(workers, ps, placement="dedicated", bandwidth=2e8, ps_bandwidth=None):
    return Cluster.from_dict({
        "bandwidth": bandwidth, "latency": 5e-5, "workers": workers,
        "ps": {"count": ps, "placement": placement,
               **({"bandwidth": ps_bandwidth} if ps_bandwidth else {})},
    }, field="test")


def times(workload, c, method, **strategy):
    return predict(workload=workload, cluster=c, method=method, overlap=False,
                   **strategy).iteration_time_s


def test_a_tensor_is_released_when_every_shard_holding_it_is_done():
    holds = np.array([[True, False], [False, True], [True, True]])
    rows = [np.array([0, 2]), np.array([1, 2])]
    updates = np.array([1.0, 5.0, 2.0])
    # shard 0 is done at 2, shard 1 at 5; tensor 2 is on both
    assert shard_release(rows, holds, updates).tolist() == [2.0, 5.0, 5.0]
    points = np.stack([updates, [6.0, 1.0, 2.0]], axis=1)  # (tensors, points)
    assert shard_release(rows, holds, points).tolist() == [[2.0, 6.0], [5.0, 2.0], [5.0, 6.0]]


def test_colocated_unequal_shards_match_the_measured_run():
    # fresh24-coloc-greedy-nooverlap (dev matrix, measured 1.183 s on the emulated cluster):
    # the host of the 4.5 MB shard gets its parameters first, runs ahead, and its pushes and
    # pulls meet the others' on its NIC. Holding every pull for every shard (the models
    # before, as a step barrier does) gave 1.035 s, −12.5%
    c = cluster(3, 3, placement="colocated")
    measured = 1.1833
    for method in ("analytic", "simulate"):
        t = times(BIGLAST, c, method, sharding="greedy")
        assert t == pytest.approx(measured, rel=0.01)
        assert times(BIGLAST, c, method, sharding="greedy", step_barrier=True) < 0.9 * t


@pytest.mark.parametrize("placement", ["dedicated", "colocated"])
@pytest.mark.parametrize(("workload", "workers", "ps", "sharding"), [
    (IMBALANCED12, 1, 2, "round_robin"), (IMBALANCED12, 3, 2, "round_robin"),
    (BIGLAST, 2, 3, "greedy"), (BIGLAST, [{"count": 2}, {"count": 1, "speed": 0.6}], 2,
                                "greedy"),
    (UNIFORM8, 3, 3, "even"),
])
def test_both_methods_agree(placement, workload, workers, ps, sharding):
    if placement == "colocated" and isinstance(workers, int) and workers < ps:
        pytest.skip("colocated shards need a host each")
    c = cluster(workers, ps, placement=placement)
    analytic, simulated = (times(workload, c, m, sharding=sharding)
                           for m in ("analytic", "simulate"))
    assert analytic == pytest.approx(simulated, rel=1e-6)


@pytest.mark.parametrize("method", ["analytic", "simulate"])
def test_an_early_shard_pulls_while_the_late_one_still_takes_pushes(method):
    # one worker, shards of 9 MB and 3 MB behind fast links: the 3 MB shard's pulls cross
    # the worker's downlink while its uplink still pushes to the 9 MB shard, so the
    # iteration is shorter than with every pull held for both
    c = cluster(1, 2, ps_bandwidth=1e9)
    free = times(IMBALANCED12, c, method)
    held = times(IMBALANCED12, c, method, step_barrier=True)
    assert free < held - 0.05
    # equal shards finish together: nothing to gain
    assert times(UNIFORM8, c, method) == pytest.approx(
        times(UNIFORM8, c, method, step_barrier=True), rel=1e-9)


@pytest.mark.parametrize("method", ["analytic", "simulate"])
@pytest.mark.parametrize("sync", ["asp", "ssp"])
def test_one_worker_alone_runs_asp_and_ssp_as_bsp(method, sync):
    # nobody to wait for: every synchronisation is the same schedule, shard by shard (the
    # simulator runs SSP with 1% compute jitter where the workload has none)
    c = cluster(1, 2, ps_bandwidth=1e9)
    extra = {"staleness": 1} if sync == "ssp" else {}
    tolerance = 5e-3 if (method, sync) == ("simulate", "ssp") else 1e-9
    assert times(IMBALANCED12, c, method, sync=sync, **extra) == pytest.approx(
        times(IMBALANCED12, c, method), rel=tolerance)
