"""Ring all-reduce in closed form: 2(N−1) steps of S/N bytes per bucket on the slowest link,
buckets in gradient-ready order on one stream, overlapped with backward."""

from __future__ import annotations

import numpy as np

from ddlperf.prediction import ResourceUse
from ddlperf.predictors.assembly import GroupTime
from ddlperf.predictors.buckets import bucket_layout
from ddlperf.predictors.rings import ring_intra_share, ring_phases
from ddlperf.predictors.timeline import backward_ready, serial_finish
from ddlperf.scenario import Scenario


def allreduce(sc: Scenario) -> tuple[list[GroupTime], float, list[ResourceUse]]:
    """Buckets in gradient-ready order on one stream; each bucket runs the ring's phases."""
    phases = ring_phases(sc)
    last, bucket_bytes = bucket_layout(sc)
    total = float(sc.tensor_bytes.sum())
    ready = np.full(len(last), -np.inf)
    end_all = 0.0
    computes = []
    for group in sc.groups:
        update = total * group.update_s_per_byte
        tensor_ready, backward_end = backward_ready(
            sc, group, group.forward_s + group.unattributed_s)
        # Offsetting by the optimizer step turns "all start together" into the steady state.
        if sc.strategy.overlap:
            bucket_ready = tensor_ready[last]
        else:
            bucket_ready = np.full(len(last), backward_end)
        ready = np.maximum(ready, update + bucket_ready)
        end_all = max(end_all, update + backward_end)
        computes.append(group.compute_s + update)
    per_phase = [np.array([phase.seconds(s, sc.latency_s) for s in bucket_bytes])
                 for phase in phases]
    step = sum(per_phase) if per_phase else np.zeros(len(bucket_bytes))
    finish = serial_finish(ready, step)
    period = max(float(finish[-1]), end_all)
    slowest = max(computes)
    busy: dict[str, float] = {}
    for phase, seconds in zip(phases, per_phase):
        name = f"ring ({phase.binding})"
        busy[name] = busy.get(name, 0.0) + float(seconds.sum())
    share = ring_intra_share(sc, phases, list(bucket_bytes))
    times = [GroupTime(period, c, period - slowest, slowest - c, share * (period - slowest))
             for c in computes]
    resources = [ResourceUse(name, b, b / period) for name, b in busy.items()]
    return times, period, resources
