"""ddlperf.profile: measured, analytic and calibrated workloads from torch models.

Timing tests run small models with one thread. The machine may be shared, so the two
properties that compare timings retry up to three times and pass on the first clean attempt.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from ddlperf.errors import InputError  # noqa: E402
from ddlperf.workload import layer_flops  # noqa: E402
from ddlperf.workload.profile import profile  # noqa: E402

pytestmark = pytest.mark.torch


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024),
        nn.ReLU(), nn.Linear(1024, 10),
    )


def _mlp_input() -> torch.Tensor:
    return torch.randn(256, 512, generator=torch.Generator().manual_seed(1))


def _retry(check: Callable[[], None], attempts: int = 3) -> None:
    for attempt in range(attempts):
        try:
            check()
            return
        except AssertionError:
            if attempt == attempts - 1:
                raise


def _plain_step(model: nn.Module, x: torch.Tensor, repetitions: int = 10) -> float:
    """Median forward + loss + backward seconds with no hooks, timed independently."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        times = []
        for i in range(repetitions + 2):
            model.zero_grad(set_to_none=True)
            start = time.perf_counter()
            model(x).float().mean().backward()
            if i >= 2:
                times.append(time.perf_counter() - start)
        return statistics.median(times)
    finally:
        torch.set_num_threads(saved)


# ---------------------------------------------------------------- measured


def test_resnet18_parameters_and_provenance() -> None:
    workload = profile("resnet18", batch_size=2, warmup=1, repetitions=2)
    assert workload.parameter_bytes == 4 * 11_689_512
    torchvision = pytest.importorskip("torchvision")
    model_names = {name for name, _ in torchvision.models.resnet18().named_parameters()}
    assert {t.name for layer in workload.layers for t in layer.tensors} == model_names
    assert workload.gradient_order is not None
    assert set(workload.gradient_order) == model_names
    assert workload.gradient_order[:2] in (("fc.bias", "fc.weight"), ("fc.weight", "fc.bias"))
    assert workload.device == "cpu"
    prov = workload.provenance
    assert prov["source"] == "profile" and prov["method"] == "measured"
    assert prov["threads"] == 1 and prov["repetitions"] == 2 and prov["warmup"] == 1
    assert prov["torch"] == torch.__version__ and prov["cpu_model"]
    assert all(layer.forward_s > 0 and layer.backward_s > 0 for layer in workload.layers)
    assert workload.layers[0].model_extra["type"] == "Conv2d"
    assert workload.flops == pytest.approx(2 * 3.64e9, rel=0.02)
    assert set(prov["update_s_per_byte"]) == {"sgd", "adam"}
    assert workload.update_s_per_byte == prov["update_s_per_byte"]["sgd"] > 0


def test_sum_of_layers_and_unattributed_matches_an_independent_step() -> None:
    model, x = _mlp(), _mlp_input()

    def check() -> None:
        before = _plain_step(model, x)
        workload = profile(model, x, warmup=2, repetitions=10)
        after = _plain_step(model, x)
        step = workload.provenance["step_s_median"]
        layers = float(workload.forward_array.sum() + workload.backward_array.sum())
        if not workload.provenance["unattributed_clamped"]:
            assert layers + workload.unattributed_s == pytest.approx(step)  # by construction
        independent = (before + after) / 2
        assert abs(workload.compute_s - independent) <= 0.10 * independent

    _retry(check)


def test_two_profiles_agree_within_their_spread() -> None:
    model, x = _mlp(), _mlp_input()

    def check() -> None:
        first = profile(model, x, warmup=2, repetitions=10)
        second = profile(model, x, warmup=2, repetitions=10)
        compared = 0
        for a, b in zip(first.layers, second.layers, strict=True):
            for sa, sb, ca, cb in ((a.forward_s, b.forward_s, a.forward_cv, b.forward_cv),
                                   (a.backward_s, b.backward_s, a.backward_cv, b.backward_cv)):
                if min(sa, sb) < 1e-3:
                    continue
                compared += 1
                spread = 3 * (sa * ca + sb * cb)  # three standard deviations of each
                assert abs(sa - sb) <= spread + 0.02 * max(sa, sb), (a.name, sa, sb, ca, cb)
        assert compared >= 2

    _retry(check)


def test_unattributed_is_kept_and_gradients_arrive_in_reverse_layer_order() -> None:
    model = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64), nn.Linear(64, 1))
    workload = profile(model, torch.randn(32, 64), warmup=1, repetitions=3)
    assert workload.provenance["unattributed_s_median"] > 0  # the loss is not a layer's
    assert workload.unattributed_s >= 0
    assert [layer.name for layer in workload.layers] == ["0", "2", "3"]
    owner = workload.tensor_layer
    positions = [owner[name] for name in workload.gradient_order or ()]
    assert positions == sorted(positions, reverse=True)


def test_adam_optimizer_and_bfloat16() -> None:
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 8))
    workload = profile(model, input_shape=(128,), batch_size=16, optimizer="adam",
                       dtype="bf16", warmup=1, repetitions=2)
    assert workload.update_s_per_byte == workload.provenance["update_s_per_byte"]["adam"]
    assert workload.dtype == "bfloat16"
    count = sum(p.numel() for p in model.parameters())
    assert workload.parameter_bytes == 2 * count
    assert workload.batch_size == 16


def test_tied_weights_count_once() -> None:
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(100, 16)
            self.mix = nn.Linear(16, 16)
            self.head = nn.Linear(16, 100, bias=False)
            self.head.weight = self.embed.weight

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(torch.relu(self.mix(self.embed(ids))))

    model = Tied()
    ids = torch.randint(0, 100, (4, 8))
    measured = profile(model, ids, warmup=0, repetitions=1)
    for workload in (measured, profile(model, ids, analytic=True)):
        assert workload.parameter_bytes == 4 * sum(p.numel() for p in model.parameters())
        names = [t.name for layer in workload.layers for t in layer.tensors]
        assert "embed.weight" in names and "head.weight" not in names
        head = next(layer for layer in workload.layers if layer.name == "head")
        assert head.flops == 2 * 4 * 8 * 16 * 100 and not head.tensors


# ---------------------------------------------------------------- analytic and calibrated


def test_analytic_resnet50_flops() -> None:
    """2 FLOPs per multiply-add: resnet50 at 224×224 is 4.1 GMACs = 8.2 GFLOPs forward."""
    workload = profile("resnet50", batch_size=1, analytic=True)
    assert workload.flops == pytest.approx(8.2e9, rel=0.03)
    assert workload.device == "V100" and workload.provenance["method"] == "analytic"
    assert workload.parameter_bytes == 4 * 25_557_032
    assert "2 FLOPs per multiply-add" in workload.provenance["flop_convention"]


def test_analytic_user_model_scales_with_batch_and_device() -> None:
    model = _mlp()
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


def test_calibrate_to_a_measured_step() -> None:
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 4))
    workload = profile(model, torch.randn(64, 256), calibrate=True, warmup=1, repetitions=3)
    assert workload.compute_s == pytest.approx(workload.provenance["step_s_median"])
    assert workload.device == "cpu" and workload.provenance["analytic_device"] == "cpu"


# ---------------------------------------------------------------- layer attribution


def test_parameter_free_flops_fold_into_the_preceding_layer() -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(8, 8, bias=False)
            self.b = nn.Linear(8, 8, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x @ x.T @ x  # before any layer: folds into the first (a)
            x = self.a(x)
            x = x @ x.T @ x  # folds into a
            return self.b(x)

    with torch.device("meta"):
        counts = layer_flops.count_layers(Net(), (torch.empty(4, 8),))
    mm = 2 * 4 * 8 * 4 + 2 * 4 * 4 * 8  # (4×8)(8×4) then (4×4)(4×8)
    linear = 2 * 4 * 8 * 8
    assert [(c.name, c.flops) for c in counts] == [("a", 2 * mm + linear), ("b", linear)]
    assert counts[0].tensors == [("a.weight", 256)]


def test_attention_out_proj_gets_its_own_flops() -> None:
    """MultiheadAttention uses out_proj.weight functionally; it is still out_proj's work."""
    with torch.device("meta"):
        mha = nn.MultiheadAttention(16, 2, batch_first=True)
        counts = layer_flops.count_layers(mha, (torch.empty(2, 5, 16),) * 3)
    by_name = {c.name: c for c in counts}
    assert by_name["out_proj"].flops == 2 * 2 * 5 * 16 * 16
    assert {t for c in counts for t, _ in c.tensors} == {n for n, _ in mha.named_parameters()}


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"model": "resnet51"}, "model"),
        ({"model": "resnet18", "batch_size": 0}, "--batch-size"),
        ({"model": "resnet18", "input_shape": (3, 224), "analytic": True}, "--input-shape"),
        ({"model": "resnet18", "optimizer": "lamb"}, "--optimizer"),
        ({"model": "resnet18", "analytic": True, "calibrate": True}, "--calibrate"),
        ({"model": "resnet18", "step_time": 1.0}, "--step-time"),
        ({"model": "resnet18", "device": "tpu"}, "--device"),
        ({"model": "resnet18", "analytic": True, "device": "V1000"}, "--device"),
        ({"model": "resnet18", "analytic": True, "dtype": "fp8"}, "--dtype"),
        ({"model": nn.ReLU(), "example_input": torch.randn(2, 3)}, "model"),
    ],
)
def test_bad_input_is_one_input_error(kwargs: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        profile(**kwargs)
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_input_that_does_not_fit_a_user_model() -> None:
    with pytest.raises(InputError, match="does not fit"):
        profile(_mlp(), input_shape=(3, 32, 32), batch_size=2)
    with pytest.raises(InputError, match="does not fit"):
        profile(_mlp(), torch.randn(2, 100), analytic=True)


def test_unknown_model_suggests_the_nearest() -> None:
    with pytest.raises(InputError, match="resnet50"):
        profile("resnet51")
