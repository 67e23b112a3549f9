"""``ddlperf`` command line: thin commands over the library API.

Each command module registers on :data:`ddlperf.cli.app.app`; heavy imports (torch,
matplotlib) happen inside the commands that need them so start-up stays fast.
"""

from __future__ import annotations

import sys

from ddlperf.cli.app import app
from ddlperf.errors import InputError

_COMMAND_MODULES = (
    "predict", "sweep", "catalogs", "profile", "cluster", "measure", "validate", "explain",
    "report", "plan",
)


def _register() -> None:
    import importlib

    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(f"ddlperf.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"ddlperf.cli.{name}":
                continue  # command module not present in this build
            raise
        sub_app = getattr(module, f"{name}_app", None)
        if sub_app is not None:
            app.add_typer(sub_app)


_register()


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


__all__ = ["app", "main"]
