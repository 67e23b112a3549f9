"""Atomic file writes: a reader never sees half a result."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ddlperf.errors import InputError


def check_writable(path: str | Path, field: str) -> Path:
    """Fail early (before any work) if ``path`` cannot be written."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        if any(a.exists() and not a.is_dir() for a in parent.parents if str(a) != "."):
            raise InputError(field, f"{str(parent)!r} lies under a file, not a directory",
                             "choose another path")
        raise InputError(field, f"directory {str(parent)!r} does not exist", "create it first")
    if not parent.is_dir():
        raise InputError(field, f"{str(parent)!r} is a file, not a directory",
                         "choose another path")
    if p.is_dir():
        raise InputError(field, f"{str(p)!r} is a directory", "give a file name")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise InputError(field, f"{str(p)!r} is not writable", "choose another path")
    try:  # what access() cannot tell (root, /proc, /sys, a read-only mount): try it
        fd, probe = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".probe", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(field, f"{str(p)!r} is not writable ({exc.strerror or exc})",
                         "choose another path") from None
    return p


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write to a temporary file beside ``path`` and rename it into place."""
    p = Path(path)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent or ".")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp's 0600 would hide results from other users
        with os.fdopen(fd, mode) as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def prepare_output_dir(
    path: str | Path, field: str, taken: tuple[str, ...], what: str, fix: str
) -> Path:
    """Create (if needed) a writable result directory that does not already hold ``taken``.

    ``what`` names those results in the message, ``fix`` says what to do instead.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(field, f"{str(p)!r} is a file", "give a directory")
    if p.exists() and any((p / name).exists() for name in taken):
        raise InputError(field, f"{str(p)!r} already holds {what}", fix)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise InputError(field, f"directory {str(parent)!r} does not exist", "create it first")
    p.mkdir(exist_ok=True)
    if not os.access(p, os.W_OK):
        raise InputError(field, f"{str(p)!r} is not writable", "choose another directory")
    return p.resolve()
