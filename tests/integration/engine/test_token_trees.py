"""Token trees on the real demo target: one llama.cpp decode verifies a whole tree through sequence
ids, its rows are the rows of each branch fed alone, the cache afterwards is what a linear feed
of the accepted tokens leaves, and greedy replies drafted with trees are the plain replies."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig, SamplingConfig
from app.engine.drafters import Draft, Drafter, DraftRequest
from app.engine.gamma import AUTO, fixed
from app.engine.loop import SpeculativeEngine
from app.engine.runtime import Runtime
from app.engine.suffix_drafter import SuffixDrafter
from app.engine.token_tree import TreeDraft
from app.llama.config import ModelConfig
from app.llama.model import MAX_BRANCHES, LlamaModel
from app.llama.tree_feed import feed_tree
from tests.helpers.engine import run_to_end
from tests.helpers.exact_engine import ForwardingDrafter

# The cache-reuse tests' tolerance (tests/integration/llama/test_fake_llama.py): rows of the
# same position from passes of other sizes differ by llama.cpp's kernels' rounding only.
ATOL = 0.1
HISTORY = [1, 450, 4996, 338, 263, 3974, 29892, 322, 278, 4996]
# Nodes: 0-1-2 the main branch; 3 beside node 0, with child 4; 5 beside node 1 (shares node 0).
TOKENS = (310, 1722, 322, 338, 263, 1058)
PARENTS = (-1, 0, 1, -1, 3, 0)
BRANCHES = [[0, 1, 2], [0, 5], [3, 4]]


@pytest.fixture(scope="module")
def target(demo_models: Any) -> Iterator[LlamaModel]:
    model = LlamaModel(ModelConfig(str(demo_models.f32), n_ctx=256, n_threads=2))
    try:
        yield model
    finally:
        model.close()


@pytest.fixture(scope="module")
def fresh(demo_models: Any) -> Iterator[LlamaModel]:
    """A second context of the same model: linear feeds to compare with."""
    model = LlamaModel(ModelConfig(str(demo_models.f32), n_ctx=256, n_threads=2))
    try:
        yield model
    finally:
        model.close()


def _linear_rows(model: LlamaModel, tokens: Sequence[int], n: int) -> np.ndarray:
    model.reset()
    return model.feed(list(tokens), n)


def _tree_pass(model: LlamaModel, history: list[int], path: list[int]) -> np.ndarray:
    got: list[np.ndarray] = []

    def choose(rows: np.ndarray) -> tuple[list[int], None]:
        got.append(rows)
        return path, None

    feed_tree(model, history, TOKENS, PARENTS, choose)
    return got[0]


def test_one_decode_gives_each_node_the_row_of_its_branch_fed_alone(
    target: LlamaModel, fresh: LlamaModel
) -> None:
    target.reset()
    target.feed(HISTORY[:-1], 0)  # the loop's invariant: all but the last token cached
    rows = _tree_pass(target, HISTORY, [])
    assert rows.shape == (len(TOKENS) + 1, target.n_vocab)
    for branch in BRANCHES:
        tokens = [TOKENS[node] for node in branch]
        linear = _linear_rows(fresh, [*HISTORY, *tokens], len(tokens) + 1)
        np.testing.assert_allclose(rows[0], linear[0], atol=ATOL)
        for j, node in enumerate(branch):
            np.testing.assert_allclose(rows[1 + node], linear[1 + j], atol=ATOL)
            assert int(np.argmax(rows[1 + node])) == int(np.argmax(linear[1 + j]))


@pytest.mark.parametrize("path", [[], [0], [0, 1, 2], [0, 5], [3, 4]])
def test_after_the_tree_the_cache_is_what_a_linear_feed_of_the_path_leaves(
    target: LlamaModel, fresh: LlamaModel, path: list[int]
) -> None:
    target.reset()
    target.feed(HISTORY[:5], 0)
    _tree_pass(target, HISTORY, path)
    kept = [*HISTORY, *(TOKENS[node] for node in path)]
    assert target.tokens == kept
    # Sequence 0 alone holds positions 0..len-1; every branch's sequence is empty again.
    lib, memory = target._lib, target._memory
    assert lib.llama_memory_seq_pos_max(memory, 0) == len(kept) - 1
    assert lib.llama_memory_seq_pos_min(memory, 0) == 0
    for seq in range(1, MAX_BRANCHES):
        assert lib.llama_memory_seq_pos_max(memory, seq) == -1
    # The next pass reads the cache as it would after a linear feed.
    follow = [*kept, 29889, 13]
    after = target.feed(follow, 3)
    linear = _linear_rows(fresh, follow, 3)
    np.testing.assert_allclose(after, linear, atol=ATOL)
    assert [int(np.argmax(r)) for r in after] == [int(np.argmax(r)) for r in linear]


def test_a_tree_after_a_rolled_back_cache_reads_only_the_history(
    target: LlamaModel, fresh: LlamaModel
) -> None:
    target.reset()
    target.feed([*HISTORY, 5, 6, 7], 0)  # a refused draft still cached past the history
    rows = _tree_pass(target, HISTORY, [0])
    linear = _linear_rows(fresh, [*HISTORY, TOKENS[0], TOKENS[1], TOKENS[2]], 4)
    np.testing.assert_allclose(rows[[0, 1, 2, 3]], linear, atol=ATOL)
    assert target.tokens == [*HISTORY, TOKENS[0]]


def test_an_error_in_the_rule_leaves_the_history_cached_and_the_branches_empty(
    target: LlamaModel,
) -> None:
    target.reset()
    target.feed(HISTORY[:-1], 0)

    def broken(rows: np.ndarray) -> tuple[list[int], None]:
        raise RuntimeError("rule failed")

    with pytest.raises(RuntimeError, match="rule failed"):
        feed_tree(target, HISTORY, TOKENS, PARENTS, broken)
    assert target.tokens == HISTORY[:-1]
    lib, memory = target._lib, target._memory
    assert lib.llama_memory_seq_pos_max(memory, 0) == len(HISTORY) - 2
    for seq in range(1, MAX_BRANCHES):
        assert lib.llama_memory_seq_pos_max(memory, seq) == -1


# Phrases that repeat with variations: the suffix index has more than one continuation after
# "the", "sat on" and "on the", so its proposals branch.
COPY_PROMPT: list[ChatMessage] = [
    {
        "role": "user",
        "content": "Repeat these lines exactly:\nThe cat sat on the mat.\nThe dog sat on the "
        "rug.\nThe cat ran to the door.\nThe dog ran to the mat.\nThe cat sat on the rug.\nThe "
        "dog sat on the mat.",
    }
]


@pytest.mark.parametrize("exact", [False, True])
def test_greedy_replies_drafted_with_trees_are_the_plain_replies(
    f32_runtime: Runtime, exact: bool
) -> None:
    assert f32_runtime.target is not None
    ids = f32_runtime.chat_prompt(COPY_PROMPT)
    # γ is the node ceiling: room for alternatives beside drafts of the usual 4-6 tokens.
    config = GenerationConfig(max_tokens=96, gamma=fixed(12), exact=exact)
    engine = SpeculativeEngine(f32_runtime.target, SuffixDrafter(trees="on"))
    plain, _ = run_to_end(engine, ids, config, speculative=False)
    drafted, _ = run_to_end(engine, ids, config)
    assert drafted.token_ids == plain.token_ids
    trees = [r for r in drafted.rounds if r.tree_nodes]
    if exact:  # verified as their main branches (next test)
        assert not trees
        return
    assert trees  # trees ran, not only linear drafts
    assert all(r.tree_nodes > r.drafted for r in trees)


class _TreesProposed(ForwardingDrafter):
    """Counts the token trees the drafter proposes, whatever the loop does with them."""

    def __init__(self, inner: Drafter) -> None:
        super().__init__(inner)
        self.trees = 0

    def propose(self, ask: DraftRequest) -> Draft:
        draft = self.inner.propose(ask)
        self.trees += isinstance(draft, TreeDraft)
        return draft


# Seeds whose replies, with trees verified as trees, left plain decoding's path on the demo
# target (AMD EPYC, AVX2, 2 threads) at tokens 29, 26, 14 and 45.
TREE_SEEDS = (15, 16, 20, 22)


def test_exact_replies_verify_a_tree_as_its_main_branch_and_keep_the_seeded_plain_reply(
    f32_runtime: Runtime,
) -> None:
    """Exact mode's promise is plain decoding's arithmetic in every pass; a tree pass breaks it.
    Its nodes off the main branch, their rows and the cache cells a path through them keeps,
    differ from a linear pass's in the last bits, and a seeded sampled reply, which draws from
    those rows, then leaves the plain reply's path (as a greedy one can at a near-tie)."""
    target = f32_runtime.target
    assert target is not None
    ids = f32_runtime.chat_prompt(COPY_PROMPT)
    departed, proposed, verified_as_trees = [], 0, 0
    for seed in TREE_SEEDS:
        sampling = SamplingConfig(temperature=1.0, seed=seed)
        config = GenerationConfig(max_tokens=48, gamma=fixed(12), exact=True, sampling=sampling)
        plain, _ = run_to_end(SpeculativeEngine(target), ids, config, speculative=False)
        drafter = _TreesProposed(SuffixDrafter(trees="on"))
        drafted, _ = run_to_end(SpeculativeEngine(target, drafter), ids, config)
        proposed += drafter.trees
        verified_as_trees += sum(1 for r in drafted.rounds if r.tree_nodes)
        if drafted.token_ids != plain.token_ids:
            departed.append(seed)
    assert proposed > 0  # the drafter did propose trees
    assert departed == []
    assert verified_as_trees == 0


def test_gamma_auto_with_trees_keeps_the_plain_reply(f32_runtime: Runtime) -> None:
    assert f32_runtime.target is not None
    ids = f32_runtime.chat_prompt(COPY_PROMPT)
    config = GenerationConfig(max_tokens=96, gamma=AUTO)
    engine = SpeculativeEngine(f32_runtime.target, SuffixDrafter())
    plain, _ = run_to_end(engine, ids, config, speculative=False)
    drafted, _ = run_to_end(engine, ids, config)
    assert drafted.token_ids == plain.token_ids
