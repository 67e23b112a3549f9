"""The Python API: plain values in, the same scenario the CLI would build."""

from __future__ import annotations

import pytest

import ddlperf.units as units
from ddlperf.api import make_cluster, predict
from ddlperf.errors import InputError

PROFILE = {"format": "ddlperf.workload/1", "name": "p", "batch_size": 32, "device": "V100",
           "layers": [{"name": "l0", "forward_s": 0.004, "backward_s": 0.008,
                       "tensors": [{"name": "l0.w", "bytes": 1_000_000}]}]}
ROOFLINE = {**PROFILE, "layers": [{**PROFILE["layers"][0], "flops": 1e12,
                                   "memory_bytes": 2e9}]}


def test_batch_size_rescales_a_workload_linearly_without_flops() -> None:
    p = predict(workload=PROFILE, batch_size=64, workers=2, ps=1)
    assert [w.batch_size for w in p.workers] == [64, 64]
    assert p.workers[0].compute_s == pytest.approx(2 * (0.004 + 0.008))
    assert any("linear in batch size" in note for note in p.notes)


def test_batch_size_rescales_a_workload_by_roofline_with_flops() -> None:
    same = predict(workload=ROOFLINE, workers=2, ps=1)
    double = predict(workload=ROOFLINE, batch_size=64, workers=2, ps=1)
    assert same.workers[0].compute_s == pytest.approx(0.012)
    assert double.workers[0].batch_size == 64
    assert double.workers[0].compute_s == pytest.approx(2 * 0.012, rel=0.05)


def test_a_group_batch_in_the_cluster_wins_over_batch_size() -> None:
    p = predict(workload=PROFILE, batch_size=64, ps=1,
                cluster={"workers": [{"count": 1, "batch_size": 8}, {"count": 1}]})
    assert [w.batch_size for w in p.workers] == [8, 64]


def test_implausible_rates_warn_with_the_field_and_a_guess(tmp_path) -> None:
    with pytest.warns(units.ImplausibleValueWarning, match=r"--bandwidth 10 = 10bps.*10Gbps\?"):
        make_cluster(bandwidth=10)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("workers:\n  - {count: 2, uplink: 25}\nps: 1\n")
    match = r"c.yaml: workers\[0\].uplink 25 = 25bps"
    with pytest.warns(units.ImplausibleValueWarning, match=match):
        make_cluster(cfg)


def test_a_cluster_file_without_workers_takes_workers(tmp_path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("bandwidth: 25GbE\nps: {count: 1}\n")
    assert make_cluster(cfg, workers=3).worker_count == 3
    cfg.write_text("workers: 2\nps: 1\n")
    with pytest.raises(InputError, match=r"--workers: .*already lists workers"):
        make_cluster(cfg, workers=3)


def test_a_cluster_file_without_ps_gets_the_default_shards(tmp_path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("workers: 4\nbandwidth: 25GbE\n")
    assert predict(cluster=cfg).inputs["cluster"]["ps"]["count"] == 2
    assert predict(cluster=cfg, arch="allreduce").inputs["cluster"]["ps"]["count"] == 0


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"arch": "allreduce", "sharding": "greedy"}, "--sharding does not apply to all-reduce"),
    ({"arch": "allreduce", "placement": "colocated"}, "--placement does not apply"),
    ({"bucket_size": "10MB"}, "--bucket-size applies to --arch allreduce only"),
    ({"staleness": 2}, "--staleness applies to --sync ssp only"),
    ({"iterations": 5}, "--iterations applies to --method simulate only"),
    ({"allreduce": "hierarchical"}, "--allreduce applies to --arch allreduce only"),
    ({"arch": "allreduce", "local_aggregation": True}, "--local-aggregation applies to --arch ps"),
])
def test_a_flag_that_does_not_apply_is_a_note(kwargs, needle) -> None:
    p = predict("resnet18", workers=2, **kwargs)
    assert any(needle in note for note in p.notes), p.notes


def test_a_misspelt_keyword_is_a_type_error_with_a_guess() -> None:
    with pytest.raises(TypeError, match=r"'config'.*did you mean 'cluster'"):
        predict(config={"workers": 2})


@pytest.mark.parametrize("kw,flag", [
    (dict(workers="4"), "--workers"), (dict(workers=True), "--workers"),
    (dict(ps=[1]), "--ps"), (dict(gpus_per_node="2", workers=4), "--gpus-per-node"),
    (dict(nics="1", gpus_per_node=2), "--nics"),
    (dict(rack_size="2", rack_uplink="10Gbps", gpus_per_node=2, workers=8), "--rack-size"),
])
def test_a_count_that_is_not_a_number_is_one_clear_error(kw, flag):
    # the CLI parses its flags; the API used to fail deep inside with a TypeError
    with pytest.raises(InputError, match=rf"^{flag}: must be a whole number, got "):
        predict(**kw)


def test_a_list_of_worker_groups_for_workers_says_how_to_give_groups():
    with pytest.raises(InputError, match=r"cluster=\{'workers': \["):
        predict(workers=[{"count": 2}, {"count": 1, "speed": 0.5}])
