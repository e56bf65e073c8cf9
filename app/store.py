"""Conversations on disk: SQLite in WAL mode, one writer (the window's UI thread).

Durability rule the window relies on: the user's message is committed before its reply is
generated, and the reply is committed in one transaction when it finishes. A process killed
mid-reply therefore loses only the reply in flight. WAL with synchronous=NORMAL survives a
killed process (committed pages sit in the WAL file); only a power cut can drop the last commits.

A field read back that is not what was written (a file edited or damaged where SQLite's own
check does not look) reads as the plain value of its kind and is logged (app/store_rows.py).

Every failure is a StoreError with one readable line, never a raw sqlite3.Error: a damaged file
(StoreDamagedError: `ConversationStore.recover` keeps it aside and starts fresh), a full disk
(StoreFullError: the write was rolled back, the caller still holds the text to retry), a lock
held too long by another program (StoreBusyError). The folder is private to the user (0700) and
so are the files (0600), whatever the umask.

Pure Python, no Qt: the CLI or a test can read the same database.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any

from app import store_rows
from app.paths import create_private_file, make_private_dir
from app.store_errors import (
    StoreDamagedError,
    StoreError,
    guarded,
    retry_while_busy,
    store_error,
)
from app.store_schema import MIGRATIONS, SCHEMA_VERSION, split_sql
from app.store_text import storable, title_text


class TokenSource(IntEnum):
    """Who proposed a run of reply text. Stored as the run's second JSON value, where replies
    saved before the suffix index hold `false`/`true`: those read back as TARGET and DRAFT, and
    an older SpecChat reads SUFFIX (2) as truthy, a draft run, so no schema change is needed."""

    TARGET = 0  # the target's own token: nothing drafted there, or the draft was refused
    DRAFT = 1  # a draft model's token the target kept
    SUFFIX = 2  # the suffix index's token (this chat's or past chats' text) the target kept

    @classmethod
    def of(cls, from_draft: bool, from_suffix: bool = False) -> TokenSource:
        if not from_draft:
            return cls.TARGET
        return cls.SUFFIX if from_suffix else cls.DRAFT

    @classmethod
    def stored(cls, value: object) -> TokenSource:
        """A stored run's source; a value a later version may add still reads as drafted."""
        if isinstance(value, int) and value in set(cls):
            return cls(int(value))
        return cls.DRAFT if value else cls.TARGET


Segment = tuple[str, int]
"""A run of reply text and its TokenSource (a bool reads the same: True a draft model's run)."""

Clock = Callable[[], float]


# How long a write waits for another program's lock before giving up with StoreBusyError.
BUSY_TIMEOUT_S = 5.0
# SQLite keeps these beside the database; they belong to it and move with it.
_SIDECARS = ("-wal", "-shm", "-journal")


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

    def __init__(
        self, path: Path, *, clock: Clock = time.time, busy_timeout_s: float = BUSY_TIMEOUT_S
    ) -> None:
        self.path = path
        self._clock = clock
        self._db: sqlite3.Connection | None = None
        # Whether this open made the tables: a history that starts here (a first start, or a
        # database file the user deleted), for which nothing derived from an older one holds.
        self.created = False
        try:
            self._open(busy_timeout_s)
        except BaseException:
            self.close()
            raise

    def _open(self, busy_timeout_s: float) -> None:
        path = self.path
        if path.is_dir():
            raise StoreDamagedError(path, "a folder is where the database file should be")
        try:
            if not path.parent.exists():
                make_private_dir(path.parent)
            # SQLite gives its -wal and -shm files the database file's permissions.
            create_private_file(path)
        except OSError as exc:
            raise StoreError(
                f"cannot write the conversation database {path} ({exc.strerror}); "
                f"check that {path.parent} is writable"
            ) from None
        try:
            # isolation_level=None: transactions are explicit (see _transaction), so a reply is
            # never half-committed by Python's implicit BEGIN handling.
            self._db = sqlite3.connect(str(path), isolation_level=None, timeout=busy_timeout_s)
            self._db.row_factory = sqlite3.Row
            # Switching a new file to WAL takes a lock SQLite does not wait for (its busy
            # handler is skipped there); another process opening the file at once holds it.
            retry_while_busy(self._db, "PRAGMA journal_mode=WAL", busy_timeout_s)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            # Find damage now, where the way out can be offered, not in the middle of a chat.
            problems = [row[0] for row in self._db.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                # Past the report's heading ("*** in database main ***"), which says nothing.
                lines = [
                    line
                    for problem in problems
                    for line in str(problem).splitlines()
                    if line.strip() and not line.startswith("*** ")
                ]
                raise StoreDamagedError(path, f"integrity check: {(lines or problems)[0]}")
            self._migrate()
        except sqlite3.Error as exc:
            raise store_error(exc, path, "open") from None

    @classmethod
    def recover(
        cls, path: Path, *, clock: Clock = time.time, busy_timeout_s: float = BUSY_TIMEOUT_S
    ) -> tuple[ConversationStore, Path]:
        """Move a damaged database (and its sidecar files) aside and open a fresh one.

        Returns the new store and where the damaged file now is. Nothing is deleted: the old
        file keeps its content for whoever wants to rescue it with other tools."""
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock()))
        aside = path.with_name(f"{path.name}.damaged-{stamp}")
        n = 1
        while aside.exists():
            n += 1
            aside = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
        try:
            for suffix in _SIDECARS:
                sidecar = path.with_name(path.name + suffix)
                if sidecar.exists():
                    sidecar.rename(aside.with_name(aside.name + suffix))
            if path.exists():
                path.rename(aside)
        except OSError as exc:
            raise StoreError(
                f"cannot move the damaged database {path} aside ({exc.strerror})"
            ) from None
        return cls(path, clock=clock, busy_timeout_s=busy_timeout_s), aside

    # -- schema -------------------------------------------------------------------------------

    def _migrate(self) -> None:
        # The version is read under the write lock: two processes opening a new file at once
        # must not both read 0 and both create the tables.
        with self._transaction():
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"
            )
            row = self._conn.execute("SELECT version FROM schema_version").fetchone()
            current = int(row[0]) if row else 0
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"the conversation database {self.path} was written by a newer SpecChat "
                    f"(schema {current}, this version knows {SCHEMA_VERSION})"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in split_sql(MIGRATIONS[version]):
                    self._conn.execute(statement)
            if current == 0:
                self._conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
                self.created = True
            elif current < SCHEMA_VERSION:
                self._conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError("the conversation database is closed")
        return self._db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        db = self._conn
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            # SQLite may have rolled back already (a full disk does); then there is nothing to do.
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            raise

    # -- conversations ------------------------------------------------------------------------

    @guarded
    def create_conversation(self, title: str = "New chat") -> int:
        now = self._clock()
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO conversations (id, title, created_at, updated_at) "
                f"VALUES ({_NEXT_ID.format(table='conversations', kind='conversation')}, ?, ?, ?)",
                (storable(title_text(title)), now, now),
            )
        assert cursor.lastrowid is not None
        return int(cursor.lastrowid)

    @guarded
    def conversations(self) -> list[ConversationSummary]:
        """Most recently active first."""
        rows = self._conn.execute(
            "SELECT c.id, c.title, c.created_at, c.updated_at, COUNT(m.id) AS n "
            "FROM conversations c LEFT JOIN messages m ON m.conversation_id = c.id "
            "GROUP BY c.id ORDER BY c.updated_at DESC, c.id DESC"
        ).fetchall()
        return [
            ConversationSummary(
                r["id"],
                store_rows.text(r["title"], f"chat {r['id']} title"),
                store_rows.seconds(r["created_at"], f"chat {r['id']} start"),
                store_rows.seconds(r["updated_at"], f"chat {r['id']} last change"),
                r["n"],
            )
            for r in rows
        ]

    def conversation(self, conversation_id: int) -> ConversationSummary | None:
        return next((c for c in self.conversations() if c.id == conversation_id), None)

    @guarded
    def rename(self, conversation_id: int, title: str) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE conversations SET title = ? WHERE id = ?",
                (storable(title_text(title)), conversation_id),
            )

    @guarded
    def delete(self, conversation_id: int) -> None:
        with self._transaction() as db:
            _retire(db, "conversation", "SELECT ?", conversation_id)
            _retire(
                db,
                "message",
                "SELECT MAX(id) FROM messages WHERE conversation_id = ?",
                conversation_id,
            )
            db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    # -- messages -----------------------------------------------------------------------------

    @guarded
    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        *,
        stats: dict[str, Any] | None = None,
        segments: Sequence[Segment] | None = None,
        replacing: Sequence[int] = (),
    ) -> int:
        """Store a message; `replacing`: the ids of messages it takes the place of (a
        regenerated reply; an edited question and what followed it), deleted in the same
        commit, so a crash leaves one or the other."""
        now = self._clock()
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO messages "
                "(id, conversation_id, role, content, created_at, stats_json, segments_json) "
                f"VALUES ({_NEXT_ID.format(table='messages', kind='message')}, ?, ?, ?, ?, ?, ?)",
                (
                    conversation_id,
                    role,
                    storable(content),
                    now,
                    None if stats is None else json.dumps(stats),
                    None
                    if segments is None
                    else json.dumps([[storable(text), int(source)] for text, source in segments]),
                ),
            )
            for replaced in replacing:
                _retire(db, "message", "SELECT ?", replaced)
                db.execute(
                    "DELETE FROM messages WHERE id = ? AND conversation_id = ?",
                    (replaced, conversation_id),
                )
            db.execute(
                "UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id)
            )
        assert cursor.lastrowid is not None
        return int(cursor.lastrowid)

    @guarded
    def messages(self, conversation_id: int) -> list[StoredMessage]:
        rows = self._conn.execute(
            "SELECT * FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)
        ).fetchall()
        return [_message_from_row(r) for r in rows]

    @guarded
    def delete_message(self, message_id: int) -> None:
        with self._transaction() as db:
            _retire(db, "message", "SELECT ?", message_id)
            db.execute("DELETE FROM messages WHERE id = ?", (message_id,))

    # -- export -------------------------------------------------------------------------------

    @guarded
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
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None


# A new row's id: past every id the table holds and every one it ever gave to a row now gone.
_NEXT_ID = (
    "(SELECT MAX(COALESCE((SELECT MAX(id) FROM {table}), 0), "
    "COALESCE((SELECT max_id FROM retired_ids WHERE kind = '{kind}'), 0)) + 1)"
)


def _retire(db: sqlite3.Connection, kind: str, highest: str, *args: object) -> None:
    """Remember the id `highest` selects as given, before its row is deleted."""
    db.execute(
        "INSERT INTO retired_ids (kind, max_id) "
        f"SELECT ?, v FROM (SELECT ({highest}) AS v) WHERE v IS NOT NULL "
        "ON CONFLICT (kind) DO UPDATE SET max_id = MAX(max_id, excluded.max_id)",
        (kind, *args),
    )


def _message_from_row(row: sqlite3.Row) -> StoredMessage:
    where = f"message {row['id']}"
    runs = store_rows.runs(row["segments_json"], f"{where} highlights")
    return StoredMessage(
        id=row["id"],
        conversation_id=row["conversation_id"],
        role=store_rows.text(row["role"], f"{where} role"),
        content=store_rows.text(row["content"], f"{where} text"),
        created_at=store_rows.seconds(row["created_at"], f"{where} time"),
        stats=store_rows.stats(row["stats_json"], f"{where} stats"),
        segments=None if runs is None else [(t, TokenSource.stored(s)) for t, s in runs],
    )
