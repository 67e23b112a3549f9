"""Start-up of the ``ddlperf`` command: wall and CPU time of short commands end to end.

Run: ``python benchmarks/bench_startup.py [--runs 5]``. Prints, for each command, the best wall
time of the runs and the CPU time (user + system of the child) of that best run, with the
1-minute load average before and after: on a shared 2-core machine a busy neighbour stretches
the wall time, the CPU time is the steadier figure.

Targets (issues 2 and 15): start-up under 1 s; ``ddlperf explain --model resnet50 --workers
64`` (analytic, every what-if re-predicted) under 1 s end to end.

The package's modules are byte-compiled first (``compileall``), as ``pip install`` does: with
``PYTHONDONTWRITEBYTECODE`` set and no ``__pycache__``, Python compiles every ddlperf module
from source on each run, which is not what an installed ``ddlperf`` pays.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--version",),
    ("predict", "--json"),
    ("explain", "--model", "resnet50", "--workers", "64"),
)


def run_once(args: tuple[str, ...]) -> tuple[float, float]:
    """Wall and CPU seconds of one ``python -m ddlperf ARGS`` (output discarded)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ddlperf", *args], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def best_of(args: tuple[str, ...], runs: int = 5) -> tuple[float, float]:
    """(wall, CPU) of the run with the least wall time."""
    return min(run_once(args) for _ in range(runs))


def compile_package() -> None:
    import ddlperf

    compileall.compile_dir(str(Path(ddlperf.__file__).parent), quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    compile_package()
    print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}")
    for args in COMMANDS:
        wall, cpu = best_of(args, runs)
        print(f"ddlperf {' '.join(args):<45} best of {runs}: {wall:.3f} s wall, {cpu:.3f} s CPU")
    print(f"load average (1 min) after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
