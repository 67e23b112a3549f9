"""Shared CLI plumbing: one-line errors with exit status 2, consoles, JSON output."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from ddlperf.errors import InputError

F = TypeVar("F", bound=Callable[..., Any])

console = Console()
err_console = Console(stderr=True)


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr and return the exit to raise (status 2)."""
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(2)


def handle_input_errors(func: F) -> F:
    """Turn :class:`InputError` into one line on stderr and exit status 2 (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except InputError as exc:
            raise fail(str(exc)) from None

    return wrapper  # type: ignore[return-value]


def print_json(data: Any) -> None:
    """One JSON object on stdout (machine-readable; no rich markup)."""
    sys.stdout.write(json.dumps(data, indent=2, allow_nan=False) + "\n")
