"""The typer application object; command modules register themselves on it.

Commands load on demand: ``ddlperf explain`` imports ``ddlperf.cli.explain`` and nothing of
``sweep``, ``measure`` or ``validate``, and typer builds the click command of that one command
only (building all of them costs ~70 ms of CPU, importing their modules more). Help and
suggestions for a mistyped command load them all.

Usage errors that click/typer find themselves (an unknown option, ``--iterations 4.5``) are
printed as one ``error:`` line naming the flag, exit status 2 — the same shape as every other
bad input — instead of click's usage block.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

import typer
import typer.main
from typer.core import TyperGroup

from ddlperf.errors import InputError

try:  # typer ≥ 0.17 vendors click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

# Each command and the module under ddlperf.cli that defines it, in the order `ddlperf -h` lists
# them. A module defines its commands with ``@app.command()``, or a group as ``<module>_app``.
COMMAND_MODULES: dict[str, str] = {
    "predict": "predict", "sweep": "sweep",
    "models": "catalogs", "devices": "catalogs", "fabrics": "catalogs", "transports": "catalogs",
    "profile": "profile", "show": "profile", "measure": "measure", "validate": "validate",
    "explain": "explain", "report": "report", "plan": "plan", "cluster": "cluster",
}

# pydantic error types (typer validates option values with pydantic) → our wording.
_PROBLEMS = {
    "int_parsing": "is not a whole number", "int_from_float": "is not a whole number",
    "float_parsing": "is not a number", "finite_number": "is not a finite number",
    "bool_parsing": "is not true or false",
}


def usage_error_line(exc: click_exceptions.UsageError) -> str:
    """One line for a click usage error: ``--flag: problem — fix``."""
    command = exc.ctx.command_path if exc.ctx is not None else "ddlperf"
    see = f"see '{command} -h'"
    if isinstance(exc, click_exceptions.NoSuchOption):
        fix = (f"did you mean {' or '.join(sorted(exc.possibilities))}?"
               if exc.possibilities else see)
        return str(InputError(exc.option_name, "no such option", fix))
    if isinstance(exc, click_exceptions.BadParameter):
        param = exc.param
        hint = (exc.param_hint if isinstance(exc.param_hint, str)
                else "value" if param is None
                else param.opts[0] if param.param_type_name == "option" and param.opts
                else param.get_error_hint().strip("'").upper())
        if isinstance(exc, click_exceptions.MissingParameter):
            return str(InputError(hint, "is required", see))
        cause = exc.__cause__
        errors = cause.errors() if hasattr(cause, "errors") else []
        if errors:
            given = errors[0].get("input")
            problem = _PROBLEMS.get(errors[0]["type"]) or _message(errors[0]["msg"])
            return str(InputError(hint, f"{given!r} {problem}", see))
        return str(InputError(hint, _message(exc.message), see))
    return str(InputError(command, _message(exc.format_message()), see))


def _message(text: str) -> str:
    text = text.removeprefix("Value error, ").strip().rstrip(".")
    return text[:1].lower() + text[1:]


class OneLineErrors(TyperGroup):
    """A TyperGroup whose usage errors are one ``error:`` line (exit 2) and whose commands
    load on first use (see the module doc)."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(dict.fromkeys([*COMMAND_MODULES, *self.commands]))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            self.commands[cmd_name] = _load_command(cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] not in COMMAND_MODULES:  # a typo: suggest from every command
            for name in self.list_commands(ctx):
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click_exceptions.NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click_exceptions.UsageError as exc:
            print(f"error: {usage_error_line(exc)}", file=sys.stderr)
            sys.exit(2)
        except click_exceptions.ClickException as exc:
            print(f"error: {_message(exc.format_message())}", file=sys.stderr)
            sys.exit(exc.exit_code)
        except typer.Abort:
            print("error: aborted", file=sys.stderr)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    name="ddlperf",
    cls=OneLineErrors,
    help=(
        "Predict iteration time, throughput, speedup and bottleneck of data-parallel DNN "
        "training (parameter server or all-reduce), and check predictions against real runs."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _load_command(name: str) -> Any:
    """Import the module of command ``name`` and build its click command (or group)."""
    module = importlib.import_module(f"ddlperf.cli.{COMMAND_MODULES[name]}")
    options: dict[str, Any] = {"pretty_exceptions_short": app.pretty_exceptions_short,
                               "rich_markup_mode": app.rich_markup_mode}
    group = getattr(module, f"{COMMAND_MODULES[name]}_app", None)
    if group is not None:
        return typer.main.get_group_from_info(
            typer.main.TyperInfo(group), suggest_commands=app.suggest_commands, **options)
    for info in app.registered_commands:
        callback_name = info.callback.__name__ if info.callback is not None else ""
        if (info.name or typer.main.get_command_name(callback_name)) == name:
            return typer.main.get_command_from_info(info, **options)
    raise LookupError(f"ddlperf.cli.{COMMAND_MODULES[name]} defines no command {name!r}")


def _version(value: bool) -> None:
    if value:
        from ddlperf import __version__

        typer.echo(f"ddlperf {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="print the version and exit"),
) -> None:
    """Predict iteration time, throughput, speedup and bottleneck of data-parallel DNN
    training (parameter server or all-reduce), and check predictions against real runs."""
