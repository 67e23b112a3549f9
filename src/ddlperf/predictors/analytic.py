"""Coarse-grained models (closed form and queueing), after Zeng, Zhang and Li et al.

- BSP parameter server: per-link FIFO pipelines (pull → forward, backward → push → update);
  the slowest worker and the busiest shard link set the pace. Heterogeneous workers and shard
  imbalance are exact inputs, overlap (WFBP) is a switch.
- ASP parameter server: mean value analysis of a closed queueing network — workers are delay
  stations (think time = compute), shard downlinks, uplinks and update processors are queues —
  so throughput saturates at the PS bottleneck. Multi-class (Schweitzer) for mixed workers.
  With colocated shards every NIC is a station (``analytic_colocated_async``).
- SSP(s): SSP(0) is BSP; for s ≥ 1 the steady state of the read rule of
  :mod:`ddlperf.strategy`: BSP's schedule where ASP would let some workers run faster (the
  bound then holds them and releases their reads with the slowest one's), ASP where ASP
  gives every worker one rate; with colocated shards whose slowest workers move apart, the
  faster ones held without lining anyone up; never worse than BSP.
- Ring all-reduce: 2(N−1) steps of S/N bytes per bucket on the slowest link, buckets in
  gradient-ready order, overlapped with backward.
- Compute noise (layer times with a spread): BSP and all-reduce run on the expected slowest
  draw's timeline (:mod:`.analytic_noise`); ASP and SSP on the means.

Each model lives in its own module (``analytic_ps_bsp``, ``analytic_ps_async``,
``analytic_allreduce``, colocated shards in ``analytic_colocated`` and, for BSP,
``analytic_colocated_bsp``, for ASP/SSP ``analytic_colocated_async``); :mod:`.bottleneck` names
what limits the rate and :mod:`.assembly` turns group times into a Prediction. This module is
the entry point and keeps their names importable from one place.
"""

from __future__ import annotations

from ddlperf.prediction import Prediction
from ddlperf.predictors.analytic_allreduce import allreduce
from ddlperf.predictors.analytic_colocated import colocated_view
from ddlperf.predictors.analytic_colocated_async import shares_host_nics
from ddlperf.predictors.analytic_noise import applies as noise_applies
from ddlperf.predictors.analytic_noise import merge_times, slowest_draw_view
from ddlperf.predictors.analytic_ps_async import (
    ASP_RATES_AGREE,
    async_resources,
    ps_async,
    ps_ssp,
    ssp_is_asp,
    ssp_regime,
    ssp_steady_state,
)
from ddlperf.predictors.analytic_ps_bsp import MAX_PASSES, ps_bsp, ps_layout
from ddlperf.predictors.assembly import (
    GroupTime,
    assemble,
    breakdown,
    describe_inputs,
    goodput_note,
    single_worker_baseline,
)
from ddlperf.predictors.bottleneck import COMPUTE_BOUND_SHARE, SATURATED, name_bottleneck
from ddlperf.predictors.buckets import bucket_layout, buckets
from ddlperf.predictors.queueing import mva
from ddlperf.scenario import Scenario

__all__ = [
    "ASP_RATES_AGREE", "COMPUTE_BOUND_SHARE", "MAX_PASSES", "SATURATED", "GroupTime",
    "allreduce", "assemble", "async_resources", "breakdown", "bucket_layout", "buckets",
    "colocated_view", "describe_inputs", "goodput_note", "mva", "name_bottleneck",
    "predict_analytic", "ps_async", "ps_bsp", "ps_layout", "ps_ssp", "single_worker_baseline",
]


#: what each SSP steady state of the analytic model means, for the prediction's notes
SSP_REGIMES = {
    "asp": "every worker at one ASP rate, so the staleness bound holds nobody (SSP runs as ASP)",
    "held": ("the faster workers are held at the staleness bound, waiting for slower workers "
             "that move apart, so nobody is lined up (each held worker gets its wait)"),
    "bsp": ("the faster workers are held at the staleness bound behind one distinct slowest "
            "worker and released with its reads: BSP's schedule"),
}


#: the held regime on colocated hosts against the dev matrix's six measured rows of it
#: (twenty-second session): the analytic model −25.8% to +16.0%, the simulator within 2.1% on
#: five and +12.7% on one (fresh27-ssp1-coloc-greedy-slow: the run held the host of the big
#: shard and the others ran at 0.83 s, between ASP's 0.63 s and BSP's 0.98 s)
HELD_COLOCATED_NOTE = (
    "analytic SSP with colocated shards and workers held at the bound: on the six measured "
    "jobs of this kind (dev matrix) this model was 26% short to 16% long, the simulator within "
    "2% on five of them (--method simulate)")

def ssp_runs_as_asp(sc: Scenario) -> bool:
    """Whether the analytic model runs this SSP scenario as ASP (nobody held by the bound,
    :func:`~ddlperf.predictors.analytic_ps_async.ssp_is_asp`), on the views it predicts it
    with; the simulator then starts noise-free workers (``--jitter 0``) at random phases, as
    under ASP."""
    return ssp_is_asp(colocated_view(sc))


def ssp_lines_up(sc: Scenario) -> bool:
    """Whether the analytic model's SSP steady state is BSP's schedule (the faster workers
    held behind one distinct slowest; :func:`.analytic_ps_async.ssp_regime`): a state the
    bound forces, so a simulated run that ends elsewhere is in a balance some noise would
    break."""
    return ssp_regime(colocated_view(sc)) == "bsp"


def predict_analytic(sc: Scenario) -> Prediction:
    """Coarse-grained prediction of a resolved scenario."""
    strategy = sc.strategy
    notes: list[str] = []
    if strategy.arch == "ps":
        # host workers split off at their NIC's own rate; BSP (analytic_colocated_bsp) and
        # ASP/SSP's queueing network (analytic_colocated_async) share the NIC between roles
        sc = colocated_view(sc)
    model, parts = sc, None
    if noise_applies(sc):  # a barrier every step: the step waits for the slowest draw
        model, parts = slowest_draw_view(sc)
        notes.append("compute noise: the workload's layer times vary (cv), and a synchronous "
                     "step waits for the slowest worker's draw: layer times are the expected "
                     "slowest timeline of the workers (order statistics); compute stays the "
                     "mean, the rest is waiting")
    if strategy.arch == "allreduce":
        times, period, resources = allreduce(model)
    elif strategy.effective_sync == "bsp":
        times, period, resources = ps_bsp(model)
    else:
        notes.append("analytic ASP/SSP: mean value analysis of a closed queueing network" + (
            "; a queueing station per NIC (colocated shards share their hosts' NICs)"
            if shares_host_nics(sc) else ""))
        if strategy.sync == "ssp":
            regime, (times, period, resources) = ssp_steady_state(sc)
            notes.append("analytic SSP in steady state: " + SSP_REGIMES[regime])
            if regime == "held" and shares_host_nics(sc):
                notes.append(HELD_COLOCATED_NOTE)
        else:
            times, period, resources = ps_async(sc)
    if parts is not None:
        times = merge_times(sc, times, parts)
    bottleneck = name_bottleneck(sc, times, period, resources)
    return assemble(sc, "analytic", times, resources, bottleneck, notes)
