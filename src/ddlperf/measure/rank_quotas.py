"""CPU quotas per rank on a server host (``--cpu-quota node0/gpu1=0.7``).

A quota on a host (``w1``, ``node0``, ``ps0``) caps all its processes together (one cgroup per
host, :mod:`ddlperf.measure.emulated`). A quota on a rank of a server of several ranks caps
that rank alone: the model's ``cpu_cap`` is per worker, and a server whose GPU ranks each get
their share of the cores leaves the rest to the other hosts of the emulated cluster (two ranks
at 0.7 core each leave a PS 0.6 core of this machine's two). Each such rank runs in its own
cgroup below its host's, ``/sys/fs/cgroup/cpu/ddlperf-<rid>/<host>/<rank>``, created before
the rank starts (the rank joins it through :func:`~ddlperf.measure.cgroups.wrap`, so no step
of it runs outside) and removed with the cluster's cgroups at tear-down.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddlperf.errors import InputError
from ddlperf.measure import cgroups
from ddlperf.measure.hosts import check_quota
from ddlperf.measure.trainer_common import hosts_of


def split_quotas(table: list[dict[str, Any]], quotas: dict[str, float]
                 ) -> tuple[dict[str, float], dict[str, float]]:
    """(host quotas, rank quotas) of ``quotas`` by name: a host name (``w1``, ``node0``,
    ``ps0``) caps the host; the name of a rank that shares its host with others
    (``node0/gpu1``) caps that rank, a host's only rank (``node2/gpu0``) its host. Anything
    else is one line, exit 2."""
    hosts = hosts_of(table)
    ranks_on = {h: [e["name"] for e in table if e["host"] == h] for h in hosts}
    host_of = {e["name"]: e["host"] for e in table}
    host_quotas, rank_quotas = {}, {}
    for name, share in quotas.items():
        if name in hosts:
            host_quotas[name] = share
        elif name in host_of and len(ranks_on[host_of[name]]) == 1:  # the host's only rank
            host_quotas[host_of[name]] = share
        elif name in host_of:
            check_quota(f"{name}.cpu_quota", share)
            rank_quotas[name] = share
        else:
            shared = [r for h in hosts if len(ranks_on[h]) > 1 for r in ranks_on[h]]
            raise InputError("--cpu-quota", f"no host or server rank named {name}",
                             f"hosts of this run: {', '.join(hosts)}"
                             + (f"; ranks: {', '.join(shared)}" if shared else ""))
    if rank_quotas and not cgroups.available():
        raise InputError("--cpu-quota", f"cgroup v1 cpu controller not found at "
                         f"{cgroups.CPU_ROOT}", "drop the CPU quotas")
    return host_quotas, rank_quotas


def rank_cgroup(cluster: Any, entry: dict[str, Any]) -> Path:
    """The cgroup of rank ``entry`` (a rank-table row) on ``cluster``."""
    return Path(cluster.cgroup_root) / str(entry["host"]) / f"rank{int(entry['local_rank'])}"


def in_rank_quota(cluster: Any, entry: dict[str, Any], share: float | None,
                  argv: list[str]) -> list[str]:
    """``argv`` run inside the rank's own quota (its cgroup created now); unchanged without
    one."""
    if share is None:
        return argv
    path = rank_cgroup(cluster, entry)
    cgroups.create(path, share)
    return cgroups.wrap(path, argv)
