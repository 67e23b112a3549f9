"""The analytic predictor and the batched sweep against their output before the speed work.

Frozen data: ``data/analytic_reference.json``, written by ``analytic_reference_cases.py``
from main's code before the batched-path speed work of issue 12 (its ``source_commit``).
Every number must agree to 1e-9 (relative); bottlenecks, errors and the point columns exactly.
"""

from __future__ import annotations

import json
import math
import warnings

import pytest

from tests.predictors.analytic_reference_cases import (
    BARRIER_CASES,
    DATA,
    GRIDS,
    barrier_rows,
    barrier_server_rows,
    grid_rows,
)

FROZEN = json.loads(DATA.read_text())


def _close(got, frozen, path: str) -> None:
    if isinstance(frozen, dict):
        assert got.keys() == frozen.keys(), path
        for k in frozen:
            _close(got[k], frozen[k], f"{path}.{k}")
    elif isinstance(frozen, list):
        assert len(got) == len(frozen), path
        for i, (x, y) in enumerate(zip(got, frozen)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(frozen, float) and not isinstance(got, bool):
        assert isinstance(got, (int, float)), path
        assert math.isclose(got, frozen, rel_tol=1e-9, abs_tol=0), (path, got, frozen)
    else:
        assert got == frozen, path


@pytest.mark.parametrize("name", list(GRIDS))
def test_sweep_rows_match_the_frozen_rows(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # implausible-value warnings of the error points
        rows = grid_rows(name)
    _close(rows, FROZEN["grids"][name], name)


@pytest.mark.parametrize("name", list(BARRIER_CASES))
def test_step_barrier_batches_match_the_frozen_rows(name):
    _close(barrier_rows(name), FROZEN["barrier"][name], name)


def test_step_barrier_on_servers_matches_the_frozen_rows():
    _close(barrier_server_rows(), FROZEN["barrier_servers"], "barrier_servers")


def test_the_frozen_grids_cover_both_paths_and_many_bottlenecks():
    rows = [dict(zip(grid["columns"][row[0]], row[1:])) for grid in FROZEN["grids"].values()
            for row in grid["rows"]]
    assert len(rows) > 2000
    assert sum(row["error"] is not None for row in rows) > 50
    assert len({row["bottleneck"] for row in rows}) > 10
