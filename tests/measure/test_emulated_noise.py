"""Random layer times of emulated device time: the simulator's lognormal, seeded per worker."""

from __future__ import annotations

import numpy as np
import pytest

from ddlperf.measure.emulated_noise import LayerNoise, layer_noise


def _noise(cv: float, worker: int = 0, seed: int = 0) -> LayerNoise:
    return LayerNoise([0.01, 0.02], [0.03, 0.04], [cv, cv], [cv, cv], seed, worker)


def test_no_spread_gives_the_workloads_times_every_iteration() -> None:
    noise = _noise(0.0)
    assert not noise.noisy
    for _ in range(3):
        assert noise.draw() == ([0.01, 0.02], [0.03, 0.04])


def test_draws_keep_the_mean_and_have_the_layers_spread() -> None:
    noise = _noise(0.3)
    draws = np.array([[*fwd, *bwd] for fwd, bwd in (noise.draw() for _ in range(20_000))])
    base = np.array([0.01, 0.02, 0.03, 0.04])
    assert draws.mean(axis=0) == pytest.approx(base, rel=0.02)
    assert (draws.std(axis=0) / base) == pytest.approx([0.3] * 4, rel=0.05)
    assert (draws > 0).all()


def test_a_rerun_draws_the_same_and_workers_draw_apart() -> None:
    a, b, other = _noise(0.2), _noise(0.2), _noise(0.2, worker=1)
    first = [a.draw() for _ in range(4)]
    assert first == [b.draw() for _ in range(4)]
    assert first != [other.draw() for _ in range(4)]
    assert first != [_noise(0.2, seed=1).draw() for _ in range(4)]


def test_a_spec_entry_without_cv_lists_has_no_noise() -> None:
    worker = {"index": 2, "forward": [0.01], "backward": [0.02]}
    assert not layer_noise({"seed": 0}, worker).noisy
    worker.update(forward_cv=[0.0], backward_cv=[0.1])
    noise = layer_noise({"seed": 0}, worker)
    assert noise.noisy and noise.draw()[0] == [0.01]  # only the backward has a spread
