"""Layer attribution of one hooked step, on timestamps written by hand (no clock involved)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from ddlperf.workload.layer_timing import HookedStep, attribute

pytestmark = pytest.mark.torch


def test_intervals_go_to_the_earlier_timestamps_layer() -> None:
    # Forward: a runs 1–3, its parameter-free ops 3–4, b runs 4–7 and its ops 7–10; the loss
    # runs 10–12. Backward: b 13–17, then a's folded ops 17–18 (b's input gradient), a 18–30.
    events = [(1.0, "pre", "a"), (3.0, "post", "a"), (4.0, "pre", "b"), (7.0, "post", "b"),
              (13.0, "out_grad", "b"), (15.0, "param", "b"), (17.0, "in_grad", "b"),
              (18.0, "out_grad", "a"), (20.0, "param", "a"), (25.0, "in_grad", "a")]
    step = HookedStep(start=0.0, forward_end=10.0, backward_start=12.0, end=30.0, events=events)
    forward, backward, unattributed = attribute(step)
    assert forward == {"a": 1 + 2 + 1, "b": 3 + 3}  # ops before the first layer fold into a
    assert backward == {"b": 2 + 2, "a": 1 + 2 + 5 + 5}
    assert unattributed == 2 + 1  # the loss forward, then the loss backward before b's
    assert sum(forward.values()) + sum(backward.values()) + unattributed == step.end


def test_a_step_without_hooks_is_all_unattributed() -> None:
    step = HookedStep(start=0.0, forward_end=4.0, backward_start=5.0, end=9.0)
    assert attribute(step) == ({}, {}, 9.0)
