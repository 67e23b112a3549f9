"""Which resource (or the straggler, or compute) limits the iteration rate (both predictors)."""

from __future__ import annotations

from ddlperf.prediction import ResourceUse, busiest
from ddlperf.predictors.assembly import GroupTime
from ddlperf.scenario import Scenario

# Below this share of the iteration, exposed communication is not called a bottleneck.
COMPUTE_BOUND_SHARE = 0.05

SATURATED = 0.8  # a shared station this busy paces asynchronous workers


def name_bottleneck(
    sc: Scenario, times: list[GroupTime], period: float, resources: list[ResourceUse]
) -> str:
    """What limits the iteration rate, with the one tie rule of :func:`busiest`.

    Synchronized workers (BSP, all-reduce, and SSP whose bound holds someone — the same
    schedule as BSP): the straggler if waiting for it is the largest exposed part, compute if
    communication is hidden, else the busiest resource. Asynchronous workers (ASP, SSP whose
    bound holds nobody) each run their own cycle: a shared station at least 80% busy paces
    them; below that, compute when it is the larger part of a worker's period, else the
    busiest resource.
    """
    slowest_group = max(zip(sc.groups, times), key=lambda gt: gt[1].compute_s)[0]
    max_wait = max(t.wait_s for t in times)
    exposed = period - max(t.compute_s for t in times)
    held = sc.strategy.sync == "ssp" and max_wait > COMPUTE_BOUND_SHARE * period
    if sc.strategy.arch == "ps" and sc.strategy.effective_sync != "bsp" and not held:
        hot = busiest(resources)
        if hot.utilization >= SATURATED:
            return hot.name
        compute = sum(t.compute_s for t in times) / len(times)
        communication = sum(t.communication_s for t in times) / len(times)
        if compute >= communication:
            return "compute"
        return hot.name
    if max_wait > exposed and max_wait > COMPUTE_BOUND_SHARE * period:
        return f"straggler {slowest_group.worker_name()}"
    if exposed <= COMPUTE_BOUND_SHARE * period:
        return "compute"
    return busiest(resources).name
