"""CPU quotas per rank on a server host (ddlperf.measure.rank_quotas)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from ddlperf.errors import InputError
from ddlperf.measure import cgroups
from ddlperf.measure.rank_quotas import in_rank_quota, rank_cgroup, split_quotas
from ddlperf.measure.trainer_common import rank_table

# one server of two GPU ranks, one of one, a PS
SPEC = {"arch": "ps", "shards": 1, "workers": [
    {"name": "node0/gpu0", "host": "node0"}, {"name": "node0/gpu1", "host": "node0"},
    {"name": "node1/gpu0", "host": "node1"}]}


def test_hosts_and_ranks_are_told_apart() -> None:
    hosts, ranks = split_quotas(rank_table(SPEC), {
        "node0/gpu1": 0.7, "ps0": 0.5, "node1/gpu0": 0.6, "node0": 1.5})
    # a host's only rank is its host
    assert hosts == {"ps0": 0.5, "node1": 0.6, "node0": 1.5}
    assert ranks == {"node0/gpu1": 0.7}


@pytest.mark.parametrize("quotas,needles", [
    ({"node0/gpu2": 0.7}, ["--cpu-quota", "node0/gpu2", "node0, node1, ps0",
                           "node0/gpu0, node0/gpu1"]),
    ({"node0/gpu1": 0.01}, ["node0/gpu1.cpu_quota", "between 0.1"]),
    ({"node0/gpu1": float("nan")}, ["node0/gpu1.cpu_quota"]),
])
def test_bad_rank_quotas_name_the_rank(quotas: dict, needles: list[str]) -> None:
    with pytest.raises(InputError) as info:
        split_quotas(rank_table(SPEC), quotas)
    for needle in needles:
        assert needle in str(info.value), str(info.value)


def test_a_rank_without_a_quota_runs_as_it_is() -> None:
    argv = ["python3", "-c", "pass"]
    assert in_rank_quota(SimpleNamespace(cgroup_root="/nowhere"), {}, None, argv) == argv


def test_each_rank_has_its_own_cgroup_below_its_host() -> None:
    cluster = SimpleNamespace(cgroup_root=Path("/sys/fs/cgroup/cpu/ddlperf-x"))
    entry = rank_table(SPEC)[1]
    assert rank_cgroup(cluster, entry) == Path("/sys/fs/cgroup/cpu/ddlperf-x/node0/rank1")


@pytest.mark.root
def test_a_rank_runs_inside_its_quota() -> None:
    if not cgroups.available():
        pytest.skip("no cgroup v1 cpu controller")
    root = cgroups.CPU_ROOT / f"ddlperf-test-rank-{os.getpid()}"
    cluster = SimpleNamespace(cgroup_root=root)
    try:
        argv = in_rank_quota(cluster, rank_table(SPEC)[1], 0.7, ["cat", "/proc/self/cgroup"])
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        assert f"/ddlperf-test-rank-{os.getpid()}/node0/rank1" in out
        assert (root / "node0" / "rank1" / "cpu.cfs_quota_us").read_text().strip() == "7000"
    finally:
        cgroups.remove(root)
    assert not root.exists()
