"""Token-tree drafts in the exactness harness: the real engine verifying the suffix index's trees
reproduces plain sampling exactly, and a plausible bug in the tree rule is caught.

Same method and false-alarm budget as test_exactness_harness.py (Pearson's chi-square on runs of
three positions, Bonferroni over this file's windows, ALPHA_FAMILY = 1e-3). The target is a fake
without sequence ids, so trees verify through one linear pass per branch
(app/engine/token_tree.py); the rule under test is the same one a LlamaModel's one-pass tree
verification feeds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import pytest

from app.engine import token_tree
from app.engine.config import SamplingConfig
from app.engine.sampling import distribution, sample
from app.engine.token_tree import TokenTree
from tests.helpers.exact_engine import Case, describe, exact_replies, fits, run_engine
from tests.helpers.plain_oracle import windows

ALPHA_FAMILY = 1e-3

CASES = [
    Case("tree-g4", "tree", 4, SamplingConfig(temperature=0.7, repeat_penalty=1.1), 6),
    Case("tree-g6-full", "tree", 6, SamplingConfig(temperature=0.9), 7),
    Case("tree-auto", "tree", 4, SamplingConfig(temperature=0.6, top_k=4), 8, adaptive=True),
]
CASE = {case.name: case for case in CASES}
ALPHA = ALPHA_FAMILY / sum(len(windows(case.length)) for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_tree_drafts_sample_exactly_like_plain_decoding(case: Case) -> None:
    runs = run_engine(case)
    found = fits(case, runs)
    assert all(f.p_value >= ALPHA for _, f in found), describe(found)
    # Trees ran, and some kept a token only an alternative branch held.
    trees = [r for r in runs.rounds if r.tree_nodes]
    assert trees
    assert any(r.tree_bonus > 0 for r in trees)
    assert any(r.accepted < r.drafted for r in trees)


@pytest.mark.parametrize("gamma", range(1, 7))
def test_greedy_tree_drafts_give_the_plain_greedy_reply(gamma: int) -> None:
    sampling = SamplingConfig(temperature=0.0, repeat_penalty=1.3, repeat_last_n=6)
    case = Case(f"greedy-target-tree-g{gamma}", "tree", gamma, sampling, 12, runs=3)
    (plain,) = exact_replies(case)
    runs = run_engine(case)
    assert runs.replies == [plain] * case.runs
    assert any(r.accepted for r in runs.rounds)


@pytest.mark.parametrize("case_name", ["tree-g4", "tree-auto"])
def test_a_seeded_reply_with_tree_drafts_is_the_plain_seeded_reply(case_name: str) -> None:
    """Tree tokens are certain: each emitted token is the one draw plain sampling makes at its
    position, so for a seed the reply is plain decoding's, token for token."""
    case = replace(CASE[case_name], runs=40)
    spec = run_engine(case)
    plain = run_engine(replace(case, drafter="none"))
    assert spec.replies == plain.replies
    assert any(r.tree_bonus for r in spec.rounds)


ChoosePath = Callable[..., tuple[list[int], list[int]]]


def descend_into_top_two(
    tree: TokenTree,
    rows: np.ndarray,
    history: Sequence[int],
    sampling: SamplingConfig,
    *,
    rng: np.random.Generator,
    is_eog: Callable[[int], bool],
) -> tuple[list[int], list[int]]:
    """A child among p's two most likely tokens is kept without a draw: plausible (the target
    'likes' it), but it over-weights the tree's tokens against p."""
    seen, path, emitted = list(history), [], []
    node, row = -1, rows[0]
    while True:
        p = distribution(row, seen, sampling)
        top_two = {int(t) for t in np.argsort(p)[-2:] if p[t] > 0}
        children = tree.children(node)
        liked = [c for c in children if tree.tokens[c] in top_two]
        token = tree.tokens[liked[0]] if liked else sample(p, rng)
        emitted.append(token)
        child = next((c for c in children if tree.tokens[c] == token), None)
        if child is None:
            return path, emitted
        path.append(child)
        if is_eog(token):
            return path, emitted
        seen.append(token)
        node, row = child, rows[1 + child]


@pytest.mark.parametrize("case_name", ["tree-g4", "tree-g6-full"])
def test_the_harness_rejects_a_tree_rule_that_keeps_a_likely_child_without_a_draw(
    case_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASE[case_name]
    monkeypatch.setattr(token_tree, "choose_path", descend_into_top_two)
    found = fits(case, run_engine(case))
    assert min(f.p_value for _, f in found) < ALPHA, f"mutant passed: {describe(found)}"
