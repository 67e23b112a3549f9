"""Run a :func:`ddlperf.measure.torchrun.torchrun_plan` on real machines over ssh.

For each role host (w0, ps0, …) in rank-table order, on the machine given for it:

1. ``mkdir -p REMOTE/ROLE`` and write ``spec.json`` there (through ssh's stdin: only an ssh
   client is needed here, and nothing but ``sh``, ``cat`` and ddlperf + torch over there);
2. start its ``torchrun`` command in that directory, all hosts at once, with a forced
   terminal (``-tt``) so that stopping the local ssh client hangs up the remote torchrun;
3. wait: a node that exits non-zero stops the others; the one that failed on its own is named
   from the ranks' error records (its peers fail next, and may exit first); a run that takes
   longer than the deadline is stopped the same way;
4. copy every host's ``records-ROLE.jsonl`` back into the run directory — also after a
   failure, so an interrupted measurement keeps what it recorded — and summarize.

Several roles may share one machine (each gets its own directory). Logs: ``OUT/logs/ROLE.log``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddlperf.errors import InputError
from ddlperf.io import write_atomic
from ddlperf.measure.launcher import RunFailed, last_line
from ddlperf.measure.records import read_records
from ddlperf.measure.torchrun import SPEC_FILE, records_file, summarize_torchrun
from ddlperf.prediction import Prediction

DEFAULT_SSH = "ssh -o BatchMode=yes"
STARTUP_S = 60.0  # rendezvous, imports, building the model


def ssh_argv(ssh: str, host: str, command: str, *, terminal: bool = False) -> list[str]:
    """The local argv that runs ``command`` (a shell line) on ``host``."""
    try:
        base = shlex.split(ssh)
    except ValueError as exc:
        raise InputError("--ssh", f"cannot split {ssh!r}: {exc}",
                         "e.g. --ssh 'ssh -p 2222'") from None
    if not base:
        raise InputError("--ssh", "is empty", f"e.g. --ssh '{DEFAULT_SSH}'")
    return [*base, *(["-tt"] if terminal else []), host, command]


def _remote(ssh: str, host: str, command: str, stdin: bytes = b""
            ) -> subprocess.CompletedProcess[bytes]:
    """One short remote command; an ssh client that is missing or never answers is named."""
    argv = ssh_argv(ssh, host, command)
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, timeout=STARTUP_S)
    except FileNotFoundError:
        raise InputError("--ssh", f"cannot run {argv[0]!r}: not found",
                         "install an ssh client or give its path with --ssh") from None
    except subprocess.TimeoutExpired:
        raise RunFailed(f"ssh to {host} did not finish within {STARTUP_S:.0f} s") from None


def _upload(ssh: str, host: str, directory: str, spec: bytes) -> None:
    command = f"mkdir -p {shlex.quote(directory)} && cat > {shlex.quote(directory)}/{SPEC_FILE}"
    proc = _remote(ssh, host, command, spec)
    if proc.returncode != 0:
        tail = (proc.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
        raise RunFailed(f"ssh to {host} failed (exit {proc.returncode}): {tail}")


def _fetch(ssh: str, host: str, directory: str, name: str, into: Path) -> bool:
    """Copy one remote file into ``into`` atomically; False where it does not exist (yet)."""
    try:
        proc = _remote(ssh, host, f"cat {shlex.quote(directory)}/{name}")
    except RunFailed:
        return False
    if proc.returncode != 0:
        return False
    write_atomic(into / name, proc.stdout.decode(errors="replace"))
    return True


def run_over_ssh(
    plan: dict[str, Any],
    machines: list[str],
    *,
    remote_dir: str,
    ssh: str = DEFAULT_SSH,
    deadline_s: float = 600.0,
    progress: Callable[[str], None] | None = None,
) -> Prediction:
    """Run ``plan`` (from ``torchrun_plan``, one command per role host, in ``machines``' order)
    and return the summarized Measurement; see the module doc."""
    say = progress or (lambda _m: None)
    roles: list[str] = plan["hosts"]
    if len(machines) != len(roles):
        raise InputError("--hosts", f"this scenario needs {len(roles)} hosts "
                         f"({', '.join(roles)}), got {len(machines)}")
    if not remote_dir.strip():
        raise InputError("--remote-dir", "is empty", "e.g. --remote-dir /tmp/ddlperf-run")
    client = ssh_argv(ssh, "host", "true")[0]
    if shutil.which(client) is None:
        raise InputError("--ssh", f"cannot run {client!r}: not found",
                         "install an ssh client or give its path with --ssh")
    run_dir = Path(plan["spec"]).parent
    spec = Path(plan["spec"]).read_bytes()
    logs = run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    directories = {role: f"{remote_dir.rstrip('/')}/{role}" for role in roles}
    for role, machine in zip(roles, machines):
        say(f"{machine} ({role}): writing {directories[role]}/{SPEC_FILE}")
        _upload(ssh, machine, directories[role], spec)
    running: list[tuple[str, str, subprocess.Popen[bytes], Path]] = []
    failure: RunFailed | None = None
    try:
        for (role, machine), (_label, command) in zip(zip(roles, machines), plan["commands"]):
            log = logs / f"{role}.log"
            line = f"cd {shlex.quote(directories[role])} && {command}"
            with log.open("wb") as sink:
                proc = subprocess.Popen(ssh_argv(ssh, machine, line, terminal=True),
                                        stdin=subprocess.DEVNULL, stdout=sink,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            running.append((role, machine, proc, log))
        say(f"running torchrun on {len(running)} hosts")
        try:
            _wait(running, deadline_s)
        except RunFailed as exc:
            failure = exc
    finally:
        for _role, _machine, proc, _log in running:
            _stop(proc)
        for role, machine in zip(roles, machines):
            if _fetch(ssh, machine, directories[role], records_file(role), run_dir):
                say(f"{machine} ({role}): copied {records_file(role)}")
    if failure is not None:
        raise _culprit(failure, running, run_dir) from None
    return summarize_torchrun(run_dir)


def _culprit(failure: RunFailed, running: list[tuple[str, str, subprocess.Popen[bytes], Path]],
             run_dir: Path) -> RunFailed:
    """The node that failed on its own, from the error records the ranks wrote (the others
    fail next, because a peer went away, and may exit first); else the first one seen."""
    errors = []
    for role, machine, proc, log in running:
        records, _skipped = read_records(run_dir / records_file(role))
        errors += [(bool(r.get("peer")), float(r.get("time", 0.0)), role, machine, proc, log, r)
                   for r in records if r.get("type") == "error"]
    if not errors:
        return failure
    _peer, _time, role, machine, proc, log, record = min(errors, key=lambda e: e[:2])
    code = proc.returncode
    # torchrun may still be winding down when a peer's exit stops the run: then it was killed
    how = f"exit status {code}" if code is not None and code >= 0 else "stopped by ddlperf"
    return RunFailed(f"{role} on {machine} failed ({how}): {record.get('error', '?')} "
                     f"(log: {log})", role)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a local ssh client and anything it started here (its own session); the remote
    side gets a hangup on its terminal."""
    if proc.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _wait(running: list[tuple[str, str, subprocess.Popen[bytes], Path]],
          deadline_s: float) -> None:
    """Until every node exited 0; the first failure (or the deadline) raises RunFailed."""
    began = time.monotonic()
    while True:
        codes = [(role, machine, proc.poll(), log) for role, machine, proc, log in running]
        failed = [(r, m, c, log) for r, m, c, log in codes if c not in (None, 0)]
        if failed:
            role, machine, code, log = failed[0]
            raise RunFailed(f"{role} on {machine} exited with status {code}: "
                            f"{last_line(log) or 'no output'} (log: {log})", role)
        if all(c == 0 for _r, _m, c, _l in codes):
            return
        if time.monotonic() - began > deadline_s:
            late = ", ".join(r for r, _m, c, _l in codes if c is None)
            raise RunFailed(f"{late} still running after {deadline_s:.0f} s; stopped", late)
        time.sleep(0.2)
