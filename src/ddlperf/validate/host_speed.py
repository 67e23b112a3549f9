"""How fast this machine's CPU ran around one measurement: a fixed CPU probe and the
hypervisor's steal.

Why: the emulated cluster's iteration time includes CPU work on the critical path (each
trainer's Python loop, the kernel's TCP and HTB on 2 cores), so a run made while the host's
CPU is slower (a noisy neighbour on the hypervisor, a lower clock) measures slower, even for a
deterministic scenario whose links and emulated compute are unchanged. Two full runs of the
dev matrix disagreed by 2–7% on such rows with the links' probes within 1.5% of their rates;
the trainers' CPU seconds per step were 30–40% higher on exactly those rows. This records the
evidence with every row so that such a disagreement can be told from a model's error: the
probe's time before and after the measurement (the same pure-Python work every time; slower
means a slower CPU), and the share of the machine's CPU time the hypervisor stole while the
run was measured (``/proc/stat``).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC_STAT = Path("/proc/stat")
PROBE_REPEATS = 5  # the median of five short runs: one preempted run does not move it
PROBE_LOOPS = 200_000  # about 10-20 ms per run on this class of machine
# /proc/stat's aggregate "cpu" line: user nice system idle iowait irq softirq steal ...
_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_probe_s(repeats: int = PROBE_REPEATS, loops: int = PROBE_LOOPS) -> float:
    """Median seconds of a fixed pure-Python workload (integer arithmetic, a dict and a list:
    what an interpreter loop does), timed by the wall clock: a CPU taken away counts."""
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        table: dict[int, int] = {}
        acc = 0
        for i in range(loops):
            acc = (acc * 31 + i) & 0xFFFFFF
            table[i & 1023] = acc
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def cpu_ticks(path: Path = PROC_STAT) -> dict[str, int] | None:
    """The machine's cumulative CPU time per state (clock ticks), or None off Linux."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith("cpu "):
                values = [int(v) for v in line.split()[1:1 + len(_FIELDS)]]
                return dict(zip(_FIELDS, values + [0] * (len(_FIELDS) - len(values))))
    except (OSError, ValueError):
        return None
    return None


def steal_pct(before: dict[str, int] | None, after: dict[str, int] | None) -> float | None:
    """Percent of the machine's CPU time between two readings that the hypervisor gave to
    someone else (None where unknown or no time passed)."""
    if before is None or after is None:
        return None
    total = sum(after[k] - before[k] for k in _FIELDS)
    return None if total <= 0 else 100.0 * (after["steal"] - before["steal"]) / total


@dataclass
class HostWindow:
    """Readings taken before a measurement; :meth:`finish` takes them again after it."""

    probe_before_s: float
    ticks_before: dict[str, int] | None

    @classmethod
    def start(cls) -> HostWindow:
        probe = cpu_probe_s()
        return cls(probe, cpu_ticks())  # the probe before the window: its own CPU not counted

    def finish(self) -> dict[str, Any]:
        """``probe_before_s``, ``probe_after_s`` (the CPU probe's median, s) and
        ``steal_pct`` (of all CPU time while measuring; None where the kernel does not say)."""
        stolen = steal_pct(self.ticks_before, cpu_ticks())
        return {"probe_before_s": self.probe_before_s, "probe_after_s": cpu_probe_s(),
                "steal_pct": stolen}
