"""The emulated cluster's processes come first on this machine's CPU.

On a real cluster a worker's CPU runs that worker and nothing else; on the one machine that
emulates the cluster, every other job (tests, builds, other users) competes for the same cores.
Linux groups processes by session (*autogroup*, ``/proc/sys/kernel/sched_autogroup_enabled``)
and shares the CPU fairly between groups: a job started with ``nice -n 19`` in its own session
still gets an equal share against each rank, because nice only orders threads inside one
group. Measured here (mobilenet_v2, batch 4, one thread, two other sessions busy): a rank's
forward pass ran 0.27 s of CPU but waited 0.56 s on the run queue, the step took 2.3 s where
the profile said 0.63 s, and with the ranks' groups given precedence the same run waited
0.01–0.02 s and took 0.95 s.

So every process whose timing is ground truth — trainer ranks, the single-worker baseline,
the in-session profile and step timers — is started in its own session and given
:data:`NICE` for its whole group (all its threads: gloo's, the PS's senders) and for each of
its threads (kernels without autogroup); a quota'd host's cgroup gets the same weight
(:data:`WEIGHT`), so its quota is what it gets. Processes of the emulated cluster compete with each
other as equals, as before; only unrelated jobs yield. Without the privilege (not root) or
on another OS nothing changes, and :func:`claim` says so.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

NICE = -20  # the strongest precedence: each group weighs ~87 nice-0 groups
# The kernel's scheduling weight of nice -20 (sched_prio_to_weight): what a CPU cgroup of the
# cluster (a quota'd host) gets as cpu.shares. Autogroups apply only to processes in the root
# cgroup, so a quota'd host's ranks would otherwise weigh as one nice-0 job: its quota is a cap,
# and other jobs took part of even that (0.24 core of a 0.5-core quota at load 5).
WEIGHT = 88761


def claim(pid: int) -> bool:
    """Give process ``pid`` (a session leader: started with ``start_new_session=True``) and
    its session precedence over other jobs; True when it took effect. A process that shares
    its session with its parent is reniced per thread only, never its parent's group."""
    done = False
    try:
        own_session = os.getsid(pid) == pid
    except OSError:
        return False
    if own_session:
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/autogroup").write_text(str(NICE))
            done = True
    for tid in _threads(pid):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, tid, NICE)
            done = True
    return done


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return [pid]
