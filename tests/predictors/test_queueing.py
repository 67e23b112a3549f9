"""Mean value analysis against a hand-computed network and the single-class recursion."""

import numpy as np
import pytest

from ddlperf.predictors.queueing import mva


def test_mva_single_class_by_hand():
    # one station D = 1, think Z = 1, N = 2:
    # n=1: R = 1, X = 1/2, Q = 1/2; n=2: R = 1.5, X = 2/2.5 = 0.8
    x, r = mva(np.array([1.0]), np.array([[1.0]]), np.array([2.0]))
    assert x[0] == pytest.approx(0.8) and r[0, 0] == pytest.approx(1.5)


def test_mva_multiclass_matches_single_class_when_classes_equal():
    z, d = np.array([1.0, 1.0]), np.array([[0.3, 0.3], [0.2, 0.2]])
    x2, _ = mva(z, d, np.array([3.0, 3.0]))
    x1, _ = mva(z[:1], d[:, :1], np.array([6.0]))
    assert x2.sum() == pytest.approx(x1[0], rel=0.05)  # Schweitzer is approximate
