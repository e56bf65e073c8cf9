"""Token trees: a draft of several candidate continuations, verified by the target in one pass.

Where the suffix index has seen more than one continuation, a tree proposes the most frequent
one (the main branch, what a linear draft would have been) and a few others beside it
(SuffixDecoding, Oliaro et al., 2024, scores candidate trees by observed frequency the same way).

The acceptance rule. Tree drafts are certain (q is a point mass at each node), so the target
checks them with the one draw plain decoding makes, as it checks certain linear drafts
(app/engine/acceptance.py): at the history's end draw the target's token from p (greedy: its
argmax), exactly as plain decoding would; if it equals one of the node's children, emit it and
descend; otherwise emit it and stop. Every emitted token is the plain draw at its position, one
draw each, so the reply has the target's distribution exactly (greedy: the plain reply).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from app.engine.config import GenerationConfig, SamplingConfig
from app.engine.drafters import Draft
from app.engine.sampling import distribution, greedy_token, sample
from app.llama.handle import ModelHandle
from app.llama.model import MAX_BRANCHES, LlamaModel
from app.llama.tree_feed import Rows, branch_sets, depths, feed_tree


@dataclass(frozen=True, slots=True)
class TokenTree:
    """Nodes in an order where each parent comes before its children; parent -1 is the
    history's last token. Nodes 0..main-1 are the main branch, each the child of the one
    before."""

    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    main: int

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.parents) or not 0 < self.main <= len(self.tokens):
            raise ValueError("a tree needs a parent per node and a main branch of 1..nodes")
        if list(self.parents[: self.main]) != list(range(-1, self.main - 1)):
            raise ValueError("the main branch must be the first nodes, in order")
        depths(self.parents)  # checks that parents come first
        if len(branch_sets(self.parents)[0]) > MAX_BRANCHES:
            raise ValueError(f"a tree may have at most {MAX_BRANCHES} branches")

    @property
    def nodes(self) -> int:
        return len(self.tokens)

    def children(self, node: int) -> list[int]:
        """The children of `node`, in order (-1: the history's end)."""
        return [i for i, parent in enumerate(self.parents) if parent == node]

    def branches(self) -> list[list[int]]:
        """Each root-to-leaf path, as node ids."""
        leaves = [i for i in range(self.nodes) if not self.children(i)]
        out = []
        for leaf in leaves:
            path, node = [], leaf
            while node >= 0:
                path.append(node)
                node = self.parents[node]
            out.append(path[::-1])
        return out


@dataclass(frozen=True, slots=True)
class TreeDraft(Draft):
    """A Draft whose `tokens` are the tree's main branch, with the whole tree beside them."""

    tree: TokenTree | None = None


@dataclass(frozen=True, slots=True)
class TreeVerdict:
    emitted: list[int]
    path: list[int]  # accepted nodes, from the history's child down
    seconds: float = 0.0  # the target pass, cache restore included, without the rule
    bonus: int = 0  # accepted tokens beyond what the main branch alone would have kept
    nodes: int = 0

    @property
    def accepted(self) -> int:
        return len(self.path)


def choose_path(
    tree: TokenTree,
    rows: Rows,
    history: Sequence[int],
    sampling: SamplingConfig,
    *,
    rng: np.random.Generator,
    is_eog: Callable[[int], bool],
) -> tuple[list[int], list[int]]:
    """The acceptance rule above: (accepted nodes, emitted tokens)."""
    seen = list(history)
    path: list[int] = []
    emitted: list[int] = []
    node, row = -1, rows[0]
    while True:
        if sampling.greedy:
            token = greedy_token(row, seen, sampling)
        else:
            token = sample(distribution(row, seen, sampling), rng)
        emitted.append(token)
        child = next((c for c in tree.children(node) if tree.tokens[c] == token), None)
        if child is None:
            return path, emitted
        path.append(child)
        if is_eog(token):
            return path, emitted
        seen.append(token)
        node, row = child, rows[1 + child]


def tree_round(
    target: ModelHandle,
    history: Sequence[int],
    draft: Draft,
    config: GenerationConfig,
    rng: np.random.Generator,
    *,
    clock: Callable[[], float],
    grammar: object | None = None,
) -> TreeVerdict | None:
    """The verification of a tree draft; None for a linear one, which the loop verifies, and
    under a grammar, whose masks the loop applies token by token to the main branch, or when
    the reply asks for log probabilities, which the loop reads from the main branch's rows.
    None in exact mode too: a tree pass computes the nodes off its main branch a little apart
    from the linear passes of plain decoding, their rows and the cache cells a path through
    them keeps, which a near-tie or a seeded draw turns into another reply."""
    if (
        not isinstance(draft, TreeDraft)
        or grammar is not None
        or config.logprobs is not None
        or config.exact
    ):
        return None
    return verify_tree(target, history, draft, config.sampling, rng=rng, clock=clock)


def verify_tree(
    target: ModelHandle,
    history: Sequence[int],
    draft: TreeDraft,
    sampling: SamplingConfig,
    *,
    rng: np.random.Generator,
    clock: Callable[[], float] = time.perf_counter,
) -> TreeVerdict:
    """One tree round's verification: the target reads the tree, the rule picks the path, and
    the target's cache is left holding history + the path, as a linear round leaves it."""
    tree = draft.tree
    if tree is None or any(q is not None for q in draft.probs):
        raise ValueError("a tree draft is certain: every q is a point mass")
    start = clock()
    rule_s = 0.0  # kept out of the pass's time, as a linear round keeps its rule out of verify_s

    def choose(rows: Rows) -> tuple[list[int], list[int]]:
        nonlocal rule_s
        t_rule = clock()
        chosen = choose_path(tree, rows, history, sampling, rng=rng, is_eog=target.is_eog)
        rule_s = clock() - t_rule
        return chosen

    if isinstance(target, LlamaModel):
        path, emitted = feed_tree(target, history, tree.tokens, tree.parents, choose)
    else:
        path, emitted = _feed_branches(target, history, tree, choose)
    on_main = sum(1 for node in path if node < tree.main)
    seconds = clock() - start - rule_s
    return TreeVerdict(emitted, list(path), seconds, len(path) - on_main, tree.nodes)


def _feed_branches(
    target: ModelHandle,
    history: Sequence[int],
    tree: TokenTree,
    choose: Callable[[Rows], tuple[list[int], list[int]]],
) -> tuple[list[int], list[int]]:
    """The same rows from one linear pass per branch: a node's row depends only on the history
    and its ancestors. For handles without sequence ids (test doubles); slower, never used on
    a LlamaModel."""
    rows = np.empty((tree.nodes + 1, target.n_vocab), dtype=np.float32)
    for branch in tree.branches():
        tokens = [tree.tokens[node] for node in branch]
        got = target.feed([*history, *tokens], len(tokens) + 1)
        rows[0] = got[0]
        for j, node in enumerate(branch):
            rows[1 + node] = got[1 + j]
    path, emitted = choose(rows)
    target.feed([*history, *(tree.tokens[node] for node in path)], 0)
    return path, emitted
