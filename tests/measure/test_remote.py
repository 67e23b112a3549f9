"""``--launcher torchrun --run``: the per-host commands started over ssh, records copied back.

There is no sshd on this machine, so the ssh client is a stand-in (``--ssh``) that runs the
remote shell line here in its own session, as sshd would on the host; everything past it is
real — three torchrun nodes on loopback, spec and records travelling through ssh's pipes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.cli.app import app
from ddlperf.measure.remote import ssh_argv
from tests.conftest import assert_one_line_error, free_port, needs_torchrun, tiny_workload_dict

pytest.importorskip("torch")
runner = CliRunner()
WORKLOAD = tiny_workload_dict(100_000)
SSH_STAND_IN = '''
import subprocess, sys
args = sys.argv[1:]
while args and args[0].startswith("-"):
    flag = args.pop(0)
    if flag in ("-o", "-i", "-p", "-l"):
        args.pop(0)
host, command = args[0], " ".join(args[1:])
with open(sys.argv[0] + ".hosts", "a") as seen:
    seen.write(host + "\\n")
sys.exit(subprocess.call(["bash", "-c", command]))
'''


@pytest.fixture
def ssh(tmp_path: Path) -> Path:
    path = tmp_path / "ssh-stand-in.py"
    path.write_text(SSH_STAND_IN)
    return path


def _run(tmp_path: Path, ssh: Path | str, *extra: str,
         hosts: str = "127.0.0.1,127.0.0.1,127.0.0.1"):
    if isinstance(ssh, Path):
        ssh = f"{sys.executable} {ssh} -o BatchMode=yes"
    wl = tmp_path / "wl.json"
    wl.write_text(json.dumps(WORKLOAD))
    return runner.invoke(app, [
        "measure", "--workload", str(wl), "--workers", "2", "--launcher", "torchrun",
        "--hosts", hosts, "--interface", "lo", "--master-port", str(free_port()),
        "--iterations", "3", "--warmup", "1", "--out", str(tmp_path / "run"), "--run",
        "--ssh", ssh,
        "--remote-dir", str(tmp_path / "remote"), *extra])


@needs_torchrun
def test_run_over_ssh_measures_and_keeps_every_hosts_records(tmp_path: Path, ssh: Path) -> None:
    """A ring of two hosts (each a torchrun agent and a rank, both importing torch): what
    tests/measure/test_torchrun.py checks of a ring, summarized, is checked here; PS hosts
    go over ssh in the failing-node test below."""
    result = _run(tmp_path, ssh, "--json", "--arch", "allreduce", hosts="127.0.0.1,127.0.0.1")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["kind"] == "measurement"
    assert data["inputs"]["measure"]["launcher"] == "torchrun"
    assert data["inputs"]["measure"]["wire_check"]["ok"]
    assert [w["name"] for w in data["workers"]] == ["w0", "w1"]
    run, remote = tmp_path / "run", tmp_path / "remote"
    for role in ("w0", "w1"):
        assert (remote / role / "spec.json").read_bytes() == (run / "spec.json").read_bytes()
        assert (run / f"records-{role}.jsonl").read_text() == (
            remote / role / f"records-{role}.jsonl").read_text()
        assert (run / "logs" / f"{role}.log").is_file()
    assert (run / "measurement.json").is_file()
    # upload, run and fetch per host, each through ssh to the named machine
    assert Path(f"{ssh}.hosts").read_text().split() == ["127.0.0.1"] * 6


@needs_torchrun
def test_a_failing_node_is_named_and_its_records_are_kept(tmp_path: Path, ssh: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDLPERF_FAULT", "w1:crash@2")
    result = _run(tmp_path, ssh)
    assert result.exit_code == 1, result.output
    # named from the ranks' error records: the peers fail too (and may exit first)
    assert "w1 on 127.0.0.1 failed (" in result.stderr
    assert "): InjectedFault: injected crash at iteration 2" in result.stderr
    assert "Traceback" not in result.stderr
    run = tmp_path / "run"
    kept = [json.loads(line) for line in (run / "records-w1.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in kept if r.get("type") == "iteration"] == [0, 1]
    assert not (run / "measurement.json").exists()


def test_an_unreachable_host_is_named(tmp_path: Path) -> None:
    result = _run(tmp_path, "false")
    assert result.exit_code == 1
    assert "ssh to 127.0.0.1 failed" in result.stderr


def test_a_missing_ssh_client_is_bad_input(tmp_path: Path) -> None:
    assert_one_line_error(_run(tmp_path, "/nonexistent/ssh"), "--ssh", "not found")


@pytest.mark.parametrize(("args", "needle"), [
    (["--launcher", "torchrun", "--run"], "--run"),
    (["--run"], "--run"),
    (["--remote-dir", "/tmp/x"], "--remote-dir"),
])
def test_run_needs_torchrun_and_hosts(args: list[str], needle: str) -> None:
    assert_one_line_error(runner.invoke(app, ["measure", *args]), needle)


def test_ssh_command_is_split_like_a_shell() -> None:
    assert ssh_argv("ssh -p 2222 -i 'my key'", "gpu1", "cd /x && ls", terminal=True) == [
        "ssh", "-p", "2222", "-i", "my key", "-tt", "gpu1", "cd /x && ls"]
    with pytest.raises(Exception, match="--ssh"):
        ssh_argv("ssh 'unclosed", "h", "ls")
