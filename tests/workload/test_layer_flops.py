"""Per-layer FLOPs: parameter-free work folds into the layer before it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from ddlperf.workload import layer_flops  # noqa: E402

pytestmark = pytest.mark.torch


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
