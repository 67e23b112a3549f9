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
