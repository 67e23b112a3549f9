"""Shared fixtures: small hand-made workloads whose arithmetic fits in a comment."""

from __future__ import annotations

import os
import shutil
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = os.geteuid() == 0 if hasattr(os, "geteuid") else False
    for item in items:
        if "root" in item.keywords and not root:
            item.add_marker(pytest.mark.skip(reason="needs root (network namespaces, tc)"))
