"""The installed version of SpecChat, for `specchat --version` and the About box."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def app_version() -> str:
    """The installed distribution's version; a frozen bundle carries the same metadata."""
    try:
        return version("specchat")
    except PackageNotFoundError:
        return "unknown (running from a source tree that is not installed)"
