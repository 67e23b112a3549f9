"""Analytic and calibrated workloads: counted FLOPs priced on a catalog device, scaled to a step."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from ddlperf.workload.profile import profile  # noqa: E402
from tests.workload.nets import mlp  # noqa: E402

pytestmark = pytest.mark.torch


def test_analytic_resnet50_flops() -> None:
    """2 FLOPs per multiply-add: resnet50 at 224×224 is 4.1 GMACs = 8.2 GFLOPs forward."""
    workload = profile("resnet50", batch_size=1, analytic=True)
    assert workload.flops == pytest.approx(8.2e9, rel=0.03)
    assert workload.device == "V100" and workload.provenance["method"] == "analytic"
    assert workload.parameter_bytes == 4 * 25_557_032
    assert "2 FLOPs per multiply-add" in workload.provenance["flop_convention"]


def test_analytic_user_model_scales_with_batch_and_device() -> None:
    model = mlp()
    small = profile(model, torch.randn(2, 512), analytic=True, device="A100")
    large = profile(model, torch.randn(8, 512), analytic=True, device="A100")
    assert large.flops == pytest.approx(4 * small.flops)
    assert small.flops == pytest.approx(2 * 2 * (512 * 1024 + 2 * 1024 * 1024 + 1024 * 10))
    assert small.device == "A100"
    v100 = profile(model, torch.randn(8, 512), analytic=True, device="V100")
    assert v100.compute_s > large.compute_s


def test_calibrate_to_a_known_step_time_keeps_analytic_shares() -> None:
    analytic = profile("resnet18", batch_size=8, analytic=True, device="T4")
    calibrated = profile("resnet18", batch_size=8, calibrate=True, step_time=0.25, device="T4")
    assert calibrated.compute_s == pytest.approx(0.25)
    assert calibrated.provenance["method"] == "calibrated"
    ratio = [c.forward_s / a.forward_s for a, c in zip(analytic.layers, calibrated.layers,
                                                        strict=True) if a.forward_s > 0]
    assert max(ratio) == pytest.approx(min(ratio))
