"""Gradient accumulation in measurements: the trainers run every micro-batch for real.

The predictors price ``k`` micro-batches per synchronisation as ``k − 1`` extra passes in the
unattributed step; a measurement must not take that at its word (sleeping the same sum would
check nothing), so the spec carries ``accumulation`` and one micro-batch's own unattributed
time, and the trainers compute ``k`` passes: DDP's first ``k − 1`` under ``no_sync``, a PS
worker's without pushes. Root runs check the wire (one exchange per iteration, not ``k``) and
the time against the prediction.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddlperf.api import predict
from ddlperf.errors import InputError
from ddlperf.measure.launcher import build_spec
from ddlperf.measure.records import read_records
from ddlperf.measure.run import measure, resolve_scenario
from ddlperf.measure.torchrun import torchrun_plan
from ddlperf.report.validation_report import setup_text
from ddlperf.validate.plan import plan_matrix
from tests.conftest import leftovers, netns_skip_reason

LAYERS, TENSOR_BYTES, FWD, BWD, EXTRA = 4, 500_000, 0.010, 0.020, 0.004
WORKLOAD = {
    "format": "ddlperf.workload/1", "name": "acc2mb", "batch_size": 16, "device": "V100",
    "unattributed_s": EXTRA,
    "layers": [{"name": f"l{i}", "forward_s": FWD, "backward_s": BWD,
                "tensors": [{"name": f"l{i}.w", "bytes": TENSOR_BYTES}]} for i in range(LAYERS)],
}
PASS_S = LAYERS * (FWD + BWD) + EXTRA  # one micro-batch


def _scenario(accumulation: int | None, arch: str = "ps"):
    return resolve_scenario(None, dict(WORKLOAD), None, None, None, None, 2,
                            1 if arch == "ps" else 0, None, arch, "bsp", None, "round_robin",
                            True, None, "100Mbps", None, accumulation)


@pytest.mark.parametrize("k", [1, 2, 5])
def test_the_spec_carries_micro_batches_and_one_micro_batchs_unattributed_time(k: int) -> None:
    sc = _scenario(k)
    # the predictors' view: k − 1 extra passes inside the unattributed step
    assert sc.groups[0].unattributed_s == pytest.approx(EXTRA + (k - 1) * PASS_S)
    spec = build_spec(sc, compute="emulated", iterations=3, warmup=1)
    assert spec["accumulation"] == k
    assert all(w["unattributed_s"] == pytest.approx(EXTRA) for w in spec["workers"])
    # one exchange per iteration whatever k is
    assert spec["tensors"] == build_spec(_scenario(1), compute="emulated", iterations=3,
                                         warmup=1)["tensors"]


def test_a_speed_scales_every_micro_batch_alike() -> None:
    cluster = {"workers": [{"count": 2, "speed": 0.5}], "ps": 1, "bandwidth": "100Mbps"}
    sc = resolve_scenario(None, dict(WORKLOAD), cluster, None, None, None, None, None, None,
                          "ps", "bsp", None, "round_robin", True, None, None, None, 3)
    spec = build_spec(sc, compute="emulated", iterations=3, warmup=1)
    assert all(w["unattributed_s"] == pytest.approx(EXTRA / 0.5) for w in spec["workers"])


def test_torchrun_plans_carry_it(tmp_path: Path) -> None:
    plan = torchrun_plan(None, workload=dict(WORKLOAD), workers=2, ps=1, accumulation=3,
                         out=tmp_path / "plan")
    assert json.loads(Path(plan["spec"]).read_text())["accumulation"] == 3


@pytest.mark.parametrize("value", [0, -2])
def test_bad_accumulation_is_one_line_naming_the_flag(value: int, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--accumulation"):
        measure(workload=dict(WORKLOAD), accumulation=value, out=tmp_path / "m")
    done = subprocess.run([sys.executable, "-m", "ddlperf", "measure", "--accumulation",
                           str(value), "--out", str(tmp_path / "cli")],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "--accumulation" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "cli").exists()


def test_a_matrix_scenario_sets_it_for_the_run_and_the_prediction(tmp_path: Path) -> None:
    (tmp_path / "w.json").write_text(json.dumps(WORKLOAD))
    path = tmp_path / "m.yaml"
    path.write_text("scenarios:\n  - {name: acc3, workload: w.json, accumulation: 3}\n"
                    "  - {name: plain, workload: w.json}\n")
    _, plans = plan_matrix(path)
    assert [p.workload.accumulation for p in plans] == [3, 1]
    assert plans[0].describe()["accumulation"] == 3 and plans[1].describe()["accumulation"] \
        is None
    assert "3 micro-batches" in setup_text(plans[0].describe())
    assert "micro-batches" not in setup_text(plans[1].describe())
    path.write_text("scenarios:\n  - {name: acc0, workload: w.json, accumulation: 0}\n")
    with pytest.raises(InputError, match="accumulation"):
        plan_matrix(path)


# ----------------------------------------------------------------------------- real runs

_SKIP = netns_skip_reason()


def _measure(out: Path, **kwargs):
    pytest.importorskip("torch")
    messages: list[str] = []
    m = measure(workload=dict(WORKLOAD), bandwidth="100Mbps", iterations=6, warmup=2,
                out=out, probe_seconds=0.5, timeout=30, progress=messages.append, **kwargs)
    rid = next(msg.split("(run ")[1].split(",")[0] for msg in messages if "(run " in msg)
    assert leftovers(rid) == []
    return m


def _probed(m) -> float:
    probe = m.inputs["measure"]["probe"]
    return min(min(link["uplink_bps"], link["downlink_bps"]) for link in probe.values())


@pytest.mark.root
@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
@pytest.mark.parametrize("arch", ["ps", "allreduce"])
def test_micro_batches_are_computed_and_synchronised_once(tmp_path: Path, arch: str) -> None:
    k = 3
    ps = 1 if arch == "ps" else 0
    m = _measure(tmp_path / arch, workers=2, ps=ps, arch=arch, accumulation=k)
    wire = m.inputs["measure"]["wire_check"]
    assert wire["ok"], wire["message"]  # the bytes of one exchange per iteration, not k
    records, _ = read_records(tmp_path / arch / "records.jsonl")
    measured = [r for r in records if r.get("type") == "iteration" and r["iteration"] >= 2
                and "compute_s" in r]
    assert measured
    # every micro-batch ran: at least k passes of compute per iteration on every worker
    assert min(r["compute_s"] for r in measured) >= 0.97 * k * PASS_S
    p = predict(workload=dict(WORKLOAD), workers=2, ps=ps, arch=arch, accumulation=k,
                bandwidth=_probed(m), goodput=1.0, latency="100us")
    one = predict(workload=dict(WORKLOAD), workers=2, ps=ps, arch=arch,
                  bandwidth=_probed(m), goodput=1.0, latency="100us")
    error = m.iteration_time_s / p.iteration_time_s - 1
    print(f"{arch} k={k}: measured {m.iteration_time_s:.3f} s, predicted "
          f"{p.iteration_time_s:.3f} s ({100 * error:+.1f}%); k=1 {one.iteration_time_s:.3f} s")
    assert abs(error) < 0.15
    # and the k − 1 extra passes are not hidden behind the exchange
    assert m.iteration_time_s > one.iteration_time_s + 0.8 * (k - 1) * PASS_S


def test_real_compute_runs_micro_batches_of_the_workloads_batch() -> None:
    """The resolved group counts samples per iteration (k micro-batches); the model runs one
    micro-batch at a time (a batch k times too big made a real ring row 2× slow)."""
    torch = pytest.importorskip("torch")
    from ddlperf.measure.compute import build_real

    sc = resolve_scenario("mobilenet_v2", None, None, None, 4, None, 2, 0, None, "allreduce",
                          "bsp", None, "round_robin", True, None, "100Mbps", None, 3)
    spec = build_spec(sc, compute="real", iterations=1, warmup=0, model="mobilenet_v2")
    assert [(w["batch_size"], w["micro_batch_size"]) for w in spec["workers"]] == [(12, 4)] * 2
    _model, inputs, target, _loss = build_real(spec, spec["workers"][0])
    assert isinstance(inputs[0], torch.Tensor) and inputs[0].shape[0] == 4
    assert target.shape[0] == 4
