"""Plans: defaults, --only, fingerprints, bad scenarios named, and the repository matrices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddlperf.errors import InputError
from ddlperf.validate import merged_params, plan_matrix
from tests.validate.helpers import MINIMAL, error_of, write

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_are_inherited_and_a_scenario_source_replaces_the_defaults(
        tmp_path: Path) -> None:
    matrix, plans = plan_matrix(write(tmp_path, MINIMAL))
    a, b = plans
    assert [p.name for p in plans] == ["a", "b"]
    assert a.iterations == 4 and a.warmup == 2 and a.compute == "emulated"
    assert a.workload.parameter_bytes == 1_000_000 and a.cluster.ps.count == 1
    assert a.cluster.bandwidth == 200e6 and a.cluster.latency == pytest.approx(50e-6)
    assert b.workload.name == "mobilenet_v2" and b.workload.batch_size == 8
    assert b.strategy.arch == "allreduce" and b.cluster.ps.count == 0
    params = merged_params(matrix, matrix.scenarios[1])
    assert "synthetic" not in params and params["model"] == "mobilenet_v2"


def test_a_scenario_with_its_own_cluster_does_not_inherit_worker_counts(tmp_path: Path) -> None:
    text = MINIMAL.replace("  iterations: 4\n", "  iterations: 4\n  workers: 4\n") + """
  - name: c
    cluster:
      workers: [{count: 2}, {name: slow, count: 1, speed: 0.5}]
      ps: 1
"""
    _m, plans = plan_matrix(write(tmp_path, text))
    c = plans[-1]
    assert c.cluster.worker_count == 3 and c.cluster.workers[1].speed == 0.5
    assert c.cluster.bandwidth == 200e6  # the defaults' rate still applies
    assert plans[0].cluster.worker_count == 2  # the scenario's own count wins


def test_a_scenario_cluster_keeps_its_own_bandwidth_over_the_defaults(tmp_path: Path) -> None:
    text = MINIMAL + """
  - name: c
    cluster:
      bandwidth: 100Mbps
      workers: [{count: 2}]
      ps: {count: 1, bandwidth: 400Mbps}
"""
    _m, plans = plan_matrix(write(tmp_path, text))
    c = plans[-1].cluster
    assert c.bandwidth == 100e6 and c.ps_up() == 400e6


def test_only_selects_and_unknown_names_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL)
    _m, plans = plan_matrix(path, ["b"])
    assert [p.name for p in plans] == ["b"] and plans[0].index == 1
    with pytest.raises(InputError, match=r"--only.*no scenario named 'bb'"):
        plan_matrix(path, ["bb"])


def test_fingerprint_is_stable_and_follows_the_parameters(tmp_path: Path) -> None:
    first = plan_matrix(write(tmp_path, MINIMAL))[1]
    again = plan_matrix(write(tmp_path, MINIMAL, "n.yaml"))[1]
    changed = plan_matrix(write(tmp_path, MINIMAL.replace("iterations: 4", "iterations: 5"),
                                "o.yaml"))[1]
    assert first[0].fingerprint == again[0].fingerprint
    assert first[0].fingerprint != changed[0].fingerprint


@pytest.mark.parametrize("scenario,needles", [
    ("{name: s, model: resnet5}", ["scenario 's'", "resnet5"]),
    ("{name: s}", ["exactly one of model, workload or synthetic"]),
    ("{name: s, model: mobilenet_v2, synthetic: {layers: [{forward_ms: 1, backward_ms: 1, "
     "tensor_mb: 1}]}}", ["exactly one", "model, synthetic"]),
    ("{name: s, model: mobilenet_v2, bandwidth: 10Gbps}",
     ["scenario 's'", "bandwidth", "more than this machine can drive", "use at most"]),
    ("{name: s, model: mobilenet_v2, cluster: {workers: [{count: 2, uplink: 5Gbps}]}}",
     ["more than this machine can drive", "uplink"]),
    ("{name: s, model: mobilenet_v2, workers: 3, compute: real}",
     ["real compute with 3 workers"]),
    ("{name: s, synthetic: {layers: [{forward_ms: 1, backward_ms: 1, tensor_mb: 1}]}, "
     "compute: real}", ["real compute needs a zoo model"]),
    ("{name: s, model: mobilenet_v2, cpu_quota: {w1: 0.5}}",
     ["cpu_quota", "only slows real compute"]),
    ("{name: s, model: mobilenet_v2, compute: real, cpu_quota: {ps0: 0.5}}",
     ["cpu_quota", "not a worker host"]),
    ("{name: s, model: mobilenet_v2, compute: real, cpu_quota: {w7: 0.5}}",
     ["no worker w7"]),
    ("{name: s, model: mobilenet_v2, compute: real, cpu_quota: {w1: 0.01}}",
     ["between 0.1 and 1"]),
    ("{name: s, model: mobilenet_v2, compute: real, local_aggregation: true, cluster: "
     "{nodes: {count: 1, gpus: 2, intra: 1Gbps}, ps: 1}, cpu_quota: {node0: 0.7}}",
     ["cpu_quota", "'node0' is not a GPU rank of a server", "node0/gpu0 … node0/gpu1"]),
    ("{name: s, model: mobilenet_v2, compute: real, cluster: "
     "{nodes: {count: 1, gpus: 2, intra: 1Gbps}, ps: 1}, cpu_quota: {node0/gpu2: 0.7}}",
     ["no worker node0/gpu2"]),
    ("{name: s, model: mobilenet_v2, compute: real, cluster: {nodes: {count: 1, gpus: 2, "
     "intra: 1Gbps}, ps: 1}, cpu_quota: {node0/gpu0: 0.7, node0/gpu1: 0.6}}",
     ["the GPUs of node0 have different quotas", "node0/gpu0, node0/gpu1"]),
    ("{name: s, model: mobilenet_v2, compute: real, cluster: {nodes: {count: 1, gpus: 2, "
     "intra: 1Gbps}, ps: 1}, cpu_quota: {node0/gpu1: 0.7}}",
     ["the GPUs of node0 have different quotas"]),
    ("{name: s, model: mobilenet_v2, compute: real, device: A100}", ["device", "this CPU"]),
    ("{name: s, model: mobilenet_v2, arch: allreduce, ps: 1}", ["no parameter servers"]),
    ("{name: s, model: mobilenet_v2, sync: ssp}", ["staleness"]),
    ("{name: s, workload: missing.json}", ["missing.json", "does not exist"]),
    ("{name: s, synthetic: {layers: [{forward_ms: 1, backward_ms: 1}]}}", ["no layer owns"]),
])
def test_bad_scenarios_are_one_line_naming_the_scenario(tmp_path: Path, scenario: str,
                                                        needles: list[str]) -> None:
    message = error_of(tmp_path, f"scenarios:\n  - {scenario}\n")
    assert message.startswith("m.yaml: scenario 's'"), message
    for needle in needles:
        assert needle in message, message


def test_workload_files_are_read_relative_to_the_matrix(tmp_path: Path) -> None:
    (tmp_path / "w.json").write_text(json.dumps({
        "format": "ddlperf.workload/1", "name": "w", "batch_size": 8,
        "layers": [{"name": "l", "forward_s": 0.01, "backward_s": 0.02,
                    "tensors": [{"name": "l.w", "bytes": 2_000_000}]}]}))
    _m, plans = plan_matrix(write(tmp_path, "scenarios:\n  - {name: s, workload: w.json}\n"))
    assert plans[0].workload.parameter_bytes == 2_000_000


def test_the_repository_matrices_are_valid_and_within_the_machine() -> None:
    """Dev matrix: ≥ 12 scenarios, 50–500 Mbit, 1–20 MB models, ≤ 2 real workers, and the
    issue's coverage (PS BSP/ASP/SSP, 1–3 shards, 2–4 PS workers, round-robin vs greedy,
    2–5 ring workers, both kinds of heterogeneity, real and emulated compute)."""
    _m, plans = plan_matrix(ROOT / "scenarios" / "dev_matrix.yaml")
    assert len(plans) >= 12
    for plan in plans:
        c = plan.cluster
        rates = [c.worker_up(g) for g in c.workers] + [c.worker_down(g) for g in c.workers]
        assert all(50e6 <= r <= 500e6 for r in rates), plan.name
        assert 1e6 <= plan.workload.parameter_bytes <= 20e6, plan.name
        if plan.compute == "real":
            assert c.worker_count <= 2
    ps = [p for p in plans if p.strategy.arch == "ps"]
    ring = [p for p in plans if p.strategy.arch == "allreduce"]
    assert {p.strategy.sync for p in ps} == {"bsp", "asp", "ssp"}
    assert {p.cluster.ps.count for p in ps} >= {1, 2, 3}
    assert {p.cluster.worker_count for p in ps} >= {2, 3, 4}
    assert {p.strategy.sharding for p in ps if p.cluster.ps.count > 1} >= {"round_robin",
                                                                            "greedy"}
    assert {p.cluster.worker_count for p in ring} >= {2, 3, 4, 5}
    assert any(g.speed != 1 for p in plans for g in p.cluster.workers)
    assert any(p.cpu_quota for p in plans)
    assert {p.compute for p in plans} == {"real", "emulated"}
    _m, smoke = plan_matrix(ROOT / "scenarios" / "smoke.yaml")
    assert 1 <= len(smoke) <= 2 and all(p.compute == "emulated" for p in smoke)


def test_a_quota_on_every_gpu_of_a_server_is_planned(tmp_path: Path) -> None:
    _m, plans = plan_matrix(write(tmp_path, (
        "scenarios:\n  - {name: s, model: mobilenet_v2, compute: real, local_aggregation: "
        "true, cluster: {nodes: {count: 1, gpus: 2, intra: 1Gbps}, ps: 1}, "
        "cpu_quota: {node0/gpu0: 0.7, node0/gpu1: 0.7}}\n")))
    assert plans[0].cpu_quota == {"node0/gpu0": 0.7, "node0/gpu1": 0.7}
    assert plans[0].describe()["cpu_quota"] == {"node0/gpu0": 0.7, "node0/gpu1": 0.7}
