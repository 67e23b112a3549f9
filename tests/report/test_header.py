"""The lines above a result: read from the resolved scenario (or the run), never the flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddlperf.api import predict
from ddlperf.report.header import scenario_lines, speedup_note, speedup_text
from tests.report.conftest import make_measurement

WORKLOAD = {
    "format": "ddlperf.workload/1", "name": "mlp", "batch_size": 64, "device": "cpu",
    "layers": [{"name": "fc1", "forward_s": 0.0005, "backward_s": 0.001, "flops": 2e8,
                "memory_bytes": 5e6, "tensors": [{"name": "fc1.weight", "bytes": 4_000_000}]}],
}


def test_mixed_cluster_names_every_group_with_its_own_batch() -> None:
    p = predict("resnet50", cluster={
        "workers": [{"count": 6, "device": "V100"},
                    {"name": "old", "count": 2, "device": "K80", "batch_size": 16}],
        "ps": 2})
    text = "\n".join(scenario_lines(p))
    assert "6 × V100 (batch 32) + 2 × K80 (batch 16)" in text
    assert "batch 32/worker" not in text


def test_a_rescaled_workload_names_the_workers_device_and_says_it_was_rescaled() -> None:
    p = predict(workload=WORKLOAD, device="A100", batch_size=128)
    lines = scenario_lines(p)
    assert "8 × A100 · batch 128/worker" in lines[0] and "cpu" not in lines[0]
    assert lines[-1] == "times rescaled from the workload's own cpu batch 64 to A100 batch 128"


def test_a_zoo_model_is_not_called_rescaled() -> None:
    assert not any("rescaled" in line for line in scenario_lines(predict("resnet18")))


@pytest.mark.parametrize(("value", "text"), [(3.14159, "3.14×"), (0.0042, "0.0042×"),
                                             (0.000931, "0.00093×")])
def test_speedup_keeps_its_digits(value: float, text: str) -> None:
    assert speedup_text(value) == text


def test_a_speedup_below_one_is_explained() -> None:
    p = predict(workload=WORKLOAD, device="A100")
    assert p.speedup < 0.01
    note = speedup_note(p)
    assert note is not None and "slower than w0 alone on A100" in note
    assert speedup_note(predict("resnet50", workers=2, ps=1, bandwidth="100Gbps")) is None


def test_measure_header_says_what_is_emulated_and_never_shows_a_latency(tmp_path: Path) -> None:
    lines = scenario_lines(make_measurement(tmp_path, "emulated"))
    text = "\n".join(lines)
    assert "2 × V100 · batch 32/worker" in lines[0]
    assert "compute: emulated device time" in text
    assert "latency not emulated" in text and "50us" not in text
    assert "emulated cluster on this machine" in text


def test_real_compute_is_on_the_cpu_not_the_zoo_device(tmp_path: Path) -> None:
    text = "\n".join(scenario_lines(make_measurement(tmp_path, "real")))
    assert "2 × CPU" in text and "real CPU compute" in text and "V100" not in text


def test_torchrun_measurement_is_on_real_hosts(tmp_path: Path) -> None:
    text = "\n".join(scenario_lines(make_measurement(tmp_path, "emulated", launcher="torchrun")))
    assert "real hosts (torchrun)" in text and "as configured" in text
