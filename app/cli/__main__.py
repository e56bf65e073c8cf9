"""`python -m app.cli` runs the specchat command."""

from app.cli.main import main

raise SystemExit(main())
