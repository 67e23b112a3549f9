"""The ``ddlperf`` command itself: --version, -h, usage errors as one line, and commands that
load only what they need."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest
import typer
import typer.main
from typer.core import TyperGroup
from typer.testing import CliRunner

import ddlperf
import ddlperf.cli
from ddlperf.cli.app import COMMAND_MODULES, app
from tests.conftest import assert_one_line_error

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"ddlperf {ddlperf.__version__}"


@pytest.mark.parametrize("args", [["-h"], ["predict", "-h"], ["sweep", "-h"], ["measure", "-h"],
                                  ["cluster", "up", "-h"]])
def test_short_help(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 0 and "Usage:" in result.stdout


@pytest.mark.parametrize(("args", "needles"), [
    (["predict", "--worker", "4"], ["--worker: no such option", "did you mean --workers"]),
    (["predict", "--iterations", "4.5"], ["--iterations: '4.5' is not a whole number"]),
    (["predict", "--jitter", "lots"], ["--jitter: 'lots' is not a number"]),
    (["sweep", "--jobs", "x"], ["--jobs: 'x' is not a whole number"]),
    (["profile", "--optimizer", "lamb"], ["--optimizer", "'lamb'"]),
    (["show"], ["PATH", "is required"]),
    (["nosuch"], ["no such command"]),
])
def test_usage_errors_are_one_line(args: list[str], needles: list[str]) -> None:
    result = runner.invoke(app, args)
    assert_one_line_error(result, *needles)
    assert "Usage:" not in result.output and "Try '" not in result.output


def _modules_after(args: list[str]) -> set[str]:
    """Every module loaded by a fresh ``ddlperf ARGS`` process, run to its end."""
    code = ("import json, sys\n"
            "from ddlperf.cli import main\n"
            f"sys.argv = ['ddlperf', *{args!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('\\nMODULES ' + json.dumps(sorted(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("MODULES "), out.stdout[-400:] + out.stderr[-400:]
    return set(json.loads(line.removeprefix("MODULES ")))


def _roots(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


PLOTS_ENGINES_TORCH = {"matplotlib", "ray", "dask", "distributed", "torch", "scipy", "pyarrow",
                       "jinja2"}


@pytest.mark.parametrize("args", [
    ["predict", "--json"],
    ["predict", "--model", "vgg16", "--workers", "8", "--arch", "allreduce"],
    ["explain", "--model", "resnet50", "--workers", "64"],
    ["explain", "--json", "--sync", "ssp"],
])
def test_prediction_commands_load_no_plots_engines_or_torch(args: list[str]) -> None:
    """Start-up is most of a short command's time: the analytic prediction path loads no
    plotting, no distributed engine, no torch or scipy, no YAML parser (no YAML file given),
    and only its own command module of the CLI."""
    modules = _modules_after(args)
    assert not _roots(modules) & (PLOTS_ENGINES_TORCH | {"yaml"}), \
        sorted(_roots(modules) & (PLOTS_ENGINES_TORCH | {"yaml"}))
    assert not {m for m in modules if m.startswith("ddlperf.predictors.simulate")}
    commands = {m.removeprefix("ddlperf.cli.") for m in modules
                if m.removeprefix("ddlperf.cli.") in set(COMMAND_MODULES.values())}
    assert commands == {args[0]}


def test_version_and_help_load_no_numbers_stack() -> None:
    """``--version`` needs neither numpy, pydantic nor rich, nor the library itself."""
    for args in (["--version"], ["-h"]):
        modules = _modules_after(args)
        assert not _roots(modules) & {"numpy", "pydantic", "rich", *PLOTS_ENGINES_TORCH}, args
        assert "ddlperf.api" not in modules


def test_lazy_commands_are_the_eager_ones_in_the_same_order() -> None:
    """The lazily loaded group lists and builds exactly what typer builds from every command
    module imported up front: the same names and help text, listed in the order of
    COMMAND_MODULES (the eager group's order is the modules' import order, which other tests
    in the same process may already have fixed)."""
    for module in dict.fromkeys(COMMAND_MODULES.values()):
        importlib.import_module(f"ddlperf.cli.{module}")
    from ddlperf.cli.cluster import cluster_app

    app.add_typer(cluster_app)  # as the command modules were registered before
    try:
        eager = typer.main.get_command(app)
    finally:
        app.registered_groups.pop()
    assert isinstance(eager, TyperGroup)
    lazy = typer.main.get_command(app)
    assert isinstance(lazy, TyperGroup)
    lazy.commands.clear()  # as in a fresh process: nothing built yet
    ctx = typer.Context(lazy, info_name="ddlperf")
    assert lazy.list_commands(ctx) == list(COMMAND_MODULES)
    assert sorted(eager.commands) == sorted(COMMAND_MODULES)
    for name in COMMAND_MODULES:
        built = lazy.get_command(ctx, name)
        assert built is not None
        sub = typer.Context(built, info_name=name, parent=ctx)
        assert built.get_help(sub) == eager.commands[name].get_help(sub), name
