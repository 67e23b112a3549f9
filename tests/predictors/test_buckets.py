"""Gradient buckets: a bucket closes once it reaches the cap."""

import numpy as np

from ddlperf.predictors.buckets import buckets


def test_buckets_close_at_cap():
    assert [b.tolist() for b in buckets(np.array([10, 10, 30, 5]), 25)] == [[0, 1, 2], [3]]
