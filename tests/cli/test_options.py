"""Scenario flags are defined once and read the same way by predict, sweep and measure."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.cli.app import app
from ddlperf.cli.options import SCENARIO_FLAGS, flags_for
from tests.conftest import assert_one_line_error

runner = CliRunner()


@pytest.mark.parametrize("command", ["predict", "sweep", "measure"])
def test_every_scenario_flag_is_an_option_of_its_commands(command: str) -> None:
    text = runner.invoke(app, [command, "-h"], env={"COLUMNS": "200"}).stdout
    for flag in SCENARIO_FLAGS:
        assert (flag.option in text) == (command in flag.commands), flag.option
    assert {f.name for f in flags_for("measure")} >= {"model", "workload", "workers",
                                                       "bandwidth", "config"}


@pytest.mark.parametrize("command", ["predict", "sweep", "measure"])
@pytest.mark.parametrize(("args", "needle"), [
    (["--workers", "4.5"], "--workers: '4.5' is not a whole number"),
    (["--arch", "ring"], "--arch: 'ring' is not one of ps, allreduce"),
    (["--sync", "lazy"], "--sync: 'lazy' is not one of bsp, asp, ssp"),
    (["--sharding", "random"], "--sharding: 'random' is not one of"),
    (["--batch-size", "big"], "--batch-size: 'big' is not a whole number"),
])
def test_bad_values_read_the_same_everywhere(command: str, args: list[str], needle: str
                                             ) -> None:
    assert_one_line_error(runner.invoke(app, [command, *args]), needle)


@pytest.mark.parametrize(("args", "needle"), [
    (["--workers", "1,,4"], "--workers: '1,,4' has an empty value"),
    (["--workers", "1,"], "has an empty value"),
    (["--goodput", "0.9,nan"], "--goodput: 'nan' is not a finite number"),
    (["--overlap", "on,maybe"], "--overlap: 'maybe' is not on or off"),
    (["--workers", "64..8"], "--workers: '64..8' is an inverted range — write 8..64"),
    (["--workers", "1..x"], "--workers: 'x' is not a whole number"),
    (["--bandwidth", "1..10Gbps"], "--bandwidth"),
])
def test_sweep_lists(args: list[str], needle: str) -> None:
    assert_one_line_error(runner.invoke(app, ["sweep", *args]), needle)


def test_sweep_takes_whole_number_ranges() -> None:
    import json

    result = runner.invoke(app, ["sweep", "--workers", "1..4,8", "--staleness", "0..1",
                                 "--sync", "ssp", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["workers"], r["staleness"]) for r in rows] == [
        (w, s) for w in (1, 2, 3, 4, 8) for s in (0, 1)]
