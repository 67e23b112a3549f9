"""Headless Chromium for the HTML report tests (Debian's ``chromium``, installed by .ci/run).

Flags as this machine needs them as root: no sandbox, no GPU, no background networking (the
closed network refuses it), a fresh profile; every host name resolves to nothing, so a page
that needed the network would show it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--host-resolver-rules=MAP * ~NOTFOUND"]


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def skip_reason() -> str | None:
    if chromium_binary() is None:
        return ("needs Debian's chromium (.ci/run installs it as root with apt-get; "
                "apt-get install chromium)")
    return None


def run(page: Path, profile: Path, *extra: str, timeout: float = 120) -> str:
    """Chromium's stdout for ``page`` (a file) with the extra flags."""
    result = subprocess.run(
        [chromium_binary(), *FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
        capture_output=True, text=True, timeout=timeout, check=True)
    return result.stdout
