"""Ctrl-C as a terminal sends it: SIGINT to the command's whole process group (the command
and its worker processes), once the first finished rows are in the file being written."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def interrupt(args: list[str], out: Path, timeout: float = 300.0
              ) -> tuple[int, str, list[dict[str, str]]]:
    """Run ``ddlperf ARGS`` (writing ``out``), press Ctrl-C when its temporary file beside
    ``out`` holds rows; (exit status, stderr, the rows of ``out``)."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen([sys.executable, "-m", "ddlperf", *args], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    deadline = time.monotonic() + timeout  # only so that a broken run cannot hang the suite
    try:
        while process.poll() is None and time.monotonic() < deadline:
            partial = list(out.parent.glob(f".{out.name}.*.tmp"))
            if partial and partial[0].stat().st_size > 2000:
                break
            time.sleep(0.05)
        assert process.poll() is None, "the run ended before it could be interrupted"
        os.killpg(process.pid, signal.SIGINT)
        _stdout, stderr = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    rows = []
    if out.exists():
        with out.open(newline="") as f:
            rows = list(csv.DictReader(f))
    return process.returncode, stderr, rows
