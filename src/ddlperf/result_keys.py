"""Names of result columns that predictions, sweeps and their reports share, and the order
of a sweep's columns.

A module of its own, with no imports beyond the standard library, so that the command-line
modules that name a column at import time do not load the numbers stack before ``--help`` is
printed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# A sweep row's headline results (``Prediction.summary()``).
RESULT_KEYS = ("iteration_time_s", "throughput_samples_per_s", "speedup", "scaling_efficiency",
               "bottleneck")
# ASP (and SSP that runs as ASP) of identical workers: the job's iteration time in lockstep,
# BSP's schedule (seconds); a prediction's ``arrangement`` key and a sweep row's column, None
# on other rows (predictors/arrangement.py). Rows of older versions do not have it.
LOCKSTEP_KEY = "lockstep_iteration_time_s"
OUTPUT_KEYS = (*RESULT_KEYS, LOCKSTEP_KEY)


def columns(rows: Iterable[dict[str, Any]]) -> list[str]:
    """Column order for tables and CSV: the axes in given order, then the results (the
    lockstep figure where the rows have it: rows of older versions do not)."""
    cols: list[str] = []
    lockstep = False
    for row in rows:
        lockstep = lockstep or LOCKSTEP_KEY in row
        for key in row:
            if key not in cols and key not in OUTPUT_KEYS and key != "error":
                cols.append(key)
    return [*cols, *RESULT_KEYS, *([LOCKSTEP_KEY] if lockstep else []), "error"]


def is_axis(column: str) -> bool:
    """Whether a column of sweep rows is a swept axis (not a result)."""
    return column not in OUTPUT_KEYS and column != "error"
