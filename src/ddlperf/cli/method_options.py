"""``--method`` and the simulator's options, defined once for the commands that predict one
scenario (``explain``, ``report``): the command receives ``method`` and a ``simulate`` dict
of the options that were given."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from ddlperf.errors import InputError

F = TypeVar("F", bound=Callable[..., Any])
METHODS = ("analytic", "simulate")
SIMULATE_OPTIONS: tuple[tuple[str, type, str], ...] = (
    ("iterations", int, "simulate: measured iterations [default: 20]"),
    ("warmup", int, "simulate: warm-up iterations excluded [default: 3]"),
    ("seed", int, "simulate: random seed [default: 0]"),
    ("replications", int, "simulate: independent runs for p5/p95 [default: 1]"),
    ("jitter", float, "simulate: per-op coefficient of variation [default: the workload's]"),
)


def check_method(method: str) -> str:
    if method not in METHODS:
        raise InputError("--method", f"{method!r} is not one of {', '.join(METHODS)}",
                         "use analytic or simulate")
    return method


def method_flags(func: F) -> F:
    """Add ``--method`` and the simulate options to a typer command (see the module doc)."""
    signature = inspect.signature(func, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name not in ("method", "simulate")]
    added = [inspect.Parameter(
        "method", inspect.Parameter.KEYWORD_ONLY, default="analytic",
        annotation=Annotated[str, typer.Option(
            help="analytic (closed form/queueing) or simulate (discrete events)")])]
    added += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                annotation=Annotated[kind | None, typer.Option(help=text)])
              for name, kind, text in SIMULATE_OPTIONS]

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        method = check_method(kwargs.pop("method"))
        simulate = {name: kwargs.pop(name) for name, _k, _t in SIMULATE_OPTIONS}
        simulate = {k: v for k, v in simulate.items() if v is not None}
        return func(**kwargs, method=method, simulate=simulate)

    parameters = [*(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own), *added]
    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    del wrapper.__wrapped__
    return wrapper  # type: ignore[return-value]
