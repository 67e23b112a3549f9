"""A note where the answer depends on an arrangement no model here predicts.

ASP on one server of three or more identical GPUs: measured from a common start, the GPUs
stayed in lockstep on some clusters and spread evenly over the period on others, and neither
predictor tells which (docs/models.md, *Three to five GPUs of one server*; the dev matrix's
``fresh13-*`` rows: simulate −34% to +17%, analytic −32% to +13%). Both predictors price the
spread arrangement (independent phases), so the prediction gets the other one's figure beside
it, lockstep being BSP's schedule of the same job: a bound a user can plan with rather than
a single number that may be a third too fast (all twenty measured runs of the ``fresh13-*``
rows took at most that figure; four ran within 2% of it).
"""

from __future__ import annotations

from dataclasses import replace

from ddlperf.prediction import Prediction
from ddlperf.scenario import Scenario
from ddlperf.units import format_duration

# a lockstep figure within this share of the prediction says nothing new
SAME_WITHIN = 0.02


def one_server_spread_note(sc: Scenario, prediction: Prediction) -> str | None:
    """The note for ASP on one server of three or more identical GPUs (None elsewhere, or
    where lockstep would not be slower)."""
    strategy = sc.strategy
    if strategy.arch != "ps" or strategy.effective_sync != "asp" or len(sc.groups) != 1:
        return None
    group = sc.groups[0]
    if group.servers != 1 or group.count < 3:
        return None
    from ddlperf.predictors.analytic import predict_analytic

    bsp = strategy.model_copy(update={"sync": "bsp", "staleness": None})
    lockstep = predict_analytic(replace(sc, strategy=bsp, notes=list(sc.notes))).iteration_time_s
    figure = prediction.iteration_time_s
    if lockstep <= figure * (1 + SAME_WITHIN):
        return None
    return (f"ASP on one server of {group.count} GPUs: measured runs of such servers settled "
            "in lockstep on some clusters and spread evenly on others, which ddlperf cannot "
            "tell apart yet (this figure assumes the spread; docs/models.md); in lockstep "
            f"this job takes {format_duration(lockstep)} per iteration, "
            f"{100 * (lockstep / figure - 1):.0f}% more")
