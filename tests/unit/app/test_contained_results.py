"""What a contained command's child hands its parent (app/cli/contained.py): the results kept
so far, for the parent to write if the child dies; a parent gone away costs the child nothing."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from multiprocessing.connection import Connection

import pytest

from app.cli import contained


@pytest.fixture
def parent_end() -> Iterator[Connection]:
    reader, writer = multiprocessing.Pipe(duplex=False)
    contained._to_parent.append(writer)
    try:
        yield reader
    finally:
        contained._to_parent.clear()
        writer.close()
        reader.close()


def test_the_parent_reads_the_last_results_kept(parent_end: Connection) -> None:
    assert contained.parent_keeps_results()
    for runs in (1, 2, 3):
        contained.keep_for_parent({"runs": runs})
    contained._to_parent[0].close()
    contained._to_parent.clear()
    assert contained._last_kept(parent_end) == [{"runs": 3}]


def test_a_parent_that_stopped_listening_leaves_the_child_working(parent_end: Connection) -> None:
    # A signal ended the parent, which closed its end: the child's next hand-over broke its
    # pipe and took the benchmark down with a traceback.
    parent_end.close()
    contained.keep_for_parent({"runs": 1})
    assert not contained.parent_keeps_results()
    contained.keep_for_parent({"runs": 2})  # nothing to hand to, nothing raised
