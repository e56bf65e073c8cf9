"""PromptCache's bookkeeping: which saved state serves a history, and the byte budget."""

from __future__ import annotations

import ctypes

from app.llama.prompt_cache import PromptCache


def _state(size: int) -> ctypes.Array[ctypes.c_uint8]:
    return (ctypes.c_uint8 * size)()


def test_the_entry_holding_most_of_the_history_is_found() -> None:
    cache = PromptCache(1000)
    cache.add([1, 2, 3, 4], _state(10))
    cache.add([1, 2, 3, 9, 9, 9], _state(10))
    cache.add([7, 8], _state(10))
    found = cache.find([1, 2, 3, 9, 9, 5], beyond=2)
    assert found is not None
    entry, held = found
    assert (entry.tokens, held) == ((1, 2, 3, 9, 9, 9), 5)


def test_nothing_is_found_unless_it_holds_more_than_beyond() -> None:
    cache = PromptCache(1000)
    cache.add([1, 2, 3, 4], _state(10))
    assert cache.find([1, 2, 3, 4, 5], beyond=4) is None
    assert cache.find([1, 2], beyond=2) is None
    found = cache.find([1, 2, 3, 4, 5], beyond=3)
    assert found is not None and found[1] == 4


def test_a_whole_history_held_ends_the_search() -> None:
    cache = PromptCache(1000)
    cache.add([1, 2, 3, 4, 5], _state(10))
    cache.add([1, 2, 3, 4, 6], _state(10))
    found = cache.find([1, 2, 3], beyond=0)
    assert found is not None and found[1] == 3


def test_an_entry_the_new_one_extends_is_dropped_and_its_bytes_freed() -> None:
    cache = PromptCache(1000)
    cache.add([1, 2, 3], _state(30))
    cache.add([1, 2, 3, 4, 5], _state(50))
    assert len(cache) == 1
    assert cache.bytes_used == 50


def test_an_entry_that_another_already_extends_is_not_kept() -> None:
    cache = PromptCache(1000)
    cache.add([1, 2, 3, 4, 5], _state(50))
    cache.add([1, 2, 3], _state(30))
    assert len(cache) == 1
    assert cache.bytes_used == 50


def test_the_least_recently_used_entry_goes_first_when_over_budget() -> None:
    cache = PromptCache(100)
    cache.add([1, 1], _state(40))
    cache.add([2, 2], _state(40))
    assert cache.find([1, 1, 0], beyond=0) is not None  # [1, 1] is now the newest used
    cache.add([3, 3], _state(40))
    assert cache.bytes_used == 80
    assert cache.find([2, 2, 0], beyond=0) is None
    assert cache.find([1, 1, 0], beyond=0) is not None
    assert cache.find([3, 3, 0], beyond=0) is not None


def test_a_state_larger_than_the_budget_is_not_kept() -> None:
    cache = PromptCache(100)
    cache.add([1, 1], _state(40))
    cache.add([2, 2], _state(101))
    assert len(cache) == 1
    assert cache.bytes_used == 40


def test_discard_and_clear_free_their_bytes() -> None:
    cache = PromptCache(1000)
    cache.add([1, 1], _state(40))
    cache.add([2, 2], _state(60))
    found = cache.find([1, 1, 5], beyond=0)
    assert found is not None
    cache.discard(found[0])
    assert (len(cache), cache.bytes_used) == (1, 60)
    cache.clear()
    assert (len(cache), cache.bytes_used) == (0, 0)
