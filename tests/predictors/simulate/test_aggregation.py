"""Local aggregation on servers, simulated (aggregation.py), against a hand computation."""

import pytest

from ddlperf.api import predict
from tests.conftest import make_workload

GOODPUT = 1448 / 1514


@pytest.mark.parametrize("method", ["analytic", "simulate"])
def test_one_tensor_by_hand(method):
    # 2 servers × 4 GPUs, one 8 MB tensor, fabric 1 GB/s, NICs 1 Gbps, PS NIC 100 Gbps,
    # α = 10 µs, no update cost. Per iteration, one after the other:
    #   pull: each GPU its 2 MB slice at a quarter of the NIC, + α
    #   all-gather: 3 × 2 MB over the fabric, + 3α; forward 1 ms, backward 2 ms
    #   reduce-scatter: 3 × 2 MB over the fabric, + 3α; push: as the pull, + α
    w = make_workload([(0.001, 0.002, [8_000_000])])
    nic = 1e9 * GOODPUT / 8
    transfer = 2e6 / (nic / 4) + 10e-6
    inside = 6e6 / 1e9 + 30e-6
    expected = 2 * (transfer + inside) + 0.003
    p = predict(workload=w, method=method, workers=8, gpus_per_node=4, intra="1GB/s",
                bandwidth="1Gbps", latency="10us", local_aggregation=True,
                cluster={"ps": {"count": 1, "bandwidth": "100Gbps"}}, ps=1)
    assert p.iteration_time_s == pytest.approx(expected, rel=1e-9)
    assert p.breakdown_s["communication_intra"] > 0


def test_jittered_gpus_wait_for_their_server_before_reducing():
    # each GPU draws its own compute; a server reduces a tensor only when all its GPUs have it,
    # so the whole cluster still moves in step and every GPU waits for the slowest
    w = make_workload([(0.002, 0.004, [1_000_000])] * 4)
    kw = dict(workload=w, method="simulate", workers=8, gpus_per_node=4, intra="PCIe3",
              bandwidth="10Gbps", local_aggregation=True, ps=2, iterations=20)
    calm = predict(**kw)
    noisy = predict(**kw, jitter=0.2)
    assert noisy.iteration_time_s > calm.iteration_time_s
    periods = [wr.iteration_time_s for wr in noisy.workers]
    assert max(periods) == pytest.approx(min(periods), rel=0.02)  # BSP: one pace for all
    assert noisy.breakdown_s["wait"] > 0
