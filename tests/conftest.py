"""Shared fixtures: small hand-made workloads whose arithmetic fits in a comment."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess

import pytest

from ddlperf.workload import Workload


def make_workload(
    layers: list[tuple[float, float, list[int]]],
    batch_size: int = 32,
    update_s_per_byte: float = 0.0,
    device: str | None = "V100",
    name: str = "toy",
) -> Workload:
    """``layers``: (forward_s, backward_s, [tensor bytes…]) in forward order."""
    return Workload.from_dict({
        "format": "ddlperf.workload/1",
        "name": name,
        "batch_size": batch_size,
        "device": device,
        "update_s_per_byte": update_s_per_byte,
        "layers": [
            {"name": f"l{i}", "forward_s": f, "backward_s": b,
             "tensors": [{"name": f"l{i}.t{j}", "bytes": size} for j, size in enumerate(sizes)]}
            for i, (f, b, sizes) in enumerate(layers)
        ],
    })


def netns_skip_reason() -> str | None:
    """Why emulated-cluster tests cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, tc, cgroups)"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "needs iproute2 (ip, tc)"
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        return "`ip netns` is not available"
    return None


def leftovers(rid: str) -> list[str]:
    """Everything of emulated-cluster run ``rid`` that still exists: namespaces, cgroup, state
    file, links."""
    from ddlperf.measure import cgroups, emulated, netns

    found = [ns for ns in netns.list_netns() if emulated.run_id_of_netns(ns) == rid]
    if (cgroups.CPU_ROOT / f"{emulated.CGROUP_PREFIX}{rid}").exists():
        found.append("cgroup")
    if (emulated.STATE_DIR / f"{rid}.json").exists():
        found.append("state file")
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    found += [line for line in links.splitlines() if rid in line]
    return found


def assert_one_line_error(result, *needles: str) -> None:
    """A CLI result that failed the way bad input must: exit 2, one ``error:`` line, no trace."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in result.output


@pytest.fixture
def toy() -> Workload:
    """Two layers: 1 ms + 2 ms (4 MB) and 3 ms + 6 ms (8 MB + 4 kB)."""
    return make_workload([(0.001, 0.002, [4_000_000]), (0.003, 0.006, [8_000_000, 4_000])])


def pytest_configure(config: pytest.Config) -> None:
    """Tests press a real Ctrl-C on the commands they start. A shell that starts this run in
    the background (``pytest &``, nohup) makes it ignore SIGINT, and an ignored signal stays
    ignored in every child: those tests would fail or wait out their timeouts. Children of a
    handled SIGINT get the default back."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = os.geteuid() == 0 if hasattr(os, "geteuid") else False
    from ddlperf.predictors.simulate import COMPILED

    for item in items:
        if "root" in item.keywords and not root:
            item.add_marker(pytest.mark.skip(reason="needs root (network namespaces, tc)"))
        if "pure_python" in item.keywords and COMPILED:
            item.add_marker(pytest.mark.skip(
                reason="patches the simulator's classes, compiled here (mypyc): "
                       "DDLPERF_PURE_PYTHON=1 runs it"))


needs_torchrun = pytest.mark.skipif(shutil.which("torchrun") is None,
                                    reason="torchrun not installed")


def tiny_workload_dict(tensor_bytes: int) -> dict:
    """Three layers of 4 ms + 8 ms, one tensor each: a quick run of real torchrun nodes."""
    return {
        "format": "ddlperf.workload/1", "name": "tiny", "batch_size": 8, "device": "V100",
        "layers": [{"name": f"l{i}", "forward_s": 0.004, "backward_s": 0.008,
                    "tensors": [{"name": f"l{i}.w", "bytes": tensor_bytes}]} for i in range(3)],
    }


def free_port() -> int:
    """A TCP port nobody listens on right now (for a torchrun rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
