"""Speed of ``explain`` and ``plan``, and the overhead of the executors.

Run: ``python benchmarks/bench_answers.py [--executors local,ray,dask]``. Prints

* ``explain``: wall time of ``ddlperf.explain.explain`` (analytic, resnet50, 64 workers, every
  what-if re-predicted), best of 3 after one warm-up; target (issue 15) under 1 s;
* ``plan``: candidates per second over a search of more than 100,000 candidate clusters
  (six one-GPU instance types × 512 server counts × 16 PS shard counts × BSP/ASP/SSP, plus
  all-reduce), with the local executor; target under 30 s;
* executors: the same plan on each engine that is installed — start-up (a local cluster of the
  engine), search time and the overhead per chunk of work relative to running it in this
  process.

The price table here is a benchmark input (made-up prices for six catalog devices), not data.
"""

from __future__ import annotations

import argparse
import os
import time

from ddlperf.plan import SearchSpace, Target, plan
from ddlperf.plan.prices import PriceTable

DEVICES = ("K80", "P100", "V100", "T4", "A10", "A100")
TABLE = PriceTable.model_validate({
    "currency": "benchmark units",
    "instances": [{"name": f"{d.lower()}-1", "device": d, "gpus": 1,
                   "bandwidth": "25Gbps" if d in ("V100", "A100") else "10Gbps",
                   "price_per_hour": 1.0 + i, "source": "benchmark input",
                   "date": "2026-12-01"} for i, d in enumerate(DEVICES)],
    "ps_hosts": [{"name": "cpu-25", "bandwidth": "25Gbps", "price_per_hour": 0.5,
                  "source": "benchmark input", "date": "2026-12-01"}],
})
SPACE = SearchSpace(instances=TABLE.instances, servers=range(1, 513), ps=range(1, 17),
                    sync=("bsp", "asp", "ssp"), staleness=3)
TARGET = Target(throughput=20_000)


def cpu_s() -> float:
    """CPU seconds of this process and its finished children: on a loaded machine the wall
    time says how long a user waited, the CPU time how much work it was."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def bench_explain() -> float:
    from ddlperf.explain import explain

    explain(model="resnet50", workers=64)  # warm-up: imports and the zoo entry
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        explain(model="resnet50", workers=64)
        best = min(best, time.perf_counter() - start)
    return best


def bench_plan(executor_name: str, jobs: int | None) -> dict[str, float]:
    from ddlperf.executors import make_executor

    start = time.perf_counter()
    executor = make_executor(executor_name, jobs=jobs)
    started = time.perf_counter()
    cpu = cpu_s()
    result = plan(TARGET, SPACE, prices=TABLE, fixed={"model": "resnet50"},
                  executor=executor, recheck=0)
    done = time.perf_counter()
    return {"candidates": result.total, "startup_s": started - start,
            "search_s": done - started, "per_s": result.total / (done - started),
            "cpu_s": cpu_s() - cpu}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--executors", default="local")
    parser.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} (figures are noisy when it exceeds the "
          f"{os.cpu_count()} cores)")
    print(f"explain (analytic, resnet50, 64 workers, all what-ifs): "
          f"{bench_explain():.3f} s (target < 1 s)")
    serial = None
    for name in args.executors.split(","):
        if name == "serial":
            from ddlperf.executors import Executor

            start = time.perf_counter()
            result = plan(TARGET, SPACE, prices=TABLE, fixed={"model": "resnet50"},
                          executor=Executor(), recheck=0)
            serial = time.perf_counter() - start
            print(f"plan, in this process: {result.total:,} candidates in {serial:.1f} s "
                  f"({result.total / serial:,.0f}/s)")
            continue
        r = bench_plan(name, args.jobs)
        line = (f"plan, --executor {name}: {r['candidates']:,} candidates in "
                f"{r['search_s']:.1f} s ({r['per_s']:,.0f}/s), start-up {r['startup_s']:.1f} s, "
                f"CPU {r['cpu_s']:.1f} s (local: this process and its workers)")
        if serial is not None:
            line += f", vs this process ×{serial / r['search_s']:.2f}"
        print(line + (" (target < 30 s)" if name == "local" else ""))


if __name__ == "__main__":
    main()
