"""``profile``: bad input is one InputError naming the field."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from ddlperf.errors import InputError  # noqa: E402
from ddlperf.workload.profile import profile  # noqa: E402
from tests.workload.nets import mlp  # noqa: E402

pytestmark = pytest.mark.torch


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
        profile(mlp(), input_shape=(3, 32, 32), batch_size=2)
    with pytest.raises(InputError, match="does not fit"):
        profile(mlp(), torch.randn(2, 100), analytic=True)


def test_unknown_model_suggests_the_nearest() -> None:
    with pytest.raises(InputError, match="resnet50"):
        profile("resnet51")
