"""Small torch models for the profile tests (import after ``pytest.importorskip("torch")``)."""

from __future__ import annotations

import torch
from torch import nn


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024),
        nn.ReLU(), nn.Linear(1024, 10),
    )


def mlp_input() -> torch.Tensor:
    return torch.randn(256, 512, generator=torch.Generator().manual_seed(1))
