"""A suffix index from stored columns, refused unless they make a well-formed automaton.

A file is checksummed, but one written by a faulty version or edited by hand must not send a
lookup out of range or round a loop for ever: every index must point inside its column, suffix
links must shorten (so walking them reaches the root) and edge chains must run to older edges
(so scanning one ends). The checks are vectorised, a few milliseconds for 300k tokens.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping

import numpy as np

from app.engine.suffix_index import COLUMNS, ROOT, SuffixIndex


def index_from_columns(
    columns: Mapping[str, array[int]], *, tokens: int, documents: int
) -> SuffixIndex:
    """The index whose `columns()` these are (the arrays are taken, not copied); ValueError
    when they are not those of a well-formed automaton."""
    if set(columns) != set(COLUMNS):
        raise ValueError("wrong set of columns")
    index = SuffixIndex()
    for name in COLUMNS:
        if columns[name].typecode != getattr(index, "_" + name).typecode:
            raise ValueError(f"column {name} has the wrong type")
    _check_well_formed(columns)
    for name in COLUMNS:
        setattr(index, "_" + name, columns[name])
    index.tokens, index.documents = tokens, documents
    return index


def _check_well_formed(columns: Mapping[str, array[int]]) -> None:
    lengths = np.frombuffer(columns["len"], np.int32)
    link = np.frombuffer(columns["link"], np.int32)
    n_states, n_edges = lengths.size, len(columns["edge_token"])
    if n_states == 0 or any(len(columns[c]) != n_states for c in COLUMNS[:6]):
        raise ValueError("state columns differ in length")
    if any(len(columns[c]) != n_edges for c in COLUMNS[6:]):
        raise ValueError("edge columns differ in length")
    if lengths[0] != 0 or link[0] != -1:
        raise ValueError("the root is not the first state")
    links = link[1:]
    if links.size and (links.min() < 0 or links.max() >= n_states):
        raise ValueError("a suffix link points outside the index")
    if np.any(lengths[links] >= lengths[1:]):
        raise ValueError("a suffix link does not shorten")
    head = np.frombuffer(columns["head"], np.int32)
    if head.min() < -1 or head.max() >= n_edges:
        raise ValueError("a state's first edge is outside the index")
    if n_edges:
        target = np.frombuffer(columns["edge_target"], np.int32)
        following = np.frombuffer(columns["edge_next"], np.int32)
        if target.min() <= ROOT or target.max() >= n_states:
            raise ValueError("an edge leads outside the index")
        if following.min() < -1 or np.any(following >= np.arange(n_edges)):
            raise ValueError("an edge chain does not end")
