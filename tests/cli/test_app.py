"""The ``ddlperf`` command itself: --version, -h, and usage errors as one line."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import ddlperf
import ddlperf.cli
from ddlperf.cli.app import app
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
