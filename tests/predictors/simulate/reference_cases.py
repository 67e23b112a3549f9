"""Scenarios whose simulated results were frozen before the speed work of issue 14.

``python -m tests.predictors.simulate.reference_cases COMMIT`` (from the repository root, with
the code to freeze first on ``PYTHONPATH``) rewrites ``data/simulate_reference.json``. The
committed file was generated from main's code just before the simulator changes of issue 14
landed (its ``source_commit``), so the tests in ``test_reference.py`` compare today's
simulator with that one (a case added later, for a feature main gained after the freeze, was
computed from that main commit's code: ``added_later`` maps it to the commit):

* ``deterministic``: no jitter; every figure must agree to 1e-9 (relative);
* ``distributions``: with 5% jitter, the mean iteration time of each of ``REPLICAS`` runs
  (seeds 0 … REPLICAS−1); the tests draw fresh runs with other seeds and compare the two
  samples with a two-sample Kolmogorov–Smirnov test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ddlperf.api import make_cluster, make_strategy, predict
from ddlperf.predictors.simulate import predict_simulate
from ddlperf.scenario import resolve
from tests.conftest import make_workload

DATA = Path(__file__).parent / "data" / "simulate_reference.json"
REPLICAS = 120
FROZEN_SEED0 = 0

MIXED = {"workers": [{"count": 3}, {"name": "slow", "count": 2, "speed": 0.6}]}
SERVERS2 = {"gpus_per_node": 2, "intra": "NVLink2"}
SERVERS4 = {"gpus_per_node": 4, "intra": "NVLink2"}
CAP = "40MB/s"  # a per-connection transport cap that binds for the small workload


def small_workload():
    """Twelve layers, 1–3 tensors each, a mix of tiny and MB-sized messages."""
    layers = []
    for i in range(12):
        sizes = [400_000 + 150_000 * (i % 5), 2_048][: 1 + i % 2] + ([256] if i % 3 == 0 else [])
        layers.append((0.002 + 0.0005 * (i % 4), 0.004 + 0.001 * (i % 3), sizes))
    return make_workload(layers, update_s_per_byte=2e-10)


def deterministic_cases() -> dict[str, tuple[Any, dict[str, Any]]]:
    small = small_workload()
    return {
        "ps-bsp-resnet50-8w2ps": ("resnet50", dict(workers=8, ps=2, iterations=6)),
        "ps-bsp-small-nooverlap": (small, dict(workers=6, ps=3, overlap=False, iterations=8)),
        "ps-bsp-small-even": (small, dict(workers=5, ps=2, sharding="even", iterations=8)),
        "ps-bsp-small-colocated": (small, dict(workers=4, ps=2, placement="colocated",
                                                 iterations=8)),
        "ps-bsp-small-mixed": (small, dict(cluster=MIXED, ps=2, iterations=8)),
        "ps-asp-small": (small, dict(workers=6, ps=2, sync="asp", iterations=8)),
        "ps-asp-small-nooverlap": (small, dict(workers=4, ps=2, sync="asp", overlap=False,
                                                 iterations=8)),
        "ps-asp-small-mixed": (small, dict(cluster=MIXED, ps=1, sync="asp", iterations=10)),
        "ps-ssp1-small-mixed": (small, dict(cluster=MIXED, ps=2, sync="ssp", staleness=1,
                                              iterations=10)),
        "ring-resnet50-16w": ("resnet50", dict(arch="allreduce", workers=16, iterations=5)),
        "ring-small-mixed": (small, dict(arch="allreduce", cluster=MIXED, iterations=8)),
        "ring-small-each": (small, dict(arch="allreduce", workers=6, iterations=6,
                                         ring_steps="each")),  # predict_simulate only
        "ring-small-nooverlap": (small, dict(arch="allreduce", workers=5, overlap=False,
                                               iterations=6)),
        # servers, racks and the transport's per-connection cap (private cap links)
        "ps-bsp-small-transport": (small, dict(workers=6, ps=2, transport=CAP, iterations=8)),
        "ps-bsp-small-servers-colocated": (small, dict(workers=8, **SERVERS2, ps=2,
                                                         placement="colocated",
                                                         bandwidth="2Gbps", iterations=8)),
        "ps-bsp-small-servers-aggregated": (small, dict(workers=8, **SERVERS4, ps=2,
                                                          local_aggregation=True,
                                                          transport=CAP, iterations=8)),
        "ps-asp-small-servers-transport": (small, dict(workers=8, **SERVERS2, ps=2, sync="asp",
                                                         transport=CAP, iterations=10)),
        "ring-small-servers-transport": (small, dict(arch="allreduce", workers=8, **SERVERS4,
                                                       transport=CAP, iterations=6)),
        "ps-bsp-small-step-barrier": (small, dict(workers=6, ps=3, step_barrier=True,
                                                    iterations=8)),
        "ring-small-hierarchical-racks": (small, dict(arch="allreduce", workers=16,
                                                        allreduce="hierarchical", **SERVERS2,
                                                        rack_size=2, rack_uplink="5Gbps",
                                                        iterations=6)),
    }


def distribution_cases() -> dict[str, tuple[Any, dict[str, Any]]]:
    small = small_workload()
    common = dict(jitter=0.05, iterations=6, warmup=2)
    return {
        "ps-bsp": (small, dict(workers=8, ps=2, **common)),
        "ps-asp": (small, dict(workers=8, ps=2, sync="asp", **common)),
        "ps-ssp1": (small, dict(cluster=MIXED, ps=2, sync="ssp", staleness=1, **common)),
        "ring": (small, dict(arch="allreduce", workers=12, **common)),
        "ps-bsp-servers-transport": (small, dict(workers=8, **SERVERS2, ps=2, transport=CAP,
                                                 **common)),
        "ring-servers-transport": (small, dict(arch="allreduce", workers=8, **SERVERS2,
                                               transport=CAP, **common)),
    }


def figures(workload: Any, kw: dict[str, Any]) -> dict[str, Any]:
    """The numbers of a deterministic prediction that the speed work must not change."""
    if "ring_steps" in kw:
        kw = dict(kw)
        steps = kw.pop("ring_steps")
        kw.pop("arch")
        sc = resolve(workload, make_cluster(None, kw.pop("workers"), arch="allreduce"),
                     make_strategy(arch="allreduce"))
        p = predict_simulate(sc, jitter=0.0, ring_steps=steps, **kw)
    elif isinstance(workload, str):
        p = predict(workload, method="simulate", jitter=0.0, **kw)
    else:
        p = predict(workload=workload, method="simulate", jitter=0.0, **kw)
    return {
        "iteration_time_s": p.iteration_time_s,
        "throughput_samples_per_s": p.throughput_samples_per_s,
        "breakdown_s": p.breakdown_s,
        "workers": [[r.name, r.iteration_time_s, r.compute_s, r.communication_s, r.wait_s]
                    for r in p.workers],
        "resources": [[r.name, r.busy_s, r.utilization] for r in p.resources],
        "percentiles": p.percentiles,
        "bottleneck": p.bottleneck,
    }


def replica_means(workload: Any, kw: dict[str, Any], seeds: range) -> list[float]:
    """Mean iteration time of one run per seed (independent samples)."""
    return [predict(workload=workload, method="simulate", seed=s, **kw).iteration_time_s
            for s in seeds]


def main() -> None:
    out = {
        "generated_by": "python -m tests.predictors.simulate.reference_cases",
        "source_commit": sys.argv[1] if len(sys.argv) > 1 else "unknown",
        "deterministic": {name: figures(w, kw) for name, (w, kw) in
                          deterministic_cases().items()},
        "distributions": {name: replica_means(w, kw, range(FROZEN_SEED0,
                                                           FROZEN_SEED0 + REPLICAS))
                          for name, (w, kw) in distribution_cases().items()},
    }
    DATA.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {DATA}")


if __name__ == "__main__":
    main()
