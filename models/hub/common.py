"""What every Hub call shares: the endpoint, one-line errors, repository ids, sizes in words."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx2
from huggingface_hub import get_token
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import validate_repo_id

from app.errors import Cancelled, DownloadError
from models.hub.endpoint import DEFAULT_ENDPOINT, resolve_endpoint
from models.terminal import printable

__all__ = [
    "DEFAULT_ENDPOINT",
    "LISTING_TIMEOUT",
    "TIMEOUT",
    "check_repo_id",
    "host",
    "hub_errors",
    "mib",
    "one_line",
    "resolve_endpoint",
    "size_text",
]

# Reads time out quickly so that a stalled transfer still notices a cancel within a second; a
# stall is retried (resumed) until it has lasted STALL_LIMIT_S, see transfer.py.
TIMEOUT = httpx2.Timeout(10.0, connect=10.0, read=0.5)
# A file list is one request with no retry, and a Hub may take seconds to list a large
# repository (or a mirror on a slow link to answer at all): half a second refused those.
LISTING_TIMEOUT = httpx2.Timeout(30.0, connect=10.0)


def host(endpoint: str) -> str:
    return urlsplit(endpoint).netloc or endpoint


def one_line(text: str, limit: int = 160) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def mib(n: int) -> str:
    return f"{n / 1024**2:.1f} MiB"


def size_text(n: int) -> str:
    return f"{n / 1024**3:.2f} GiB" if n >= 1024**3 else mib(n)


_STATUS_HINTS = {
    429: " (too many requests: wait a minute and pull again)",
    500: " (a server error: pull again later)",
    502: " (a server error: pull again later)",
    503: " (the server is busy or down: pull again later)",
    504: " (the server timed out: pull again later)",
}


def _has_token() -> bool:
    return bool(get_token())


@contextlib.contextmanager
def hub_errors(
    repo_id: str, endpoint: str, *, revision: str | None = None, filename: str | None = None
) -> Iterator[None]:
    """Turn huggingface_hub / httpx2 failures into one-line DownloadErrors."""
    where = host(endpoint)
    try:
        yield
    except (DownloadError, Cancelled):
        raise
    except GatedRepoError:
        login = "" if _has_token() else " and log in (HF_TOKEN)"
        raise DownloadError(
            f"{repo_id} is gated: accept its terms on the Hub{login}; a token must belong to "
            "the account that accepted them"
        ) from None
    except RepositoryNotFoundError:
        raise DownloadError(
            f"repository {repo_id} not found on {where} "
            "(check the name; private repositories need a token)"
        ) from None
    except RevisionNotFoundError:
        raise DownloadError(f"revision {revision} not found in {repo_id}") from None
    except EntryNotFoundError:
        what = printable(filename) if filename else "the file"
        raise DownloadError(f"{what} not found in {repo_id} at revision {revision}") from None
    except OfflineModeIsEnabled:
        raise DownloadError(
            "Hugging Face offline mode is on (HF_HUB_OFFLINE is set); unset it to download"
        ) from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "error"
        what = f"{printable(filename)} in {repo_id}" if filename else repo_id
        hint = _STATUS_HINTS.get(status, "") if isinstance(status, int) else ""
        raise DownloadError(f"{where} answered HTTP {status} for {what}{hint}") from None
    except httpx2.TooManyRedirects:
        raise DownloadError(
            f"{where} redirected the request in a loop (too many redirects)"
        ) from None
    except httpx2.TimeoutException:
        raise DownloadError(f"network failure: timed out talking to {where}") from None
    except httpx2.HTTPError as exc:
        detail = one_line(printable(exc) or type(exc).__name__, 80)
        raise DownloadError(f"network failure: cannot reach {where} ({detail})") from None
    except HFValidationError:
        raise DownloadError(f"invalid repository id {repo_id!r} (expected owner/name)") from None
    except ValueError as exc:  # a JSON body that is not what the Hub sends
        raise DownloadError(
            f"unexpected answer from {where}: {one_line(printable(exc), 80)}"
        ) from None


def check_repo_id(repo_id: str) -> None:
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise DownloadError(f"invalid repository id {repo_id!r} (expected owner/name)") from None
    if "/" not in repo_id:
        raise DownloadError(f"invalid repository id {repo_id!r} (expected owner/name)")
