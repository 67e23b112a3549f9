"""The measurement summary's figures taken from the trainers' records."""

from __future__ import annotations

import pytest

from ddlperf.measure.run import ps_update_per_byte


def _serve(iteration: int, update_s: float | None, received: float = 1e6) -> dict:
    record = {"type": "serve", "iteration": iteration, "payload_received_bytes": received,
              "recv_s": 0.1}
    if update_s is not None:
        record["update_s"] = update_s
    return record


def test_update_per_byte_is_over_the_steady_iterations() -> None:
    records = [_serve(0, 0.5), _serve(1, 0.5), _serve(2, 0.002), _serve(3, 0.004)]
    assert ps_update_per_byte(records, warmup=2) == pytest.approx(0.006 / 2e6)


def test_a_serve_record_without_timings_is_left_out() -> None:
    # A shard's sender could write its record before the receiver stored the iteration's
    # timings; the summary failed on the missing key (KeyError 'update_s').
    records = [_serve(2, 0.002), _serve(3, None), {"type": "iteration", "iteration": 3}]
    assert ps_update_per_byte(records, warmup=2) == pytest.approx(0.002 / 1e6)


def test_no_shard_records_give_none() -> None:
    assert ps_update_per_byte([{"type": "iteration", "iteration": 5}], warmup=2) is None
    assert ps_update_per_byte([_serve(5, None)], warmup=2) is None
