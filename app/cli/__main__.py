"""`python -m app.cli` runs the specchat command."""

from app.cli.entry import run

raise SystemExit(run())
