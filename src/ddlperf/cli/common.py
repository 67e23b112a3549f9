"""Shared CLI plumbing: one-line errors with exit status 2, consoles, JSON output."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from ddlperf.errors import InputError
from ddlperf.units import ImplausibleValueWarning

if TYPE_CHECKING:
    from rich.console import Console

F = TypeVar("F", bound=Callable[..., Any])


WIDE = 100_000  # --wide: as wide as the content


def make_console(wide: bool = False) -> Console:
    """A console for one command's output, sized now: the terminal's width, or ``COLUMNS``,
    or 80 columns in a pipe (tables choose their columns to fit it); ``wide``: no limit."""
    from rich.console import Console  # rich loads only for commands that print tables

    return Console(highlight=False, width=WIDE if wide else None)


@functools.cache
def out_console() -> Console:
    """The shared console on stdout, with rich's defaults (made once, on first use)."""
    from rich.console import Console

    return Console()


@functools.cache
def err_console() -> Console:
    """The console for progress and messages on stderr (made once, on first use)."""
    from rich.console import Console

    return Console(stderr=True)


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr and return the exit to raise (status 2)."""
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(2)


@contextlib.contextmanager
def warnings_as_lines() -> Iterator[None]:
    """Print each distinct :class:`ImplausibleValueWarning` once, as ``warning: …`` on stderr
    (a sweep may meet the same suspicious value at every point)."""
    seen: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("always", ImplausibleValueWarning)
        original = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *args: Any,
                 **kwargs: Any) -> None:
            if not issubclass(category, ImplausibleValueWarning):
                original(message, category, *args, **kwargs)
            elif str(message) not in seen:
                seen.add(str(message))
                print(f"warning: {message}", file=sys.stderr, flush=True)

        warnings.showwarning = show
        yield


def handle_input_errors(func: F) -> F:
    """Turn :class:`InputError` into one line on stderr and exit status 2 (no traceback);
    implausible values become one ``warning:`` line each."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with warnings_as_lines():
                return func(*args, **kwargs)
        except InputError as exc:
            raise fail(str(exc)) from None

    return wrapper  # type: ignore[return-value]


def print_json(data: Any) -> None:
    """One JSON object on stdout (machine-readable; no rich markup)."""
    sys.stdout.write(json.dumps(data, indent=2, allow_nan=False) + "\n")
