"""``ddlperf`` command line: thin commands over the library API.

Each command module registers on :data:`ddlperf.cli.app.app` and is imported only when its
command runs (:data:`ddlperf.cli.app.COMMAND_MODULES`); heavy imports (numpy, pydantic models,
rich, matplotlib, torch) happen inside the commands that need them so start-up stays fast.
"""

from __future__ import annotations

import sys

from ddlperf.cli.app import app
from ddlperf.errors import InputError


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


__all__ = ["app", "main"]
