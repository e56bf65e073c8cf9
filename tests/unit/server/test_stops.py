"""Stop strings never leak into the reply, even when split across tokens, and a reply they cut
is counted as llama-server counts it."""

from __future__ import annotations

import pytest

from app.engine.events import TokenEvent
from app.engine.logprobs import TokenChoice, TokenLogprob
from app.engine.result import GenerationResult
from app.metrics.rounds import RoundRecord
from app.metrics.summary import summarize
from app.server.stops import ReplyCut, StopMatcher


def run(stops: list[str], pieces: list[str]) -> tuple[list[str], bool]:
    matcher = StopMatcher(stops)
    out = [matcher.push(p) for p in pieces]
    out.append(matcher.flush())
    return out, matcher.hit


def test_without_stops_text_passes_straight_through() -> None:
    assert run([], ["a", "b"]) == (["a", "b", ""], False)


def test_a_stop_split_across_pieces_is_held_back_then_dropped() -> None:
    out, hit = run(["END"], ["hello E", "N", "D and more"])
    assert "".join(out) == "hello "
    assert out[0] == "hello "  # "E" waited for the next piece
    assert hit


def test_a_false_start_is_released_when_the_next_piece_rules_it_out() -> None:
    out, hit = run(["END"], ["say E", "NOUGH"])
    assert out == ["say ", "ENOUGH", ""]
    assert not hit


def test_the_earliest_of_several_stops_wins() -> None:
    out, hit = run(["world", "lo"], ["hello world"])
    assert "".join(out) == "hel"
    assert hit


def test_held_text_is_flushed_when_the_reply_ends() -> None:
    out, hit = run(["###"], ["a #", "#"])
    assert out == ["a ", "", "##"]
    assert not hit


def test_nothing_follows_a_hit() -> None:
    matcher = StopMatcher(["x"])
    assert matcher.push("abxcd") == "ab"
    assert matcher.push("more") == ""
    assert matcher.flush() == ""


def token_events(*pieces: str) -> list[TokenEvent]:
    return [
        TokenEvent(i, p, False, i, logprob=TokenLogprob(TokenChoice(i, -1.0, p.encode()), ()))
        for i, p in enumerate(pieces)
    ]


def cut_reply(stops: list[str], pieces: list[str]) -> tuple[ReplyCut, str, list[str]]:
    """The cut, the text it returned, and the tokens whose log probabilities it returned."""
    cut = ReplyCut(stops)
    out = [cut.push(event) for event in token_events(*pieces)]
    out.append(cut.flush())
    logprobs = [entry.chosen.piece.decode() for piece in out for entry in piece.logprobs]
    return cut, "".join(piece.text for piece in out), logprobs


def test_a_reply_is_counted_through_the_token_that_completed_the_stop() -> None:
    cut, text, logprobs = cut_reply([" six"], [" five", ",", " s", "ix", ",", " seven"])
    assert text == " five,"
    assert cut.tokens == 4  # " s" and "ix" spell the stop string: llama-server counts them
    assert logprobs == [" five", ","]


def test_a_token_the_cut_splits_keeps_its_log_probability() -> None:
    cut, text, logprobs = cut_reply(["ve, s"], [" five", ",", " six"])
    assert text == " fi"
    assert cut.tokens == 3
    assert logprobs == [" five"]  # its text begins in the returned text


def test_without_a_stop_every_token_and_log_probability_is_kept() -> None:
    cut, text, logprobs = cut_reply(["###"], ["a", " #", "#", ""])
    assert (text, cut.tokens, cut.hit) == ("a ##", 4, False)
    assert logprobs == ["a", " #", "#", ""]


def test_the_trimmed_result_ends_at_the_stop_and_reads_its_rate_over_those_tokens() -> None:
    cut, _text, _logprobs = cut_reply([" six"], [" five", ",", " s", "ix", ",", " seven"])
    rounds = [RoundRecord(0, "draft", 5, 5, 5, 6, 0.0, 0.1, 1)]
    stats = summarize(
        rounds, prompt_tokens=3, generated_tokens=6,
        prompt_s=0.1, generation_s=0.3, ttft_s=0.1, plain_step_s=None,
    )  # fmt: skip
    result = GenerationResult(" five, six, seven", list(range(6)), "cancelled", "draft",
                              stats, tuple(rounds), (True,) * 6)  # fmt: skip
    trimmed = cut.trimmed(result)
    assert trimmed.text == " five,"
    assert trimmed.token_ids == [0, 1, 2, 3]
    assert trimmed.draft_token_mask == (True,) * 4
    assert trimmed.finish_reason == "stop"
    assert trimmed.stats.generated_tokens == 4
    assert trimmed.stats.tokens_per_second == pytest.approx(3 / 0.3)
    # What the rounds did stays as they did it.
    assert trimmed.stats.accepted == 5 and trimmed.rounds == result.rounds
