"""``ddlperf.validate`` without root: the matrix file (parsing, defaults, bad input), the
clusters handed to the predictors, and the comparison / MAPE / CSV / PNG / Markdown logic on
Measurement objects made up here (a unit test of the report code, not of the measurement)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from ddlperf.cluster import Cluster
from ddlperf.errors import InputError
from ddlperf.prediction import Prediction, WorkerResult
from ddlperf.report.validation import csv_text, markdown, plot_validation, publish, setup_text
from ddlperf.validate import (
    Synthetic,
    ValidationRun,
    compare,
    error_pct,
    load_matrix,
    load_results,
    merged_params,
    plan_matrix,
    probe_deviation,
    probed_cluster,
    summarize,
    with_worker_overrides,
)

ROOT = Path(__file__).resolve().parents[1]
MINIMAL = """
defaults:
  bandwidth: 200Mbps
  iterations: 4
  synthetic:
    layers:
      - {count: 2, forward_ms: 5, backward_ms: 10, tensor_mb: 0.5}
scenarios:
  - name: a
    workers: 2
    ps: 1
  - name: b
    arch: allreduce
    workers: 3
    model: mobilenet_v2
    batch_size: 8
"""


def write(tmp_path: Path, text: str, name: str = "m.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(InputError) as info:
        plan_matrix(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message
    return message


# ----------------------------------------------------------------------------- parsing


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


def test_synthetic_block_builds_layers_and_tensors() -> None:
    w = Synthetic.model_validate({"layers": [
        {"name": "big", "forward_ms": 20, "backward_ms": 40, "tensor_mb": 6},
        {"count": 3, "forward_ms": 1, "backward_ms": 2, "tensor_mb": [1, 0.5]},
        {"forward_ms": 1, "backward_ms": 1},
    ]}).workload()
    assert [layer.name for layer in w.layers] == ["big", "l1", "l2", "l3", "l4"]
    assert w.parameter_bytes == 6_000_000 + 3 * 1_500_000
    assert w.layers[0].forward_s == pytest.approx(0.020)
    assert [t.bytes for t in w.layers[1].tensors] == [1_000_000, 500_000]
    assert w.layers[4].tensors == ()


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


@pytest.mark.parametrize("text,needles", [
    ("scenarios: [\n  - name: a\n", ["not valid YAML", "line"]),
    ("- just\n- a list\n", ["must be a mapping", "scenarios"]),
    ("scenarios: []\n", ["scenarios"]),
    ("defaults: {bandwith: 1Gbps}\nscenarios: [{name: a}]\n",
     ["defaults.bandwith", "not a known field"]),
    ("scenarios: [{name: a, workers: 2, colour: red}]\n",
     ["scenarios[0] (a).colour", "not a known field"]),
    ("scenarios: [{name: a, synthetic: {layers: [{forward_ms: 1, backward_ms: 1, mb: 1}]}}]\n",
     ["scenarios[0] (a).synthetic.layers[0].mb", "not a known field"]),
    ("scenarios: [{name: a}, {name: a}]\n", ["appears twice"]),
    ("scenarios: [{name: 'a b'}]\n", ["scenarios[0] (a b).name"]),
    ("scenarios: [{name: a, arch: mesh}]\n", ["scenarios[0] (a).arch", "'ps' or 'allreduce'"]),
])
def test_malformed_files_are_one_line(tmp_path: Path, text: str, needles: list[str]) -> None:
    message = error_of(tmp_path, text)
    for needle in needles:
        assert needle in message, message


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
    issue's coverage (PS BSP/ASP/SSP, 1–2 shards, 2–4 PS workers, round-robin vs greedy,
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
    assert {p.cluster.ps.count for p in ps} == {1, 2}
    assert {p.cluster.worker_count for p in ps} >= {2, 3, 4}
    assert {p.strategy.sharding for p in ps if p.cluster.ps.count > 1} >= {"round_robin",
                                                                            "greedy"}
    assert {p.cluster.worker_count for p in ring} >= {2, 3, 4, 5}
    assert any(g.speed != 1 for p in plans for g in p.cluster.workers)
    assert any(p.cpu_quota for p in plans)
    assert {p.compute for p in plans} == {"real", "emulated"}
    _m, smoke = plan_matrix(ROOT / "scenarios" / "smoke.yaml")
    assert 1 <= len(smoke) <= 2 and all(p.compute == "emulated" for p in smoke)


# ----------------------------------------------------------------------------- clusters


def test_worker_overrides_split_only_the_groups_they_touch() -> None:
    cluster = Cluster.from_dict({"bandwidth": 100e6, "workers": [
        {"name": "a", "count": 2, "speed": 2.0}, {"name": "b", "count": 2}], "ps": 1})
    out = with_worker_overrides(cluster, {3: {"speed": 0.5}})
    assert [(g.name, g.count, g.speed) for g in out.workers] == [
        ("a", 2, 2.0), ("b", 1, 1.0), ("b", 1, 0.5)]
    assert out.ps.count == 1 and out.bandwidth == 100e6


def test_probed_cluster_uses_every_probe_with_goodput_one() -> None:
    cluster = Cluster.from_dict({"bandwidth": 200e6, "workers": 2, "ps": 2})
    probe = {
        "w0": {"uplink_bps": 190e6, "downlink_bps": 191e6},
        "w1": {"uplink_bps": 189e6, "downlink_bps": 192e6},
        "ps0": {"uplink_bps": 191e6, "downlink_bps": 190e6},
        "ps1": {"uplink_bps": 188e6, "downlink_bps": 193e6},
    }
    out = probed_cluster(cluster, probe)
    assert out.goodput == 1.0
    assert [(out.worker_up(g), out.worker_down(g)) for g in out.workers] == [
        (190e6, 191e6), (189e6, 192e6)]
    assert out.ps_up() == 188e6 and out.ps_down() == 190e6 and out.ps.count == 2


# ----------------------------------------------------------------------------- comparison


def fake(period: float, *, kind: str = "prediction", workers: int = 2,
         bottleneck: str = "ps0 downlink", percentiles: bool = False,
         probe: dict | None = None) -> Prediction:
    ws = [WorkerResult(f"w{i}", "w", "V100", 32, period, 32 / period, 0.2, period - 0.2, 0.0)
          for i in range(workers)]
    pct = {"iteration_time_s": {"p5": 0.9 * period, "p25": period, "p50": period,
                                "p75": period, "p95": 1.1 * period}} if percentiles else None
    inputs = {"measure": {"probe": probe or {}, "wire_check": {"ok": True},
                          "ps_update_s_per_byte": 3e-9, "out": "/x"}} if kind != "prediction" \
        else {}
    return Prediction(
        method="measured" if kind != "prediction" else "analytic", iteration_time_s=period,
        throughput_samples_per_s=workers * 32 / period, speedup=1.0, scaling_efficiency=0.5,
        bottleneck=bottleneck, breakdown_s={"compute": 0.2, "communication": period - 0.2,
                                            "wait": 0.0},
        workers=ws, single_worker={"throughput_samples_per_s": 160.0}, inputs=inputs,
        percentiles=pct, kind=kind)


def row(name: str, measured: float, analytic: float, simulate: float) -> dict:
    info = {"name": name, "index": 0, "note": f"{name} note", "fingerprint": "f",
            "setup": {"arch": "ps", "sync": "bsp", "workers": 2, "ps": 1, "compute": "emulated",
                      "bandwidth_bps": 2e8, "parameter_bytes": 8e6, "batch_size": 32,
                      "sharding": "round_robin", "speeds": [1.0]},
            "inputs": {"rates": "configured"}}
    probe = {"w0": {"uplink_bps": 190e6, "uplink_expected_bps": 191.2e6,
                    "downlink_bps": 195e6, "downlink_expected_bps": 191.2e6}}
    return compare(info, fake(measured, kind="measurement", percentiles=True, probe=probe),
                   {"analytic": fake(analytic), "simulate": fake(simulate, percentiles=True)})


def test_compare_gives_signed_errors_percentiles_and_probe_deviation() -> None:
    r = row("x", 1.0, 0.9, 1.05)
    assert r["status"] == "ok"
    assert r["predicted"]["analytic"]["error_pct"] == pytest.approx(-10.0)
    assert r["predicted"]["simulate"]["error_pct"] == pytest.approx(5.0)
    assert r["predicted"]["simulate"]["throughput_error_pct"] == pytest.approx(
        100 * (1 / 1.05 - 1))
    assert r["measured"]["p5_s"] == pytest.approx(0.9) and r["measured"]["p95_s"] == 1.1
    assert r["predicted"]["simulate"]["p95_s"] == pytest.approx(1.155)
    assert r["measured"]["probe_max_deviation_pct"] == pytest.approx(100 * (195 / 191.2 - 1))
    assert r["measured"]["per_worker"] == {"w0": 1.0, "w1": 1.0}
    assert error_pct(1.0, 0.0) != error_pct(1.0, 0.0)  # NaN, not a crash
    assert probe_deviation(fake(1.0)) is None


def test_summary_mape_worst_and_failures() -> None:
    rows = [row("a", 1.0, 0.9, 1.02), row("b", 2.0, 2.4, 1.9), row("c", 0.5, 0.5, 0.55),
            {"name": "d", "status": "failed", "error": "w1 crashed", "setup": {}}]
    s = summarize(rows)
    assert s["analytic"]["scenarios"] == 3
    assert s["analytic"]["mape_pct"] == pytest.approx((10 + 20 + 0) / 3)
    assert s["analytic"]["worst_scenario"] == "b"
    assert s["analytic"]["worst_error_pct"] == pytest.approx(20)
    assert s["analytic"]["within_10pct"] == 2
    assert s["simulate"]["mape_pct"] == pytest.approx((2 + 5 + 10) / 3)
    assert s["simulate"]["worst_abs_error_pct"] == pytest.approx(10)
    assert s["failed"] == ["d"]
    assert summarize([]) == {}


def test_csv_png_markdown_and_publish(tmp_path: Path) -> None:
    rows = [row("a", 1.0, 0.9, 1.02), row("b", 2.0, 2.4, 1.9),
            {"name": "d", "status": "failed", "error": "w1 | crashed", "setup": {}}]
    summary = summarize(rows)
    table = list(csv.DictReader(io.StringIO(csv_text(rows))))
    assert [(t["scenario"], t["method"]) for t in table] == [
        ("a", "analytic"), ("a", "simulate"), ("b", "analytic"), ("b", "simulate"), ("d", "")]
    assert float(table[0]["error_pct"]) == pytest.approx(-10.0)
    assert float(table[0]["measured_s"]) == 1.0 and table[0]["bottleneck_measured"]
    assert table[-1]["status"] == "failed"
    png = plot_validation(rows, tmp_path / "v.png", summary)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = markdown(rows, summary, {"machine": {"cores": 2, "cpu_model": "CPU X"},
                                    "runtime_s": 600}, command="ddlperf validate --matrix m")
    assert "| analytic | 2 | 15.0% | +20.0% (b) | 1/2 |" in text
    assert "![predicted vs measured iteration time](validation.png)" in text
    assert "| 1 | a | PS×1 BSP · 2w · 200Mbps · 8MB · emulated | 1.000 (0.900–1.100) | " \
           "0.900 (-10.0%) | 1.020 (+2.0%) |" in text
    assert "failed: w1 / crashed" in text and "10.0 min" in text and "CPU X, 2 cores" in text
    assert "a note" in text
    written = publish(rows, summary, {}, tmp_path)
    assert sorted(p.name for p in written) == ["validation.csv", "validation.md",
                                               "validation.png"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_setup_text_names_the_mechanisms() -> None:
    assert setup_text({"arch": "ps", "sync": "ssp", "staleness": 2, "ps": 2,
                       "sharding": "greedy", "workers": 3, "bandwidth_bps": 5e8,
                       "parameter_bytes": 12e6, "compute": "real", "speeds": [0.4, 1.0],
                       "cpu_quota": {"w1": 0.5}}) == (
        "PS×2 SSP(2) greedy · 3w · 500Mbps · 12MB · real · speed 0.4 · quota w1=0.5")
    assert setup_text({"arch": "allreduce", "workers": 5, "compute": "emulated"}) == \
        "ring · 5w · emulated"


def test_results_round_trip_and_bad_results(tmp_path: Path) -> None:
    rows = [row("a", 1.0, 0.9, 1.02)]
    run = ValidationRun(tmp_path, "m.yaml", rows, summarize(rows), {"rates": "configured"})
    (tmp_path / "results.json").write_text(json.dumps(run.to_dict()))
    back = load_results(tmp_path)
    assert back.rows == rows and back.meta["rates"] == "configured"
    assert math.isclose(back.summary["simulate"]["mape_pct"], 2.0)
    with pytest.raises(InputError, match="no validation results"):
        load_results(tmp_path / "nowhere")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InputError, match=r"not a ddlperf\.validation/1"):
        load_results(tmp_path / "bad.json")


def test_load_matrix_names_the_file_in_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^x\.yaml: scenarios"):
        load_matrix(write(tmp_path, "scenarios: 3\n", "x.yaml"))
