"""Growing a token tree from the suffix index around its linear proposal.

The main branch is the linear proposal (the most frequent continuation, followed greedily). Where
the index saw other tokens follow the same context, those go beside it, best first by their
chance of being the path the target takes: the chance that the main branch survives to that
depth (the learnt keep rate per token) times how often the alternative followed there
(SuffixDecoding, Oliaro et al., 2024, scores its candidate trees by such observed frequencies).
An alternative grows along its own most frequent continuation while that still scores. A node
is added only when its chance reaches `min_gain`: below it, the row it costs the verify pass is
worth less than its expected token (the drafter's own draft-length threshold,
app/engine/suffix_drafter.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from app.engine.suffix_index import ROOT, Match, SuffixIndex
from app.engine.token_tree import TokenTree
from app.llama.model import MAX_BRANCHES

# Other tokens considered after each context: the third most frequent continuation is already
# rarely the target's choice, and each one costs a row.
TREE_WIDTH = 3
# Nodes beside the main branch at most: a CPU's verify pass grows by about a sixth of a step per
# row (app/engine/gamma_estimates.py's VerifyCurve), so a few rows are all a tree can repay.
MAX_EXTRA_NODES = 6


def grow_tree(
    index: SuffixIndex,
    match: Match,
    main: Sequence[int],
    keep_rate: float,
    *,
    max_nodes: int,
    min_gain: float,
) -> TokenTree | None:
    """The main branch `main` with alternatives beside it; None when none scores."""
    if not main:
        return None
    state = index.start_state(match)
    # (-chance, order, parent node, token, state reached, depth)
    heap: list[tuple[float, int, int, int, int, int]] = []
    reach = 1.0
    for depth, token in enumerate(main):
        if state == ROOT:
            break
        kids, support = index.children(state, TREE_WIDTH + 1)
        reached = ROOT
        for kid, count, nxt in kids:
            if kid == token:
                reached = nxt
            elif support > 0:
                chance = reach * count / support
                heapq.heappush(heap, (-chance, len(heap), depth - 1, kid, nxt, depth + 1))
        state, reach = reached, reach * keep_rate
    tokens, parents = list(main), list(range(-1, len(main) - 1))
    leaves, budget = 1, min(max_nodes, len(main) + MAX_EXTRA_NODES)
    order = len(heap)
    while heap and len(tokens) < budget:
        negative, _, parent, token, nxt, depth = heapq.heappop(heap)
        chance = -negative
        if chance < min_gain:
            break
        if parent < len(main) - 1:  # beside a main node: a new branch
            if leaves >= MAX_BRANCHES:
                continue
            leaves += 1
        tokens.append(token)
        parents.append(parent)
        node = len(tokens) - 1
        if depth < len(main) and nxt != ROOT:
            kids, support = index.children(nxt, 1)
            if kids and support > 0:
                kid, count, after = kids[0]
                order += 1
                heapq.heappush(
                    heap, (-chance * count / support, order, node, kid, after, depth + 1)
                )
    if len(tokens) == len(main):
        return None
    return TokenTree(tuple(tokens), tuple(parents), len(main))
