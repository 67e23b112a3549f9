"""Thin wrappers around `ip netns` and friends.

Every command runs as an argv list; a failing command raises :class:`CommandError` carrying its
stderr, so a broken set-up says exactly which `ip`/`tc` call the kernel refused.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

NETNS_DIR = Path("/run/netns")

# Messages that mean "the object is already gone"; tear-down treats them as success.
_GONE = ("No such file", "Cannot find device", "does not exist", "No such process")


class CommandError(RuntimeError):
    """An external command (ip, tc, ...) failed; the message holds the argv and its stderr."""

    def __init__(self, argv: list[str], returncode: int, stderr: str) -> None:
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr.strip()
        super().__init__(f"{' '.join(argv)} failed (exit {returncode}): {self.stderr}")

    @property
    def gone(self) -> bool:
        """True when the failure only says the object does not exist (any more)."""
        return any(text in self.stderr for text in _GONE)


def run(argv: list[str], timeout: float = 30.0, stdin: str | None = None) -> str:
    """Run ``argv``; return stdout, raise :class:`CommandError` with stderr on failure."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                              input=stdin)
    except FileNotFoundError as exc:
        raise CommandError(argv, 127, f"{argv[0]}: command not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise CommandError(argv, -1, f"timed out after {timeout} s") from exc
    if proc.returncode != 0:
        raise CommandError(argv, proc.returncode, proc.stderr or proc.stdout)
    return proc.stdout


def ip(ns: str | None, *args: str) -> str:
    """``ip [-n ns] args...``."""
    prefix = ["ip"] if ns is None else ["ip", "-n", ns]
    return run([*prefix, *args])


def tc(ns: str | None, *args: str) -> str:
    """``tc [-n ns] args...``."""
    prefix = ["tc"] if ns is None else ["tc", "-n", ns]
    return run([*prefix, *args])


def tc_batch(ns: str, lines: list[str]) -> str:
    """Many ``tc`` commands in one process (``tc -batch``), e.g. a filter per socket."""
    return run(["tc", "-n", ns, "-batch", "-"], stdin="\n".join(lines) + "\n")


def netns_path(ns: str) -> str:
    """The bind-mounted namespace file that `nsenter --net=` takes."""
    return str(NETNS_DIR / ns)


def list_netns() -> list[str]:
    """Names of all named network namespaces."""
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir())
    except FileNotFoundError:
        return []


def exists(ns: str) -> bool:
    return (NETNS_DIR / ns).exists()


def add(ns: str) -> None:
    """Create a namespace; fails (CommandError) if the name is taken."""
    run(["ip", "netns", "add", ns])


def delete(ns: str) -> None:
    """Delete a namespace; a missing one is fine."""
    try:
        run(["ip", "netns", "delete", ns])
    except CommandError as exc:
        if not (exc.gone or not exists(ns)):
            raise


def sysctl(ns: str, *assignments: str) -> None:
    """Best-effort sysctl inside ``ns`` (e.g. switching IPv6 off to keep the wire quiet)."""
    # An optional nicety: a kernel without the knob still gives a working cluster.
    with contextlib.suppress(CommandError):
        run(["nsenter", f"--net={netns_path(ns)}", "sysctl", "-q", "-w", *assignments])


def pids(ns: str) -> list[int]:
    """Processes whose network namespace is ``ns``."""
    if not exists(ns):
        return []
    try:
        out = run(["ip", "netns", "pids", ns])
    except CommandError as exc:
        if exc.gone or not exists(ns):
            return []
        raise
    return [int(tok) for tok in out.split() if tok.isdigit()]


def kill_pids(found: list[int], grace_s: float = 1.0) -> None:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL; never kills this process itself."""
    me = os.getpid()
    targets = [p for p in found if p != me]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while targets and time.monotonic() < deadline:
            targets = [p for p in targets if _alive(p)]
            if targets:
                time.sleep(0.02)
        if not targets:
            return


def _alive(pid: int) -> bool:
    """Alive and not a zombie (a zombie holds no namespace or cgroup any more)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")
