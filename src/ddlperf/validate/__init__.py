"""``ddlperf validate``: predicted vs measured, scenario by scenario, over a matrix file.

For every scenario of a YAML matrix (see :class:`MatrixFile`):

1. **compute, in the same session.** ``compute: real``: the zoo model is profiled on this CPU
   (``ddlperf profile``, one thread, in a fresh process like every trainer rank) right before
   the measurement, and both predictors start from that profile (CPU speed drifts by ~10%
   between processes and minutes here). ``compute: emulated``: the workload's per-layer seconds
   are what the trainers wait (emulated device time), so the workload itself is the ground
   truth of compute and is predicted from unchanged.
2. **heterogeneity.** Emulated device time: a worker group's ``speed`` in ``cluster`` (the
   trainers wait ``seconds / speed``), exact by construction. CPU quota (real compute): the
   slowdown is not exactly 1/quota, so the quota'd worker's training step is timed inside a
   cgroup with that quota while an unrestricted copy runs beside it (two computing processes,
   as in the run); ``speed = free step / quota'd step`` goes into the prediction's cluster,
   with the quota as the worker's ``cpu_cap`` and this machine's communication CPU per byte
   (:mod:`~ddlperf.validate.comm_cpu`: the PS trainer with one worker and one shard on two
   emulated hosts, its CPU clocks against the model's step alone) as its
   ``comm_cpu_s_per_byte``: a quota'd host pays its communication from its quota
   (:mod:`ddlperf.host_cpu`).
3. **the PS processor.** The PS shards of the measurement are CPU processes (SGD with momentum).
   Their cost per gradient byte is measured here once per session (the same optimizer step on
   one thread) and given to the predictors as ``ps.update_s_per_byte``, unless the scenario's
   cluster sets it. (Real compute: the profile's own optimizer timing, the same measurement.)
4. **measure** (:func:`ddlperf.measure.run.measure`: probes every link, runs the trainers,
   checks the bytes on the wire) and **predict** with both methods, from the same workload,
   cluster and strategy. Links: the configured rate × goodput (default), or the probed
   goodput of every link (``rates="probed"``).
5. **compare** iteration times: ``error_pct = 100 × (predicted − measured) / measured``.

Results go to ``OUT/results.json``, ``OUT/results.csv`` and ``OUT/validation.png`` after every
scenario (atomically), so an interrupted run keeps what finished; ``resume=True`` skips scenarios
already done with unchanged parameters.

Modules, one job each: :mod:`~ddlperf.validate.matrix_file` (the YAML schema),
:mod:`~ddlperf.validate.plan` (scenarios resolved and checked before any run),
:mod:`~ddlperf.validate.calibration` (in-session timings of this CPU),
:mod:`~ddlperf.validate.comm_cpu` (communication CPU per byte on this machine),
:mod:`~ddlperf.validate.clusters` (the cluster given to the predictors),
:mod:`~ddlperf.validate.run` (measure, predict, compare), :mod:`~ddlperf.validate.compare`
(errors and the summary) and :mod:`~ddlperf.validate.results` (files written and read back).
:mod:`~ddlperf.validate.published_file` and :mod:`~ddlperf.validate.published` are the
published check (``--published``): published numbers predicted, no run.
"""

from __future__ import annotations

from ddlperf.validate.calibration import calibrate_ps_update, profile_real, quota_speeds
from ddlperf.validate.clusters import probed_cluster, with_ps_update, with_worker_overrides
from ddlperf.validate.compare import (
    METHODS,
    compare,
    error_pct,
    probe_deviation,
    summarize,
)
from ddlperf.validate.matrix_file import (
    MatrixFile,
    Params,
    ScenarioEntry,
    Synthetic,
    SyntheticLayer,
    load_matrix,
)
from ddlperf.validate.plan import Plan, merged_params, plan_matrix, plan_scenario
from ddlperf.validate.published import (
    PUBLISHED_FORMAT,
    PublishedRun,
    check_published,
    plan_published,
    run_published,
    write_published,
)
from ddlperf.validate.published_file import PublishedFile, load_published
from ddlperf.validate.repredict import repredict
from ddlperf.validate.results import (
    RESULTS_FORMAT,
    ValidationRun,
    clean_json,
    load_results,
    machine_info,
    write_results,
)
from ddlperf.validate.run import RATES, run_scenario, validate

__all__ = [
    "METHODS",
    "PUBLISHED_FORMAT",
    "RATES",
    "RESULTS_FORMAT",
    "MatrixFile",
    "Params",
    "Plan",
    "PublishedFile",
    "PublishedRun",
    "ScenarioEntry",
    "Synthetic",
    "SyntheticLayer",
    "ValidationRun",
    "calibrate_ps_update",
    "check_published",
    "clean_json",
    "compare",
    "error_pct",
    "load_matrix",
    "load_published",
    "load_results",
    "machine_info",
    "merged_params",
    "plan_matrix",
    "plan_published",
    "plan_scenario",
    "probe_deviation",
    "probed_cluster",
    "profile_real",
    "quota_speeds",
    "repredict",
    "run_published",
    "run_scenario",
    "summarize",
    "validate",
    "with_ps_update",
    "with_worker_overrides",
    "write_published",
    "write_results",
]
