"""Verifying a token tree in one llama.cpp decode, then leaving the cache as a linear feed would.

The tree's nodes follow the history; each node's parent is an earlier node or the history's last
token. Every root-to-leaf branch is one llama.cpp sequence: a node carries the sequence ids of
all the branches through it, and its position is the history's length plus its depth minus one.
llama.cpp masks a query to the cells of its own (first) sequence at positions up to its own, so
each node attends to the history and its ancestors only: tree attention out of sequence ids, as
llama.cpp's lookahead and parallel examples use them. Before the decode the history's cells are
shared with every branch (`llama_memory_seq_cp`, which only tags cells); afterwards
`llama_memory_seq_keep` on the chosen branch, `llama_memory_seq_rm` of its refused tail and a
copy back to sequence 0 leave exactly the history and the accepted path, on sequence 0, at
consecutive positions: what `LlamaModel.feed(history + path, ...)` would have left.

This is LlamaModel's second primitive beside `feed`, in a module of its own; it works on the
model's context, cache and token list directly, as `feed` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from app.errors import ContextOverflowError, KvCacheFullError
from app.llama.backend import check_decoding_thread
from app.llama.handle import common_prefix
from app.llama.model import LlamaModel

Rows = npt.NDArray[np.float32]
T = TypeVar("T")


def branch_sets(parents: Sequence[int]) -> list[list[int]]:
    """For each node, the ids of the branches (leaves, numbered in order) through it."""
    n = len(parents)
    has_child = [False] * n
    for parent in parents:
        if parent >= 0:
            has_child[parent] = True
    sets: list[list[int]] = [[] for _ in range(n)]
    branch = 0
    for leaf in range(n):
        if has_child[leaf]:
            continue
        node = leaf
        while node >= 0:
            sets[node].append(branch)
            node = parents[node]
        branch += 1
    return sets


def depths(parents: Sequence[int]) -> list[int]:
    """1 for the history's children, and one more per generation."""
    out: list[int] = []
    for i, parent in enumerate(parents):
        if not -1 <= parent < i:
            raise ValueError("each node's parent must be -1 or an earlier node")
        out.append(1 if parent < 0 else out[parent] + 1)
    return out


def feed_tree(
    model: LlamaModel,
    history: Sequence[int],
    tokens: Sequence[int],
    parents: Sequence[int],
    choose: Callable[[Rows], tuple[Sequence[int], T]],
) -> tuple[Sequence[int], T]:
    """Verify a tree of `tokens` after `history` in one decode and keep the path `choose` picks.

    `choose` gets the logits rows, shape (1 + len(tokens), n_vocab): row 0 predicts the token
    after the history, row 1 + i the one after node i. It returns the accepted path (node ids,
    each the previous one's child, the first a child of the history) and a result; both are
    returned. Afterwards the cache holds exactly history + the path's tokens, as `feed` of
    that would leave it; on any error, the history's common prefix with what it held before.
    """
    n_nodes = len(tokens)
    if len(parents) != n_nodes or n_nodes == 0:
        raise ValueError("a tree needs at least one node and a parent per node")
    depth = depths(parents)
    sets = branch_sets(parents)
    n_branches = max(branch for nodes in sets for branch in nodes) + 1
    lib, memory = model._lib, model._memory
    n_seq_max = int(lib.llama_n_seq_max(model._ctx))
    if n_branches > n_seq_max:
        raise ValueError(f"this context verifies trees of at most {n_seq_max} branches")
    n_hist = len(history)
    if n_hist == 0:
        raise ValueError("a tree follows a history of at least one token")
    if n_hist + max(depth) > model.n_ctx:
        raise ContextOverflowError(n_hist + max(depth), model.n_ctx)
    keep = min(common_prefix(model.tokens, history), n_hist - 1)
    model.truncate(keep)
    keep = min(keep, len(model.tokens))  # a cache that cannot drop a suffix starts over
    if n_hist - keep + n_nodes > model.n_batch:
        # Only the last history token must share the tree's batch (its row is needed).
        model.feed(history[:-1], 0)
        keep = len(model.tokens)
    pending = history[keep:]
    model._fit_threads()
    for seq in range(1, n_branches):
        lib.llama_memory_seq_cp(memory, 0, seq, -1, -1)
    try:
        rows = _decode_tree(model, pending, keep, tokens=tokens, depth=depth, sets=sets)
        chosen = choose(rows)
        path = chosen[0]
        _keep_path(model, history, path, tokens=tokens, parents=parents, sets=sets)
    except BaseException:
        for seq in range(1, n_branches):
            lib.llama_memory_seq_rm(memory, seq, -1, -1)
        model._forget_from(keep)
        raise
    return chosen


def _decode_tree(
    model: LlamaModel,
    pending: Sequence[int],
    start: int,
    *,
    tokens: Sequence[int],
    depth: Sequence[int],
    sets: Sequence[Sequence[int]],
) -> Rows:
    lib = model._lib
    n_branches = max(branch for nodes in sets for branch in nodes) + 1
    n_pending, n_nodes = len(pending), len(tokens)
    n = n_pending + n_nodes
    batch = lib.llama_batch_init(n, 0, n_branches)
    try:
        every = list(range(n_branches))
        seqs: Sequence[int]
        for i in range(n):
            if i < n_pending:
                token, pos, seqs = pending[i], start + i, every
            else:
                node = i - n_pending
                token, pos, seqs = tokens[node], start + n_pending + depth[node] - 1, sets[node]
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = len(seqs)
            for k, seq in enumerate(seqs):
                batch.seq_id[i][k] = seq
            batch.logits[i] = 1 if i >= n_pending - 1 else 0
        batch.n_tokens = n
        check_decoding_thread()
        rc = lib.llama_decode(model._ctx, batch)
    finally:
        lib.llama_batch_free(batch)
    if rc != 0:
        if rc == 1:
            raise KvCacheFullError(start, n, model.n_ctx)
        raise RuntimeError(f"llama_decode failed with code {rc}")
    n_rows = n_nodes + 1
    ptr = lib.llama_get_logits(model._ctx)
    out = np.ctypeslib.as_array(ptr, shape=(n_rows * model.n_vocab,))
    return out.reshape(n_rows, model.n_vocab).copy()


def _keep_path(
    model: LlamaModel,
    history: Sequence[int],
    path: Sequence[int],
    *,
    tokens: Sequence[int],
    parents: Sequence[int],
    sets: Sequence[Sequence[int]],
) -> None:
    parent = -1
    for node in path:
        if parents[node] != parent:
            raise ValueError("a path must run from the history down the tree")
        parent = node
    lib, memory = model._lib, model._memory
    # A branch through the path's last node holds the history and the path, and only more of
    # itself: keep it alone, cut its tail, and give its cells back to sequence 0.
    seq = sets[path[-1]][0] if path else 0
    end = len(history) + len(path)
    lib.llama_memory_seq_keep(memory, seq)
    lib.llama_memory_seq_rm(memory, seq, end, -1)
    if seq != 0:
        lib.llama_memory_seq_cp(memory, seq, 0, -1, -1)
        lib.llama_memory_seq_rm(memory, seq, -1, -1)
    model.tokens[:] = [*history, *(tokens[node] for node in path)]
