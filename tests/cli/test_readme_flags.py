"""Every flag of the answer commands is documented in the README (details may be in docs/)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from ddlperf.cli.app import app

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


@pytest.mark.parametrize("command", ["explain", "plan", "report", "sweep"])
def test_every_flag_is_in_the_readme(command):
    group = typer.main.get_command(app)
    params = group.get_command(None, command).params  # type: ignore[attr-defined,union-attr]
    flags = [opt for p in params for opt in p.opts if opt.startswith("--")]
    missing = [f for f in flags if f"`{f}" not in README and f != "--help"]
    assert not missing, f"{command}: {missing} not in README.md"


def test_the_quick_start_output_is_what_predict_prints():
    """The README shows `ddlperf predict`'s output on the built-in default; it must be this
    version's (it had drifted: 451.3 ms and 1.91× where the models gave 448.7 ms, 1.79×)."""
    from typer.testing import CliRunner

    start = README.index("```text\nresnet50 (102.2MB parameters)") + len("```text\n")
    shown = README[start:README.index("```", start)]
    result = CliRunner().invoke(app, ["predict"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0
    printed = "\n".join(line.rstrip() for line in result.output.splitlines()) + "\n"
    assert printed == shown
