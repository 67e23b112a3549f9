"""The critical path read back from the simulator's timeline: it spans exactly one iteration
and goes through the operations that set its length."""

from __future__ import annotations

import pytest

from ddlperf.explain import explain

FEW = {"iterations": 4, "warmup": 2}


def _path(**scenario):
    e = explain("simulate", what_ifs=False, **FEW, **scenario)
    return e, e.critical_path


def _covers_one_iteration(e, path):
    total = sum(s["duration_s"] for s in path["segments"])
    assert total == pytest.approx(path["length_s"], rel=1e-9)
    starts = [s["start_s"] for s in path["segments"]]
    assert starts == sorted(starts) and starts[0] == 0.0
    # deterministic: every iteration is the steady-state period
    assert path["length_s"] == pytest.approx(e.prediction.iteration_time_s, rel=1e-9)


def test_network_bound_ps_path_runs_through_the_shard_links():
    e, path = _path(model="resnet50", workers=16, ps=2, bandwidth="10Gbps")
    _covers_one_iteration(e, path)
    kinds = path["by_kind_s"]
    assert kinds["push"] + kinds["pull"] > 0.5 * path["length_s"]
    assert {"compute", "push", "update", "pull", "latency"} <= set(kinds)
    pushes = [s for s in path["segments"] if s["kind"] == "push"]
    assert all(s["where"].endswith(("ps0", "ps1")) for s in pushes)


def test_compute_bound_path_is_compute():
    e, path = _path(model="resnet50", workers=2, ps=2, bandwidth="400Gbps")
    _covers_one_iteration(e, path)
    assert path["by_kind_s"]["compute"] > 0.9 * path["length_s"]


def test_ring_path_is_backward_then_buckets():
    e, path = _path(model="resnet50", workers=8, arch="allreduce", bandwidth="10Gbps")
    _covers_one_iteration(e, path)
    kinds = [s["kind"] for s in path["segments"]]
    assert kinds[0] == "compute" and "all-reduce" in kinds
    assert set(path["by_kind_s"]) <= {"compute", "all-reduce"}


def test_local_aggregation_path_crosses_the_fabric_and_the_nic():
    e, path = _path(model="resnet50", workers=8, gpus_per_node=4, intra="PCIe3", ps=2,
                    local_aggregation=True)
    _covers_one_iteration(e, path)
    wheres = " ".join(s["where"] for s in path["segments"])
    assert "intra reduce-scatter" in wheres and "intra all-gather" in wheres
    assert "→ ps" in wheres
    assert "wait" not in path["by_kind_s"]  # every gap is a message's latency


def test_ssp_straggler_path_is_explained_with_jitter():
    cluster = {"workers": [{"name": "fast", "count": 2}, {"name": "slow", "count": 1,
                                                          "speed": 0.5}], "ps": 1}
    e, path = _path(model="resnet18", cluster=cluster, sync="ssp", staleness=1, jitter=0.02,
                    seed=3)
    total = sum(s["duration_s"] for s in path["segments"])
    assert total == pytest.approx(path["length_s"], rel=1e-9)
    assert path["worker"] == max(e.prediction.workers, key=lambda w: w.iteration_time_s).name


def test_analytic_has_no_critical_path():
    e = explain("analytic", what_ifs=False, model="resnet50", workers=4)
    assert e.critical_path is None
