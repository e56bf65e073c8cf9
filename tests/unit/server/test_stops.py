"""Stop strings never leak into the reply, even when split across tokens."""

from __future__ import annotations

from app.server.stops import StopMatcher


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
