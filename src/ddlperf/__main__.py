"""``python -m ddlperf`` runs the CLI."""

from ddlperf.cli import main

main()
