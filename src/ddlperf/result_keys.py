"""Names of result columns that predictions, sweeps and their reports share.

A module of its own, with no imports, so that the command-line modules that name a column at
import time do not load the numbers stack before ``--help`` is printed.
"""

# ASP (and SSP that runs as ASP) of identical workers: the job's iteration time in lockstep,
# BSP's schedule (seconds); a prediction's ``arrangement`` key and a sweep row's column
# (predictors/arrangement.py)
LOCKSTEP_KEY = "lockstep_iteration_time_s"
