"""Speed and memory of ``--method simulate`` (issue #3 targets).

Run: ``python benchmarks/bench_simulate.py`` (add ``--quick`` for one repeat). Not a test;
prints a table. Targets on a 2-core machine: resnet50 / 64 workers / 4 PS / BSP / 20
iterations ≤ 1 s; ring all-reduce / resnet50 / 1024 workers / 10 iterations ≤ 2 s; resnet50 /
64 servers × 8 GPUs (NVLink2, 100 Gbps) / 8 PS / BSP / 20 iterations ≤ 1 s (issue #12);
memory linear in workers × tensors.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Callable

from ddlperf.api import predict
from ddlperf.workload import Workload


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Best wall time of ``repeat`` runs (the least disturbed by other load)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def synthetic(tensors: int) -> Workload:
    """``tensors`` layers of one 1 MB tensor each, 1 ms forward and 2 ms backward."""
    return Workload.from_dict({
        "format": "ddlperf.workload/1", "name": f"synthetic{tensors}", "batch_size": 32,
        "device": "V100",
        "layers": [{"name": f"l{i}", "forward_s": 1e-3, "backward_s": 2e-3,
                    "tensors": [{"name": f"l{i}.w", "bytes": 1_000_000}]}
                   for i in range(tensors)],
    })


def speed(repeat: int) -> None:
    """End-to-end ``predict(model="resnet50", method="simulate", ...)`` calls (zoo load,
    resolve, simulate, assemble), best of ``repeat``."""
    cases: list[tuple[str, float | None, dict]] = [
        ("resnet50 · 64 workers · 4 PS · BSP · 20 it", 1.0,
         dict(workers=64, ps=4, iterations=20)),
        ("ring · resnet50 · 1024 workers · 10 it", 2.0,
         dict(arch="allreduce", workers=1024, iterations=10)),
        ("ring · resnet50 · 1024 workers · step by step", None,
         dict(arch="allreduce", workers=1024, iterations=10, ring_steps="each")),
        ("resnet50 · 64 servers × 8 GPUs · 8 PS · BSP · 20 it", 1.0,
         dict(workers=512, gpus_per_node=8, intra="NVLink2", bandwidth="100Gbps", ps=8,
              iterations=20)),
        ("… same, --local-aggregation", None,
         dict(workers=512, gpus_per_node=8, intra="NVLink2", bandwidth="100Gbps", ps=8,
              iterations=20, local_aggregation=True)),
        ("ring · resnet50 · 64 servers × 8 GPUs · hierarchical", None,
         dict(arch="allreduce", workers=512, gpus_per_node=8, intra="NVLink2",
              bandwidth="100Gbps", allreduce="hierarchical", iterations=20)),
        ("resnet50 · 8 workers · 2 PS · ASP · 20 it", None,
         dict(workers=8, ps=2, sync="asp", iterations=20)),
        ("resnet50 · 16 workers · 2 PS · BSP · jitter 5%", None,
         dict(workers=16, ps=2, iterations=20, jitter=0.05)),
    ]
    print(f"{'case':48} {'best of ' + str(repeat):>10} {'target':>8}")
    for name, target, kw in cases:
        seconds = best_of(lambda kw=kw: predict("resnet50", method="simulate", **kw), repeat)
        goal = f"≤ {target:g} s" if target else ""
        flag = "" if target is None else ("  ok" if seconds <= target else "  MISSED")
        print(f"{name:48} {seconds:9.3f}s {goal:>8}{flag}")


def memory() -> None:
    """tracemalloc peak of noisy runs (every worker simulated on its own) vs workers × tensors."""
    print(f"\n{'workers':>8} {'tensors':>8} {'W×T':>8} {'peak MiB':>10} {'bytes/(W×T)':>12}")
    for workers, tensors in ((4, 50), (8, 50), (16, 50), (32, 50), (16, 100), (16, 200)):
        w = synthetic(tensors)
        gc.collect()
        tracemalloc.start()
        predict(workload=w, method="simulate", workers=workers, ps=2, jitter=0.05,
                iterations=3, warmup=1)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        cells = workers * tensors
        print(f"{workers:8} {tensors:8} {cells:8} {peak / 2**20:10.2f} {peak / cells:12.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one repeat instead of three")
    args = parser.parse_args()
    speed(1 if args.quick else 3)
    memory()


if __name__ == "__main__":
    main()
