"""``predict(method="simulate")`` and ``ddlperf predict --method simulate``: options, seeds,
percentiles, bad input."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.api import predict
from ddlperf.cli.app import app
from ddlperf.errors import InputError
from ddlperf.workload import Workload
from tests.conftest import make_workload

runner = CliRunner()
TOY = make_workload([(0.01, 0.02, [1_000_000]), (0.005, 0.01, [2_000_000, 1_000]),
                     (0.02, 0.03, [500_000])], update_s_per_byte=1e-10)


def sim(workload=TOY, **kw):
    return predict(workload=workload, method="simulate", **kw)


def with_cv(workload: Workload, cv: float) -> Workload:
    data = workload.to_dict()
    for layer in data["layers"]:
        layer["forward_cv"] = layer["backward_cv"] = cv
    return Workload.from_dict(data)


# -- determinism and noise ---------------------------------------------------------------------


def test_same_seed_gives_identical_output():
    kw = dict(workers=4, ps=2, jitter=0.1, replications=3, seed=7)
    assert sim(**kw).to_dict() == sim(**kw).to_dict()
    other = sim(**{**kw, "seed": 8})
    assert other.iteration_time_s != sim(**kw).iteration_time_s


@pytest.mark.parametrize("kw", [
    dict(workers=4, ps=2), dict(workers=4, ps=2, sync="asp"), dict(arch="allreduce", workers=5),
])
def test_replications_in_processes_give_the_sequential_result(kw, tmp_path):
    # Each replication has its own seeded generators, so where it runs cannot matter; the
    # trace (replication 0) is written by the parent either way.
    base = dict(jitter=0.1, replications=5, seed=3, iterations=6, **kw)
    alone = sim(jobs=1, trace=tmp_path / "alone.json", **base)
    for jobs in (2, 3):
        shared = sim(jobs=jobs, trace=tmp_path / f"shared{jobs}.json", **base)
        assert alone.to_dict() == shared.to_dict()
        assert (tmp_path / "alone.json").read_text() == (
            tmp_path / f"shared{jobs}.json").read_text()


def test_this_process_runs_its_share_of_the_replications(monkeypatch):
    # with one helper process, the parent runs every other replication (it used to run only
    # the first and wait while the helper ran the other nine)
    import multiprocessing

    from ddlperf.predictors.simulate import runner

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("replications run in forked processes only where fork exists")
    here: list[int] = []
    run = runner._Job.run

    def counted(self, replication, log=None):
        here.append(replication)
        return run(self, replication, log)

    monkeypatch.setattr(runner._Job, "run", counted)
    sim(workers=4, ps=2, jitter=0.1, replications=10, seed=3, iterations=4, jobs=2)
    assert sorted(here) == [0, 2, 4, 6, 8]


def test_deterministic_run_has_no_spread():
    p = sim(workers=4, ps=2, replications=4)
    pct = p.percentiles["iteration_time_s"]
    assert pct["p5"] == pytest.approx(pct["p95"]) == pytest.approx(p.iteration_time_s)
    assert p.inputs["simulate"] == {"iterations": 20, "warmup": 3, "seed": 0,
                                    "replications": 4, "jitter": "workload"}
    assert any("one run" in note for note in p.notes)


def test_jitter_gives_percentiles_across_iterations_and_replications():
    p = sim(workers=4, ps=1, jitter=0.2, replications=3)
    for key in ("iteration_time_s", "throughput_samples_per_s"):
        pct = p.percentiles[key]
        assert set(pct) == {"mean", "p5", "p50", "p95"}
        assert pct["p5"] < pct["p50"] < pct["p95"]
    assert p.percentiles["iteration_time_s"]["mean"] == p.iteration_time_s
    assert p.percentiles["throughput_samples_per_s"]["mean"] == p.throughput_samples_per_s
    assert p.inputs["simulate"]["jitter"] == 0.2
    assert "percentiles" in p.to_dict()


def test_workload_cv_is_the_default_jitter_and_the_flag_overrides_it():
    noisy = with_cv(TOY, 0.2)
    p = sim(noisy, workers=4, ps=1)
    assert p.percentiles["iteration_time_s"]["p5"] < p.percentiles["iteration_time_s"]["p95"]
    quiet = sim(noisy, workers=4, ps=1, jitter=0)
    assert quiet.to_dict()["workers"] == sim(TOY, workers=4, ps=1).to_dict()["workers"]


def test_mean_compute_under_jitter_stays_the_profile_mean():
    # lognormal factors have mean 1: over many operations compute stays close to the profile
    p = sim(workers=2, ps=1, jitter=0.3, iterations=200, warmup=0)
    assert p.breakdown_s["compute"] == pytest.approx(TOY.compute_s, rel=0.03)


# -- result shape -------------------------------------------------------------------------------


@pytest.mark.parametrize("kw", [
    dict(workers=4, ps=2), dict(workers=4, ps=2, sync="asp"),
    dict(workers=4, ps=2, sync="ssp", staleness=1), dict(workers=4, arch="allreduce"),
    dict(cluster={"workers": [{"count": 2}, {"count": 2, "speed": 0.5}]}, ps=1, jitter=0.1),
])
def test_prediction_is_consistent(kw):
    p = sim(**kw)
    assert p.method == "simulate" and p.inputs["method"] == "simulate"
    assert len(p.workers) == 4
    for w in p.workers:
        assert w.compute_s + w.communication_s + w.wait_s == pytest.approx(w.iteration_time_s)
        assert w.throughput_samples_per_s == pytest.approx(w.batch_size / w.iteration_time_s)
    assert p.throughput_samples_per_s == pytest.approx(
        sum(w.throughput_samples_per_s for w in p.workers))
    assert p.iteration_time_s == pytest.approx(sum(w.iteration_time_s for w in p.workers) / 4)
    assert 0 < p.scaling_efficiency <= 1 + 1e-9
    assert all(0 <= r.utilization <= 1 + 1e-9 for r in p.resources)
    assert p.bottleneck
    json.dumps(p.to_dict(), allow_nan=False)


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("option", "value", "flag"), [
    ("iterations", 0, "--iterations"), ("warmup", -1, "--warmup"),
    ("replications", 0, "--replications"), ("jitter", -0.1, "--jitter"),
    ("seed", -1, "--seed"), ("iterations", 2.5, "--iterations"),
    ("jitter", float("nan"), "--jitter"), ("jobs", 0, "--jobs"),
])
def test_bad_options_name_the_flag(option, value, flag):
    with pytest.raises(InputError) as err:
        sim(workers=2, ps=1, **{option: value})
    assert err.value.field == flag


def test_simulate_options_without_simulate_are_a_note():
    p = predict(workload=TOY, workers=2, ps=1, iterations=5)
    assert p.method == "analytic"
    assert any("--iterations applies to --method simulate only" in n for n in p.notes)


def _cli(*args: str):
    return runner.invoke(app, ["predict", "--method", "simulate", *args])


def _one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize(("args", "needle"), [
    (["--sync", "ssp", "--staleness", "-1"], "staleness"),
    (["--arch", "allreduce", "--bucket-size", "0"], "--bucket-size"),
    (["--replications", "0"], "--replications"),
    (["--iterations", "0"], "--iterations"),
    (["--warmup", "-2"], "--warmup"),
    (["--jitter", "-1"], "--jitter"),
    (["--jobs", "0"], "--jobs"),
])
def test_cli_bad_input_one_line_exit_2(args, needle):
    line = _one_error_line(_cli("--workers", "2", *args))
    assert needle in line


def test_cli_unwritable_trace_fails_before_simulating(tmp_path):
    missing = tmp_path / "no" / "such" / "dir" / "t.json"
    line = _one_error_line(_cli("--workers", "2", "--trace", str(missing)))
    assert "--trace" in line
    line = _one_error_line(_cli("--workers", "2", "--trace", str(tmp_path)))
    assert "--trace" in line
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_cli_bad_input_writes_no_trace(tmp_path):
    out = tmp_path / "t.json"
    _one_error_line(_cli("--workers", "2", "--replications", "0", "--trace", str(out)))
    assert list(tmp_path.iterdir()) == []


def test_cli_json_has_percentiles_and_options():
    result = _cli("--json", "--model", "resnet18", "--workers", "4", "--ps", "2",
                  "--iterations", "5", "--warmup", "1", "--seed", "3", "--jitter", "0.05",
                  "--replications", "2")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["method"] == "simulate"
    assert set(data["percentiles"]) == {"iteration_time_s", "throughput_samples_per_s"}
    assert data["inputs"]["simulate"] == {"iterations": 5, "warmup": 1, "seed": 3,
                                          "replications": 2, "jitter": 0.05}


def test_cli_accepts_every_analytic_flag():
    result = _cli("--model", "resnet18", "--batch-size", "16", "--device", "V100",
                  "--workers", "3", "--ps", "2", "--placement", "colocated", "--arch", "ps",
                  "--sync", "ssp", "--staleness", "2", "--bandwidth", "25Gbps",
                  "--latency", "20us", "--sharding", "greedy", "--no-overlap",
                  "--goodput", "0.95", "--iterations", "4", "--warmup", "1")
    assert result.exit_code == 0, result.output
    assert "method simulate" in result.output


def test_the_heap_is_frozen_for_the_cyclic_gc_only_while_predicting() -> None:
    # (runner.frozen_heap: the objects from before are left out of the GC's scans while the
    # runs allocate, and put back after; a caller's own freeze is left alone)
    import gc

    from ddlperf.predictors.simulate import runner

    seen: list[int] = []
    with runner.frozen_heap():
        seen.append(gc.get_freeze_count())
    assert seen[0] > 0 and gc.get_freeze_count() == 0
    sim(workers=2, ps=1, iterations=2, jitter=0.05, replications=2)
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with runner.frozen_heap():
            assert gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
