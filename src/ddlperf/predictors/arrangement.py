"""A note where the answer depends on an arrangement no model here predicts.

ASP with identical workers: from the job's common start, measured runs stayed in lockstep on
some clusters and spread over the period on others, and what decides it lies below both
models' level of detail (docs/models.md, *What decides the arrangement*: capping the kernel's
send buffers alone moved one emulated cluster from 0.73 to 0.80 s, its lockstep being 1.02 s;
TCP's restart after idle and its congestion control did not matter). The
predictions price one arrangement (independent phases, or lockstep where the workers are held
in it: one server's two GPUs, the remote pair of a host holding every shard), so the
prediction gets the lockstep figure beside it, lockstep being BSP's schedule of the same job:
a bound a user can plan with. Every one of the dev matrix's 43 measured ASP rows of identical
workers took at most it (the most, 0.55% above: noise); one server of three or more GPUs is
where the two predictors miss most (``fresh13-*``: simulate −34% to +17%).

SSP of identical workers is ASP (its bound never holds anyone), and its measured runs move
between arrangements as much: four of the seven ``fresh15-*``/``fresh16-*`` SSP rows measured
twice differed by 10–20% between their two runs (fresh15-ssp3-5w-1s-small 0.567 and 0.682 s).
All 23 runs of the dev matrix's 18 SSP rows of identical workers took at most the lockstep
figure (the most, 0.991 of it), so such SSP gets the same note.

ASP on servers of several GPUs with workers of more than one kind (no lockstep figure: the
workers differ) has the same question one level down: whether a server's GPUs move together
through its NIC or on phases of their own. The predictions price them apart (a job of
thousands of iterations parts them, ``analytic_async_links.independent_gpus``), and measured
runs took both: ``fresh26-asp-srv-2nic-slow`` stayed together in two runs (0.850 and 0.871 s;
apart 0.769 s, together 0.886 s), ``fresh23-srv-asp-slowsrv`` ran at the together figure
(1.142 s; 1.126 and 1.144 s). So such a prediction gets the figure with every server's GPUs
together, under the same key: in the 21 measured ASP rows on servers of several GPUs
(re-predicted, twenty-second session) every run took at most it (the most, 0.2% above:
noise), where the figure apart was up to 35% short.
"""

from __future__ import annotations

from dataclasses import replace

from ddlperf.prediction import Prediction
from ddlperf.scenario import Scenario
from ddlperf.strategy import Strategy
from ddlperf.units import format_duration, format_size

# a lockstep figure within this share of the prediction says nothing new
SAME_WITHIN = 0.02


def lockstep_figure(sc: Scenario, prediction: Prediction | float) -> float | None:
    """The job's iteration time in lockstep (BSP's schedule, seconds) for ASP with identical
    workers (one worker group of two or more), and SSP of them whose bound never holds anyone
    (which is ASP); None elsewhere or where lockstep would not be more than ``SAME_WITHIN``
    slower than ``prediction`` (a prediction, or its iteration time in seconds)."""
    everyone = has_lockstep_figure(sc)
    together = not everyone and servers_apart(sc)
    if not (everyone or together):
        return None
    from ddlperf.predictors.analytic import predict_analytic, ssp_runs_as_asp

    if sc.strategy.effective_sync == "ssp" and not ssp_runs_as_asp(sc):
        return None
    slower = replace(sc, gpus_together=True) if together else lockstep_scenario(sc)
    return above_prediction(predict_analytic(slower).iteration_time_s, prediction)


def lockstep_of(sc: Scenario) -> str:
    """Who moves together in the job the figure prices: ``workers`` (every worker, BSP's
    schedule) or ``server_gpus`` (each server's GPUs, the servers apart)."""
    return "workers" if has_lockstep_figure(sc) else "server_gpus"


def servers_apart(sc: Scenario) -> bool:
    """ASP (or SSP) on a PS where some server's GPUs are priced on phases of their own
    (:func:`~ddlperf.predictors.analytic_async_links.independent_gpus`): the job whose
    figure is every server's GPUs together."""
    from ddlperf.predictors.analytic_async_links import independent_gpus

    return (lockstep_strategy(sc.strategy) and not sc.gpus_together
            and any(g.gpus > 1 and independent_gpus(sc, g) for g in sc.groups))


def has_lockstep_figure(sc: Scenario) -> bool:
    """Whether the job is of the kind that may get a lockstep figure: ASP or SSP on a
    parameter server (:func:`lockstep_strategy`), one group of two or more identical workers
    (SSP gets it only where its bound never holds anyone, which needs the model to tell)."""
    return lockstep_strategy(sc.strategy) and len(sc.groups) == 1 and sc.groups[0].count >= 2


def lockstep_strategy(strategy: Strategy) -> bool:
    """Whether jobs of this strategy may get a lockstep figure: ASP or SSP on a PS."""
    return strategy.arch == "ps" and strategy.effective_sync in ("asp", "ssp")


def lockstep_scenario(sc: Scenario) -> Scenario:
    """The same job in lockstep: BSP's schedule."""
    bsp = sc.strategy.model_copy(update={"sync": "bsp", "staleness": None})
    return replace(sc, strategy=bsp, notes=list(sc.notes))


def above_prediction(lockstep: float, prediction: Prediction | float) -> float | None:
    """``lockstep`` where it is more than ``SAME_WITHIN`` slower than the prediction."""
    seconds = prediction if isinstance(prediction, (int, float)) else prediction.iteration_time_s
    return lockstep if lockstep > seconds * (1 + SAME_WITHIN) else None


def lockstep_note(sc: Scenario, prediction: Prediction,
                  lockstep: float | None = None) -> str | None:
    """The note that goes with :func:`lockstep_figure` (``lockstep``: that figure where the
    caller has it; None where there is no figure)."""
    if lockstep is None:
        lockstep = lockstep_figure(sc, prediction)
    if lockstep is None:
        return None
    strategy, group = sc.strategy, sc.groups[0]
    if not has_lockstep_figure(sc):  # servers' GPUs together (servers_apart)
        lead = ("ASP" if strategy.effective_sync == "asp" else
                f"SSP({strategy.staleness}), whose bound holds nobody here (so it runs as ASP),")
        return (f"{lead} on servers of several GPUs: measured runs of such jobs had each "
                "server's GPUs move together through its NIC in some runs and apart in "
                "others, which ddlperf does not predict (docs/models.md); with every "
                f"server's GPUs together this job takes {format_duration(lockstep)} per "
                f"iteration, {100 * (lockstep / prediction.iteration_time_s - 1):.0f}% more "
                "than this prediction")
    if group.servers == 1 and group.count >= 3:
        who = f"the {group.count} GPUs of one server"
    else:
        who = f"{group.count} identical workers"
    lead = (f"ASP with {who}" if strategy.effective_sync == "asp" else
            f"SSP({strategy.staleness}) with {who}, whom its bound never holds (so it runs as "
            "ASP)")
    note = (f"{lead}: measured runs of such jobs settled in lockstep on some "
            "clusters and apart on others, decided by details ddlperf does not model (such "
            "as the kernel's send buffers; docs/models.md); in lockstep this job takes "
            f"{format_duration(lockstep)} per iteration, "
            f"{100 * (lockstep / prediction.iteration_time_s - 1):.0f}% more than this "
            "prediction")
    shards = unequal_shards(sc)
    if shards is not None:
        note += (f". Its shards are of unequal size ({format_size(shards[0])} to "
                 f"{format_size(shards[1])}): measured runs of such jobs stayed near lockstep "
                 "(0.91-1.00 of it), where the analytic model prices the workers apart "
                 "(9-34% short) and the simulator came within 10% (--method simulate)")
    return note


# A shard holding this many times the bytes of the smallest (that holds any) makes the shards
# "unequal" for the note: the three measured rows of the kind had 3, 4 and 7 times.
UNEQUAL_SHARDS = 2.0


def unequal_shards(sc: Scenario) -> tuple[float, float] | None:
    """(smallest, largest) bytes of dedicated shards of unequal size, or None: where ASP's
    measured runs (``fresh19-*``) stayed near lockstep and the analytic network did not."""
    if len(sc.shards) < 2 or any(shard.host is not None for shard in sc.shards):
        return None
    held = [float(b) for b in sc.placement.sum(axis=0) if b > 0]
    if len(held) < 2 or max(held) < UNEQUAL_SHARDS * min(held):
        return None
    return min(held), max(held)
