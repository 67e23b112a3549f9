"""The simulator against its own output from before the speed work (issue 14).

Frozen data: ``data/simulate_reference.json``, written by ``reference_cases.py`` from main's
code before the speed work (its ``source_commit``; see there). Deterministic runs must agree
to 1e-9. Jittered runs cannot be compared number by number across implementations (event
order may change which worker draws when), so their *distribution* is compared: the mean
iteration time of independent replications (fresh seeds, disjoint from the frozen ones)
against the frozen sample, with a two-sample Kolmogorov–Smirnov test at level 0.001 per
case. ``test_distribution_check_has_power`` shows the same check rejects a model that differs
only a little (6% jitter instead of 5%).
"""

from __future__ import annotations

import json

import pytest
from scipy.stats import ks_2samp

from tests.predictors.simulate.reference_cases import (
    DATA,
    REPLICAS,
    deterministic_cases,
    distribution_cases,
    figures,
    replica_means,
)

FROZEN = json.loads(DATA.read_text())
LEVEL = 1e-3
FRESH = 80  # fresh replications per case
FRESH_SEED0 = 10_000


def _close(a, b, path: str) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-15), path
    else:
        assert a == b, path


@pytest.mark.parametrize("name", list(deterministic_cases()))
def test_deterministic_runs_match_the_frozen_results(name):
    workload, kw = deterministic_cases()[name]
    _close(figures(workload, kw), FROZEN["deterministic"][name], name)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(distribution_cases()))
def test_jittered_iteration_times_have_the_frozen_distribution(name):
    workload, kw = distribution_cases()[name]
    frozen = FROZEN["distributions"][name]
    assert len(frozen) == REPLICAS
    fresh = replica_means(workload, kw, range(FRESH_SEED0, FRESH_SEED0 + FRESH))
    result = ks_2samp(frozen, fresh)
    assert result.pvalue > LEVEL, (name, result)


@pytest.mark.slow
def test_distribution_check_has_power():
    workload, kw = distribution_cases()["ring"]
    fresh = replica_means(workload, {**kw, "jitter": 0.06},
                          range(FRESH_SEED0, FRESH_SEED0 + FRESH))
    assert ks_2samp(FROZEN["distributions"]["ring"], fresh).pvalue < LEVEL
