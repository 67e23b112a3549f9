"""In-session calibration of communication CPU per byte: the PS trainer's exchange between
two emulated hosts, and the DDP trainer's all-reduce, read from the ranks' CPU clocks."""

from __future__ import annotations

import pytest

from ddlperf.validate.comm_cpu import calibrate_comm_cpu, calibrate_fabric_cpu, calibrate_ring_cpu
from tests.conftest import make_workload


@pytest.mark.root
def test_the_trainers_exchange_yields_cpu_seconds_per_byte():
    # 3 tensors, 1.4 MB: each iteration the worker pushes and pulls them all
    workload = make_workload([(0.01, 0.02, [400_000, 4_000]), (0.01, 0.02, [1_000_000])])
    out = calibrate_comm_cpu(workload, 200e6, iterations=4, warmup=1)
    assert out["bytes_per_iteration"] == 2 * 1_404_000
    assert out["iterations"] == 4 and out["tensors"] == 3
    assert out["comm_cpu_s_per_byte"] == pytest.approx(
        out["cpu_s_per_iteration"] / out["bytes_per_iteration"])
    assert out["comm_cpu_s_per_byte"] > 0


@pytest.mark.root
def test_a_servers_loopback_exchange_yields_cpu_seconds_per_fabric_byte():
    # 2 GPU ranks with local aggregation: each pushes and pulls its half of the 1.4 MB over the
    # NIC, and sends and receives the other half in the reduce-scatter and the all-gather
    workload = make_workload([(0.01, 0.02, [400_000, 4_000]), (0.01, 0.02, [1_000_000])])
    out = calibrate_fabric_cpu(workload, 2, 1e9, 200e6, nic_s_per_byte=0.0, iterations=4,
                               warmup=1)
    assert out["nic_bytes_per_iteration"] == 1_404_000
    assert out["intra_bytes_per_iteration"] == 2 * 1_404_000
    assert out["iterations"] == 4 and out["gpus"] == 2
    assert out["intra_cpu_s_per_byte"] == pytest.approx(
        out["cpu_s_per_iteration"] / out["intra_bytes_per_iteration"])
    assert out["intra_cpu_s_per_byte"] > 0


@pytest.mark.root
@pytest.mark.parametrize("gpus", [1, 2], ids=["two-hosts", "one-server"])
def test_the_rings_own_exchange_yields_cpu_seconds_per_byte(gpus):
    # 2 ranks, one 1.4 MB bucket: each sends and receives 2(N-1)/N of it = 1.4 MB each way,
    # over the NIC between two hosts or over one server's loopback
    workload = make_workload([(0.01, 0.02, [400_000, 4_000]), (0.01, 0.02, [1_000_000])])
    out = calibrate_ring_cpu(workload, 200e6, gpus, 1e9 if gpus > 1 else None, iterations=4,
                             warmup=1)
    assert out["bytes_per_iteration"] == 2 * 1_404_000
    assert out["iterations"] == 4 and out["gpus"] == gpus
    assert out["s_per_byte"] == pytest.approx(
        out["cpu_s_per_iteration"] / out["bytes_per_iteration"])
    assert out["s_per_byte"] > 0
    assert ("loopback" in out["how"]) == (gpus > 1)
