"""``ddlperf measure`` on servers and racks through the CLI: what the emulated cluster refuses
(one line, exit 2, before any work), --backend, and torchrun plans with one rank per GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import test_measure_cli as base
from tests.conftest import assert_one_line_error

invoke = base.invoke
wl = base.wl  # the workload-file fixture


@pytest.mark.parametrize("args,needles", [
    (["--gpus-per-node", "2", "--intra", "NVLink2"], ["intra", "node0", "use intra: 2Gbps"]),
    (["--gpus-per-node", "2", "--intra", "1Gbps", "--nics", "2", "--bandwidth", "2Gbps"],
     ["--bandwidth", "2 NICs together"]),
    (["--gpus-per-node", "2", "--intra", "1Gbps", "--placement", "colocated"],
     ["placement", "dedicated"]),
    (["--rack-size", "1", "--rack-uplink", "10Gbps"], ["racks", "rack uplink"]),
    (["--backend", "nccl", "--arch", "allreduce"], ["--backend", "nccl", "gloo"]),
    (["--backend", "nccl"], ["--backend", "allreduce"]),
    (["--backend", "mpi"], ["--backend", "gloo or nccl"]),
    (["--nproc-per-node", "2"], ["--nproc-per-node", "--launcher torchrun"]),
    (["--nproc-per-node", "2", "--gpus-per-node", "4", "--launcher", "torchrun"],
     ["--nproc-per-node", "contradicts"]),
])
def test_what_the_emulation_cannot_do_is_one_line_and_exit_2(wl: str, args: list[str],
                                                             needles: list[str]) -> None:
    assert_one_line_error(invoke("--workload", wl, "--workers", "4", *args), *needles)


def test_torchrun_plans_one_rank_per_gpu_per_server(wl: str, tmp_path: Path) -> None:
    out = tmp_path / "tr"
    result = invoke("--workload", wl, "--arch", "allreduce", "--allreduce", "hierarchical",
                    "--workers", "8", "--nproc-per-node", "4", "--intra", "NVLink2",
                    "--bandwidth", "100Gbps", "--backend", "nccl", "--launcher", "torchrun",
                    "--hosts", "gpu-a,gpu-b", "--interface", "ib0", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert [c["host"] for c in plan["commands"]] == ["gpu-a (node0)", "gpu-b (node1)"]
    for command in (c["command"] for c in plan["commands"]):
        assert "--nproc-per-node=4" in command and "--nnodes=2" in command
        assert "NCCL_SOCKET_IFNAME=ib0" in command and "ddp_trainer" in command
    spec = json.loads((out / "spec.json").read_text())
    assert spec["backend"] == "nccl" and spec["allreduce"] == "hierarchical"
    assert [w["name"] for w in spec["workers"][:5]] == [
        "node0/gpu0", "node0/gpu1", "node0/gpu2", "node0/gpu3", "node1/gpu0"]


def test_torchrun_plans_a_ps_on_servers_with_gloo(wl: str, tmp_path: Path) -> None:
    result = invoke("--workload", wl, "--workers", "4", "--gpus-per-node", "2", "--intra",
                    "PCIe3", "--ps", "1", "--local-aggregation", "--launcher", "torchrun",
                    "--out", str(tmp_path / "t"))
    assert result.exit_code == 0, result.output
    assert "HOST0 (node0)" in result.stdout and "HOST2 (ps0)" in result.stdout
    assert result.stdout.count("--nproc-per-node=2") == 2
    assert "NCCL_SOCKET_IFNAME" not in result.stdout
