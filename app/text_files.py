"""Text files a user names (a prompt file, a chat template, a bench's prompts), read whole but
never past a bound: `/dev/zero` or a disk image given by mistake is refused unread, not read
until memory runs out. Every failure is one InvalidSettingError naming the file."""

from __future__ import annotations

from pathlib import Path

from app.errors import InvalidSettingError

MIB = 2**20


def read_text_file(path: Path, *, name: str, limit: int) -> str:
    """The UTF-8 text of `path`, at most `limit` bytes; `name` says what the file is in the
    messages ("prompt file x.txt", "--chat-template-file t.jinja")."""
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)  # one byte past the bound: a larger file is refused
    except FileNotFoundError:
        raise InvalidSettingError(f"{name} does not exist") from None
    except IsADirectoryError:
        raise InvalidSettingError(f"{name} is a folder; name a file") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InvalidSettingError(f"cannot read {name}: {reason}") from None
    if len(data) > limit:
        raise InvalidSettingError(f"{name} is larger than {_size(limit)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidSettingError(f"{name} is not UTF-8 text (byte {exc.start})") from None


def _size(n_bytes: int) -> str:
    return f"{n_bytes // MIB} MiB" if n_bytes >= MIB else f"{n_bytes // 1024} KiB"
