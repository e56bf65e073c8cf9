"""Token trees without model weights: the tree type, the acceptance rule, the tree grown from
the suffix index, the row layout a handle without sequence ids falls back to, and the gate that
lets γ auto use trees only where they were measured to pay."""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.config import SamplingConfig
from app.engine.drafters import DraftRequest
from app.engine.suffix_cursor import longest_match
from app.engine.suffix_drafter import SuffixDrafter
from app.engine.suffix_index import SuffixIndex
from app.engine.token_tree import TokenTree, TreeDraft, choose_path, verify_tree
from app.engine.token_tree_policy import TreeGate
from app.engine.token_tree_suffix import grow_tree
from app.llama.tree_feed import branch_sets, depths
from app.metrics.rounds import RoundRecord
from tests.helpers.fake_llama import FakeLlama, toy_logits

GREEDY = SamplingConfig(temperature=0.0)

# history ... → 7 (main) → 8 (main) ; beside 7: 9 → 10
TREE = TokenTree(tokens=(7, 8, 9, 10), parents=(-1, 0, -1, 2), main=2)


def _rows(picks: list[int], n_vocab: int = 12) -> np.ndarray:
    """Rows whose argmax is picks[i]: row 0 after the history, row 1 + i after node i."""
    rows = np.zeros((len(picks), n_vocab), dtype=np.float32)
    for i, token in enumerate(picks):
        rows[i, token] = 5.0
    return rows


def test_a_tree_lists_children_branches_depths_and_branch_sets() -> None:
    assert TREE.children(-1) == [0, 2]
    assert TREE.children(0) == [1]
    assert TREE.branches() == [[0, 1], [2, 3]]
    assert depths(TREE.parents) == [1, 2, 1, 2]
    # Branch 0 runs through nodes 0 and 1, branch 1 through nodes 2 and 3.
    assert branch_sets(TREE.parents) == [[0], [0], [1], [1]]
    shared = (-1, 0, 0)  # one node shared by two branches
    assert branch_sets(shared) == [[0, 1], [0], [1]]


def test_a_tree_refuses_a_parent_after_its_child_or_a_scattered_main_branch() -> None:
    with pytest.raises(ValueError, match="main branch"):
        TokenTree((1, 2), (-1, -1), main=2)
    with pytest.raises(ValueError, match="earlier node"):
        TokenTree((1, 2, 3), (-1, 0, 3), main=2)


def test_the_rule_descends_into_the_child_the_target_draws() -> None:
    # The target picks 9 after the history (an alternative), then 10, then 4 after the leaf.
    rows = _rows([9, 0, 0, 10, 4])
    path, emitted = choose_path(
        TREE, rows, [1, 2], GREEDY, rng=np.random.default_rng(0), is_eog=_no_eog
    )
    assert path == [2, 3]
    assert emitted == [9, 10, 4]


def test_the_rule_stops_at_the_first_draw_no_child_holds() -> None:
    rows = _rows([7, 3, 0, 0, 0])  # 7 is node 0; after it the target wants 3, not 8
    path, emitted = choose_path(
        TREE, rows, [1], GREEDY, rng=np.random.default_rng(0), is_eog=_no_eog
    )
    assert path == [0]
    assert emitted == [7, 3]


def test_the_rule_ends_on_an_accepted_end_token_without_a_bonus() -> None:
    rows = _rows([7, 8, 0, 0, 0])
    rng = np.random.default_rng(0)
    path, emitted = choose_path(TREE, rows, [1], GREEDY, rng=rng, is_eog=lambda token: token == 8)
    assert path == [0, 1]
    assert emitted == [7, 8]


def test_the_rule_makes_one_draw_per_emitted_token_like_plain_sampling() -> None:
    sampling = SamplingConfig(temperature=1.0)
    rows = np.zeros((5, 12), dtype=np.float32)
    tree_rng, plain_rng = np.random.default_rng(3), np.random.default_rng(3)
    _, emitted = choose_path(TREE, rows, [1], sampling, rng=tree_rng, is_eog=_no_eog)
    for _ in emitted:  # plain sampling: one uniform number per token
        plain_rng.random()
    assert tree_rng.random() == plain_rng.random()


def _no_eog(token: int) -> bool:
    return False


def test_a_handle_without_sequence_ids_gets_each_nodes_row_and_keeps_the_path() -> None:
    logits = toy_logits(5, 12, order=2, scale=3.0)
    target = FakeLlama(logits, 12, name="target.gguf")
    history = [1, 2, 3]
    pick = int(np.argmax(logits(history)))
    tree = TokenTree((pick, 4, (pick + 1) % 12), (-1, 0, -1), main=2)
    draft = TreeDraft([pick, 4], [None, None], suffix_tokens=2, tree=tree)
    verdict = verify_tree(target, history, draft, GREEDY, rng=np.random.default_rng(0))
    assert verdict.path[0] == 0
    assert verdict.emitted[0] == pick
    # The cache holds the history and the accepted path, as a linear feed would leave it.
    assert target.tokens == [*history, *(tree.tokens[n] for n in verdict.path)]
    assert verdict.nodes == 3


def _index(*documents: list[int]) -> SuffixIndex:
    index = SuffixIndex()
    for doc in documents:
        index.add_document(doc)
    return index


def test_the_suffix_index_grows_alternatives_where_its_continuations_branch() -> None:
    # After [1, 2] came 3 twice and 5 once: 3 is the main branch, 5 an alternative beside it.
    index = _index([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 5, 6])
    match = longest_match(index, [9, 1, 2])
    tree = grow_tree(index, match, [3, 4], 0.9, max_nodes=8, min_gain=0.2)
    assert tree is not None
    assert tree.tokens[:2] == (3, 4)
    assert 5 in tree.tokens[2:]
    alt = tree.tokens.index(5)
    assert tree.parents[alt] == -1
    # The alternative grows along what followed it (6) while that still scores.
    assert 6 in tree.tokens
    assert tree.nodes <= 8


def test_no_tree_where_the_index_never_branched_or_alternatives_score_too_low() -> None:
    index = _index([1, 2, 3, 4], [1, 2, 3, 4])
    match = longest_match(index, [1, 2])
    assert grow_tree(index, match, [3, 4], 0.9, max_nodes=8, min_gain=0.2) is None
    rare = _index(*([[1, 2, 3, 4]] * 9), [1, 2, 5, 6])
    rare_match = longest_match(rare, [1, 2])
    assert grow_tree(rare, rare_match, [3, 4], 0.9, max_nodes=8, min_gain=0.2) is None


def test_the_tree_stays_within_the_node_ceiling() -> None:
    index = _index([1, 2, 3, 4], [1, 2, 5, 6], [1, 2, 7, 8], [1, 2, 9, 10])
    match = longest_match(index, [1, 2])
    tree = grow_tree(index, match, [3, 4], 0.9, max_nodes=3, min_gain=0.01)
    assert tree is not None and tree.nodes == 3


def _record(
    *, drafted: int, accepted: int, verify_s: float, nodes: int = 0, bonus: int = 0
) -> RoundRecord:
    return RoundRecord(
        index=0,
        mode="suffix",
        gamma=drafted,
        drafted=drafted,
        accepted=accepted,
        emitted=accepted + 1,
        draft_s=0.0,
        verify_s=verify_s,
        draft_steps=0,
        suffix_drafted=drafted,
        tree_nodes=nodes,
        tree_bonus=bonus,
    )


def _gate_after(tree_rounds: list[RoundRecord]) -> TreeGate:
    gate = TreeGate()
    for _ in range(4):
        gate.observe(_record(drafted=3, accepted=1, verify_s=0.030))
    for record in tree_rounds:
        gate.observe(record)
    return gate


def test_the_gate_waits_for_the_linear_price_and_runs_only_under_gamma_auto() -> None:
    gate = TreeGate()
    assert not gate.wanted(under_auto=True)
    gate.observe(_record(drafted=3, accepted=1, verify_s=0.03))
    gate.observe(_record(drafted=3, accepted=1, verify_s=0.03))
    assert gate.wanted(under_auto=True)
    assert not gate.wanted(under_auto=False)
    assert TreeGate("on").wanted(under_auto=False)
    assert not TreeGate("off").wanted(under_auto=True)


def test_the_gate_keeps_trees_whose_bonus_outweighs_their_wider_pass() -> None:
    # Each tree round kept 2 more tokens than its main branch alone, for 10 % more time.
    paying = [_record(drafted=3, accepted=3, verify_s=0.033, nodes=5, bonus=2)] * 12
    gate = _gate_after(paying)
    assert gate.pays()
    assert gate.wanted(under_auto=True)


def test_the_gate_drops_trees_that_cost_more_than_they_bring_and_retries_later() -> None:
    # No bonus, and the wider pass cost 40 % more: trees lose.
    losing = [_record(drafted=3, accepted=1, verify_s=0.042, nodes=6, bonus=0)] * 12
    gate = _gate_after(losing)
    assert not gate.pays()
    assert not gate.wanted(under_auto=True)
    for _ in range(40):
        gate.observe(_record(drafted=3, accepted=1, verify_s=0.030))
    assert gate.wanted(under_auto=True)  # a retry, now and then


def test_the_suffix_drafter_proposes_a_tree_only_when_the_gate_allows() -> None:
    history = [1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 5, 6, 0, 1, 2]
    ask = DraftRequest(history, 6, GREEDY, np.random.default_rng(0), 0.0)
    on = SuffixDrafter(trees="on").propose(ask)
    off = SuffixDrafter(trees="off").propose(ask)
    assert isinstance(on, TreeDraft) and on.tree is not None
    assert on.tokens == off.tokens  # the main branch is the linear proposal
    assert not isinstance(off, TreeDraft)
