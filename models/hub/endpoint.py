"""Which Hub to talk to, and a malformed endpoint worded as one error line."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from app.errors import DownloadError
from models.terminal import printable

__all__ = ["DEFAULT_ENDPOINT", "resolve_endpoint", "set_aside_bad_env_endpoint"]

DEFAULT_ENDPOINT = "https://huggingface.co"
_ENV = "HF_ENDPOINT"
_bad_env_endpoint: str | None = None  # a malformed $HF_ENDPOINT, taken out of the environment


def _check(url: str, source: str) -> str:
    """`url` if it is an http(s) URL with a host (and a numeric port, if any)."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a port that is not a number
        why = "" if parts.scheme in ("http", "https") and parts.hostname else "not http(s)://host"
    except ValueError as exc:
        why = " ".join(str(exc).split())
    if why:
        where = f" ({source})" if source else ""
        raise DownloadError(f"invalid Hub endpoint {printable(url)!r}{where}: {why}")
    return url


def set_aside_bad_env_endpoint() -> None:
    """Run before huggingface_hub is imported: it parses $HF_ENDPOINT at import time and fails
    with a bare ValueError on a malformed one, which would end the window or the command with
    a traceback. The value is kept, so each Hub call can refuse it in words instead."""
    global _bad_env_endpoint  # noqa: PLW0603 - the process's environment is process-wide too
    value = os.environ.get(_ENV)
    if not value:
        return
    try:
        _check(value, _ENV)
    except DownloadError:
        _bad_env_endpoint = value
        del os.environ[_ENV]


def resolve_endpoint(endpoint: str | None = None) -> str:
    """The Hub to talk to: `endpoint`, else $HF_ENDPOINT as set now, else huggingface.co."""
    if endpoint:
        return _check(endpoint, "--endpoint").rstrip("/")
    value = os.environ.get(_ENV) or _bad_env_endpoint
    if value:
        return _check(value, _ENV).rstrip("/")
    return DEFAULT_ENDPOINT
