"""``ddlperf explain``: why a scenario performs as predicted, and what would help most.

:func:`explain` takes the same arguments as :func:`ddlperf.api.predict` and returns an
:class:`Explanation`: the prediction, the bottleneck in words and numbers, every resource's
busy share, bytes per PS shard and the tensors behind an imbalance, each worker's wait, the
simulator's critical path of one steady-state iteration (``method="simulate"``), what-ifs
re-predicted with the same method (:mod:`.whatifs`) and how far predictions of this class of
scenario have been from measurements (:mod:`.trust`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ddlperf.explain.loads import (
    ResourceLoad,
    ShardLoad,
    WorkerWait,
    as_dicts,
    bottleneck_words,
    imbalance,
    resource_loads,
    shard_loads,
    worker_waits,
)
from ddlperf.explain.whatifs import WhatIf, candidates, evaluate
from ddlperf.prediction import Prediction

if TYPE_CHECKING:  # the simulator is imported only when a timeline is asked for
    from ddlperf.predictors.simulate.tracks import TrackLog

__all__ = ["Explanation", "WhatIf", "explain"]


@dataclass
class Explanation:
    """Everything ``ddlperf explain`` prints; :meth:`to_dict` is its ``--json``."""

    prediction: Prediction
    bottleneck: str
    resources: list[ResourceLoad]
    shards: list[ShardLoad]
    shard_imbalance: float
    waits: list[WorkerWait]
    what_ifs: list[WhatIf]
    critical_path: dict[str, Any] | None = None
    trust: dict[str, Any] = field(default_factory=dict)
    timeline: TrackLog | None = field(default=None, repr=False)  # simulate: its operations

    def to_dict(self) -> dict[str, Any]:
        return {
            "prediction": self.prediction.to_dict(),
            "bottleneck": {"name": self.prediction.bottleneck, "explanation": self.bottleneck},
            "resources": as_dicts(self.resources),
            "shards": as_dicts(self.shards),
            "shard_imbalance": self.shard_imbalance,
            "waits": as_dicts(self.waits),
            "critical_path": self.critical_path,
            "what_ifs": [w.to_dict() for w in self.what_ifs],
            "trust": self.trust,
        }


def explain(method: str = "analytic", *, what_ifs: bool = True, **kwargs: Any) -> Explanation:
    """Explain one scenario. ``kwargs`` are :func:`ddlperf.api.predict`'s (scenario and
    simulate options); every what-if is predicted with the same method and options."""
    from ddlperf import api
    from ddlperf.explain.trust import trust_for

    log = None
    if method == "simulate":
        from ddlperf.predictors.simulate.tracks import TrackLog

        log = TrackLog()
    base = api.predict(method=method, timeline=log, **kwargs) if log is not None else \
        api.predict(method=method, **kwargs)
    sc = api.scenario(**{k: v for k, v in kwargs.items() if k not in api.SIMULATE_OPTIONS})
    loads = resource_loads(sc, base)
    shards = shard_loads(sc)
    waits = worker_waits(sc, base)
    words = bottleneck_words(sc, base, loads, shards, waits)
    changes: list[WhatIf] = []
    if what_ifs:
        quiet = {k: v for k, v in kwargs.items() if k != "trace"}
        changes = evaluate(candidates(sc, base, quiet), base,
                           lambda **kw: api.predict(method=method, **kw))
    path = None
    if log is not None:
        from ddlperf.explain.critical_path import critical_path

        path = critical_path(sc, base, log)
    return Explanation(base, words, loads, shards, imbalance(shards), waits, changes, path,
                       trust_for(sc, method), log)


# Iterations of the short run that shows one steady-state iteration (warm-up, then two).
TIMELINE_RUN = {"iterations": 2, "warmup": 2}


def simulated_iteration(**kwargs: Any) -> tuple[TrackLog, dict[str, Any] | None]:
    """The simulator's timeline and critical path of one steady-state iteration of a scenario
    (``kwargs``: :func:`ddlperf.api.predict`'s), from a short run with the given seed and
    jitter — what the HTML report shows next to an analytic explanation."""
    from ddlperf import api
    from ddlperf.explain.critical_path import critical_path
    from ddlperf.predictors.simulate.tracks import TrackLog

    log = TrackLog()
    options = {k: v for k, v in kwargs.items() if k not in ("trace", "iterations", "warmup")}
    p = api.predict(method="simulate", timeline=log, **TIMELINE_RUN, **options)
    sc = api.scenario(**{k: v for k, v in options.items() if k not in api.SIMULATE_OPTIONS})
    return log, critical_path(sc, p, log)
