"""`specchat generate`'s summary line names what drafted the tokens the target kept, in the
window's words: the draft model, the chat history, or both for the hybrid."""

from __future__ import annotations

import pytest

from app.cli.main import format_stats_line
from app.engine.result import GenerationResult
from app.metrics.rounds import DraftMode, RoundRecord
from app.metrics.summary import summarize


def _result(mode: DraftMode, rounds: list[RoundRecord]) -> GenerationResult:
    emitted = sum(r.emitted for r in rounds)
    stats = summarize(
        rounds,
        prompt_tokens=20,
        generated_tokens=emitted,
        prompt_s=0.1,
        generation_s=0.5,
        ttft_s=0.1,
        plain_step_s=0.02,
    )
    return GenerationResult("", [0] * emitted, "length", mode, stats, tuple(rounds), ())


def _round(index: int, drafted: int, accepted: int, suffix_drafted: int) -> RoundRecord:
    mode: DraftMode = "hybrid" if suffix_drafted else "draft"
    return RoundRecord(
        index,
        mode,
        drafted,
        drafted,
        accepted,
        accepted + 1,
        0.02,
        0.04,
        drafted - suffix_drafted,
        suffix_drafted=suffix_drafted,
    )


def test_the_hybrids_line_counts_each_source() -> None:
    # The index's tokens come first in a round: 3 of its 3, then 2 of the model's 3.
    rounds = [_round(0, 6, 5, 3), _round(1, 4, 4, 0)]
    line = format_stats_line(_result("hybrid", rounds))
    assert "acceptance 90.0% (9/10) · accepted 6 draft model + 3 chat history" in line


@pytest.mark.parametrize(
    ("mode", "suffix_drafted", "words"),
    [("draft", 0, "accepted 3 draft model"), ("suffix", 4, "accepted 3 chat history")],
)
def test_a_single_sources_line_names_only_it(
    mode: DraftMode, suffix_drafted: int, words: str
) -> None:
    line = format_stats_line(_result(mode, [_round(0, 4, 3, suffix_drafted)]))
    assert words in line and "+" not in line


def test_a_plain_reply_has_no_source_counts() -> None:
    rounds = [RoundRecord(i, "plain", 0, 0, 0, 1, 0.0, 0.02, 0) for i in range(4)]
    line = format_stats_line(_result("plain", rounds))
    assert "accepted" not in line and "acceptance" not in line
