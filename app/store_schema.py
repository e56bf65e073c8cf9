"""The conversation database's schema and its migrations, by version."""

from __future__ import annotations

# Bump when the schema changes and add a step to MIGRATIONS; do not change or reuse numbers.
SCHEMA_VERSION = 2

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
    -- JSON list of [text, source] runs, so accepted draft tokens stay highlighted on reopen:
    -- source is app.store.TokenSource (0 target, 1 draft model, 2 suffix index; false/true
    -- in replies saved before the suffix index).
    segments_json   TEXT
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
"""

# The highest id ever given to a chat or a message that is gone. SQLite gives a new row the
# largest id in the table plus one, so deleting the newest chat would hand its id to the next:
# a second window still showing the deleted chat would then write its reply into a stranger's
# (what AUTOINCREMENT prevents, which a table cannot gain without being rebuilt).
_SCHEMA_V2 = """
CREATE TABLE retired_ids (
    kind    TEXT    PRIMARY KEY CHECK (kind IN ('conversation', 'message')),
    max_id  INTEGER NOT NULL
);
"""

MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1, 2: _SCHEMA_V2}


def split_sql(script: str) -> list[str]:
    # executescript() would COMMIT our open transaction; run the statements one by one instead.
    # The schema text has no semicolons inside literals, so a plain split is exact.
    lines = [ln for ln in script.splitlines() if not ln.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
