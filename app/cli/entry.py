"""The `specchat` command's first code (the console script and `python -m app.cli`).

Kept free of imports: app.cli.main imports the engine, llama.cpp's bindings and numpy, which
takes a few tenths of a second, and a Ctrl-C then (or while the command line is checked, before
main's own handlers are in place) would otherwise end in Python's KeyboardInterrupt traceback.
"""

from __future__ import annotations

import sys


def run() -> int:
    try:
        from app.cli.main import main  # noqa: PLC0415 - a Ctrl-C during this import is caught

        return main()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
