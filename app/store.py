"""Conversations on disk: SQLite in WAL mode, one writer (the window's UI thread).

Durability rule the window relies on: the user's message is committed before its reply is
generated, and the reply is committed in one transaction when it finishes. A process killed
mid-reply therefore loses only the reply in flight. WAL with synchronous=NORMAL survives a
killed process (committed pages sit in the WAL file); only a power cut can drop the last commits.

Pure Python, no Qt: the CLI or a test can read the same database.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Bump when the schema changes and add a step to _MIGRATIONS; do not change or reuse numbers.
SCHEMA_VERSION = 1

_SCHEMA_V1 = """
CREATE TABLE conversations (
    id          INTEGER PRIMARY KEY,
    title       TEXT    NOT NULL,
    created_at  REAL    NOT NULL,
    updated_at  REAL    NOT NULL
);
CREATE TABLE messages (
    id              INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role            TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
    content         TEXT    NOT NULL,
    created_at      REAL    NOT NULL,
    -- JSON object: the reply's GenerationStats plus mode, draft, finish reason (NULL for users).
    stats_json      TEXT,
    -- JSON list of [text, from_draft] runs, so accepted draft tokens stay highlighted on reopen.
    segments_json   TEXT
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
"""

_MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1}

Segment = tuple[str, bool]
"""A run of reply text and whether the target accepted it from the draft."""

Clock = Callable[[], float]


class StoreError(Exception):
    """The conversation database cannot be used (newer schema, corrupt file)."""


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    id: int
    title: str
    created_at: float
    updated_at: float
    message_count: int


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    conversation_id: int
    role: str
    content: str
    created_at: float
    stats: dict[str, Any] | None
    segments: list[Segment] | None


class ConversationStore:
    """All conversation reads and writes. Not thread-safe: use it from one thread."""

    def __init__(self, path: Path, *, clock: Clock = time.time) -> None:
        self.path = path
        self._clock = clock
        path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are explicit (see _transaction), so a reply is
        # never half-committed by Python's implicit BEGIN handling.
        self._db = sqlite3.connect(str(path), isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._migrate()

    # -- schema -------------------------------------------------------------------------------

    def _migrate(self) -> None:
        self._db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = self._db.execute("SELECT version FROM schema_version").fetchone()
        current = int(row[0]) if row else 0
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"the conversation database {self.path} was written by a newer SpecChat "
                f"(schema {current}, this version knows {SCHEMA_VERSION})"
            )
        with self._transaction():
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in _split_sql(_MIGRATIONS[version]):
                    self._db.execute(statement)
            if current == 0:
                self._db.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
            elif current < SCHEMA_VERSION:
                self._db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- conversations ------------------------------------------------------------------------

    def create_conversation(self, title: str = "New chat") -> int:
        now = self._clock()
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO conversations (title, created_at, updated_at) VALUES (?, ?, ?)",
                (title, now, now),
            )
        assert cursor.lastrowid is not None
        return int(cursor.lastrowid)

    def conversations(self) -> list[ConversationSummary]:
        """Most recently active first."""
        rows = self._db.execute(
            "SELECT c.id, c.title, c.created_at, c.updated_at, COUNT(m.id) AS n "
            "FROM conversations c LEFT JOIN messages m ON m.conversation_id = c.id "
            "GROUP BY c.id ORDER BY c.updated_at DESC, c.id DESC"
        ).fetchall()
        return [
            ConversationSummary(r["id"], r["title"], r["created_at"], r["updated_at"], r["n"])
            for r in rows
        ]

    def conversation(self, conversation_id: int) -> ConversationSummary | None:
        return next((c for c in self.conversations() if c.id == conversation_id), None)

    def rename(self, conversation_id: int, title: str) -> None:
        title = title.strip() or "Untitled"
        with self._transaction() as db:
            db.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id))

    def delete(self, conversation_id: int) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    # -- messages -----------------------------------------------------------------------------

    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        *,
        stats: dict[str, Any] | None = None,
        segments: Sequence[Segment] | None = None,
    ) -> int:
        now = self._clock()
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO messages "
                "(conversation_id, role, content, created_at, stats_json, segments_json) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    conversation_id,
                    role,
                    content,
                    now,
                    None if stats is None else json.dumps(stats),
                    None if segments is None else json.dumps([list(s) for s in segments]),
                ),
            )
            db.execute(
                "UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id)
            )
        assert cursor.lastrowid is not None
        return int(cursor.lastrowid)

    def messages(self, conversation_id: int) -> list[StoredMessage]:
        rows = self._db.execute(
            "SELECT * FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)
        ).fetchall()
        return [_message_from_row(r) for r in rows]

    def delete_message(self, message_id: int) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM messages WHERE id = ?", (message_id,))

    # -- export -------------------------------------------------------------------------------

    def export_markdown(self, conversation_id: int) -> str:
        summary = self.conversation(conversation_id)
        if summary is None:
            raise StoreError(f"conversation {conversation_id} does not exist")
        parts = [f"# {summary.title}\n"]
        for message in self.messages(conversation_id):
            heading = {"user": "You", "assistant": "Assistant", "system": "System"}[message.role]
            parts.append(f"## {heading}\n\n{message.content.strip()}\n")
            if message.stats and message.stats.get("summary"):
                parts.append(f"*{message.stats['summary']}*\n")
        return "\n".join(parts)

    def close(self) -> None:
        self._db.close()


def _split_sql(script: str) -> list[str]:
    # executescript() would COMMIT our open transaction; run the statements one by one instead.
    # The schema text has no semicolons inside literals, so a plain split is exact.
    lines = [ln for ln in script.splitlines() if not ln.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def _message_from_row(row: sqlite3.Row) -> StoredMessage:
    stats = json.loads(row["stats_json"]) if row["stats_json"] else None
    segments = (
        [(str(text), bool(flag)) for text, flag in json.loads(row["segments_json"])]
        if row["segments_json"]
        else None
    )
    return StoredMessage(
        id=row["id"],
        conversation_id=row["conversation_id"],
        role=row["role"],
        content=row["content"],
        created_at=row["created_at"],
        stats=stats,
        segments=segments,
    )
