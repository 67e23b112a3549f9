"""Sweep grids whose analytic rows were frozen before the batched-path speed work (issue 12).

``python -m tests.predictors.analytic_reference_cases COMMIT`` (from the repository root, with
the code to freeze first on ``PYTHONPATH``) rewrites ``data/analytic_reference.json``, keeping
its notes: every row of every grid below, as ``ddlperf.sweep.sweep`` returns it (as a table),
plus the batched model's rows for step-barrier templates (a strategy the sweep axes cannot
express).
``test_analytic_reference`` compares today's code with them to 1e-9 (relative); bottlenecks
and errors must be equal.

The grids cover both paths of the sweep: the batched one (PS BSP/ASP/SSP, all-reduce, every
sharding, overlap on and off, dtypes, gradient dtypes, accumulation, goodput, latency,
buckets) and the per-point one (servers of several GPUs with both all-reduce algorithms and
local aggregation, NICs, racks, colocated shards, heterogeneous workers, bad values).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ddlperf.api import make_cluster, make_strategy, make_workload
from ddlperf.predictors.analytic import predict_analytic
from ddlperf.predictors.analytic_batch import batch_key, point_values, predict_batch
from ddlperf.result_keys import LOCKSTEP_KEY
from ddlperf.scenario import resolve
from ddlperf.sweep import RESULT_KEYS, sweep

DATA = Path(__file__).parent / "data" / "analytic_reference.json"

MIXED = {"workers": [{"count": 3}, {"name": "slow", "count": 2, "speed": 0.6}], "ps": 2}

# name: (axes, fixed keywords)
GRIDS: dict[str, tuple[dict[str, list[Any]], dict[str, Any]]] = {
    "ps_and_ring": ({
        "model": ["resnet50", "vgg16"],
        "workers": [1, 3, 8, 32, 128],
        "ps": [1, 3, 4],
        "bandwidth": ["1Gbps", 25e9, "100Gbps"],
        "latency": ["5us"],
        "arch": ["ps", "allreduce"],
        "sync": ["bsp", "asp", "ssp"],
        "staleness": [2],
        "sharding": ["round_robin", "greedy", "even"],
        "overlap": [True, False],
    }, {}),
    "dtypes": ({
        "workers": [2, 16],
        "ps": [2],
        "bandwidth": ["10Gbps", "40Gbps"],
        "arch": ["ps", "allreduce"],
        "sync": ["bsp", "asp"],
        "dtype": ["fp32", "fp16", "bf16"],
        "grad_dtype": [None, "fp16"],
        "accumulation": [1, 4],
        "bucket_size": [None, "4MB"],
    }, {"model": "resnet50", "device": "A100", "goodput": 0.8, "latency": 0.0}),
    "batch_and_device": ({
        "model": ["resnet18", "inception_v3"],
        "batch_size": [16, 64],
        "device": ["V100", "T4"],
        "workers": [1, 4, 64],
        "sync": ["bsp", "ssp"],
        "staleness": [0, 3],
    }, {"ps": 2, "bandwidth": "10Gbps"}),
    "servers": ({
        "workers": [4, 8],
        "gpus_per_node": [1, 2, 4],
        "intra": ["NVLink2", "PCIe3"],
        "nics": [1, 2],
        "arch": ["ps", "allreduce"],
        "allreduce": ["ring", "hierarchical"],
        "local_aggregation": [False, True],
        "sync": ["bsp", "asp"],
    }, {"model": "resnet50", "ps": 2, "bandwidth": "10Gbps"}),
    "racks": ({
        "workers": [8, 16],
        "gpus_per_node": [2],
        "rack_size": [1, 2],
        "rack_uplink": ["10Gbps", "40Gbps"],
        "arch": ["ps", "allreduce"],
        "sync": ["bsp", "ssp"],
        "staleness": [1],
    }, {"model": "resnet50", "intra": "NVLink2", "ps": 2, "bandwidth": "25Gbps"}),
    "colocated_and_errors": ({
        "workers": [1, 2, 4, 6, None, 0],
        "ps": [1, 3],
        "placement": ["dedicated", "colocated"],
        "sync": ["bsp", "asp", "ssp"],
        "bandwidth": ["10Gbps", "1Gbps", "fast"],
    }, {"model": "resnet18", "staleness": 1}),
    "heterogeneous": ({
        "bandwidth": ["1Gbps", "10Gbps", "100Gbps"],
        "sync": ["bsp", "asp", "ssp"],
        "staleness": [2],
        "overlap": [True, False],
    }, {"model": "resnet50", "cluster": MIXED}),
}

# Step barrier (BSP PS only; not a sweep axis): predict_batch over a template's batch, and
# predict_analytic per point (servers and local aggregation too).
BARRIER_WORKERS = [1, 2, 5, 16, 64]
BARRIER_RATES = [1e8, 1.25e9, 1.25e10]
BARRIER_CASES: dict[str, dict[str, Any]] = {
    "resnet50_ps2": {"model": "resnet50", "ps": 2, "sharding": "round_robin"},
    "vgg16_ps3_greedy_no_overlap": {"model": "vgg16", "ps": 3, "sharding": "greedy",
                                    "overlap": False},
    "resnet50_ps4_even": {"model": "resnet50", "ps": 4, "sharding": "even"},
}
BARRIER_SERVERS = {"gpus_per_node": 4, "intra": "NVLink2", "ps": 2, "bandwidth": "10Gbps"}


def grid_rows(name: str) -> dict[str, list[Any]]:
    """The sweep's rows as tables: ``columns`` (each distinct column order) and ``rows`` (the
    index of the row's column order, then its values). Without the lockstep figure, which the
    rows gained after the freeze (tests/test_sweep.py checks it equals ``predict``'s)."""
    axes, fixed = GRIDS[name]
    orders: list[list[str]] = []
    table = []
    for row in sweep(axes, **fixed):
        row.pop(LOCKSTEP_KEY)
        names = list(row)
        if names not in orders:
            orders.append(names)
        table.append([orders.index(names), *row.values()])
    return {"columns": orders, "rows": table}


def barrier_rows(name: str) -> list[list[Any]]:
    """Batched rows of a step-barrier template: workers × rates (up = down, shard rates 2×)."""
    case = BARRIER_CASES[name]
    workload = make_workload(case["model"])
    strategy = make_strategy(sharding=case["sharding"], overlap=case.get("overlap", True),
                             step_barrier=True)
    template = resolve(workload, make_cluster(workers=1, ps=case["ps"]), strategy)
    assert batch_key(template) is not None
    update = point_values(template)[4]
    workers, values = [], []
    for n in BARRIER_WORKERS:
        for rate in BARRIER_RATES:
            workers.append(n)
            values.append((rate, rate, 2 * rate, 2 * rate, update, 5e-6))
    return [list(row) for row in predict_batch(template, workers, values)]


def barrier_server_rows() -> list[dict[str, Any]]:
    """predict_analytic with a step barrier on servers, with and without local aggregation."""
    workload = make_workload("resnet50")
    rows = []
    for workers in (4, 8, 16):
        for aggregate in (False, True):
            strategy = make_strategy(step_barrier=True, local_aggregation=aggregate)
            cluster = make_cluster(workers=workers, **BARRIER_SERVERS)
            summary = predict_analytic(resolve(workload, cluster, strategy)).summary()
            rows.append({"workers": workers, "local_aggregation": aggregate,
                         **{k: summary[k] for k in RESULT_KEYS}})
    return rows


def freeze(commit: str) -> dict[str, Any]:
    return {
        "source_commit": commit,
        "grids": {name: grid_rows(name) for name in GRIDS},
        "barrier": {name: barrier_rows(name) for name in BARRIER_CASES},
        "barrier_servers": barrier_server_rows(),
    }


if __name__ == "__main__":
    DATA.parent.mkdir(exist_ok=True)
    # the notes of earlier re-freezes (every key that is not data) say why rows moved: keep them
    notes = json.loads(DATA.read_text()) if DATA.exists() else {}
    frozen = freeze(sys.argv[1])
    frozen.update({k: v for k, v in notes.items() if k not in frozen})
    DATA.write_text(json.dumps(frozen, separators=(",", ":")) + "\n")
