"""`specchat bench --draft, --suffix, --trees`: the columns it makes and their labels."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pytest

from app.bench.plan import DraftChoice
from app.cli.bench_drafts import tree_modes, unique_labels, with_suffix_modes, with_tree_modes


def test_tree_modes_parse_in_a_fixed_order_without_repeats() -> None:
    assert tree_modes("off,on,off") == ["on", "off"]
    assert tree_modes("auto") == ["auto"]


def test_an_unknown_tree_mode_is_a_usage_error() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="--trees takes auto, on, off"):
        tree_modes("sometimes")
    with pytest.raises(argparse.ArgumentTypeError):
        tree_modes(",")


def test_the_suffix_index_gets_one_column_per_tree_mode_and_draft_models_none() -> None:
    suffix = DraftChoice("suffix", None)
    model = DraftChoice("demo Q4_1", Path("draft.gguf"))
    out = with_tree_modes([suffix, model], ["on", "off"])
    assert [(c.label, c.trees) for c in out] == [
        ("suffix trees on", "on"),
        ("suffix trees off", "off"),
        ("demo Q4_1", "auto"),
    ]
    (alone,) = with_tree_modes([suffix], ["auto"])
    assert (alone.label, alone.trees) == ("suffix", "auto")


def test_renaming_a_repeated_draft_keeps_every_other_field() -> None:
    first = DraftChoice("suffix", None, suffix=False, trees="on")
    second = DraftChoice("suffix", None, suffix=False, trees="off")
    out = unique_labels([first, second])
    assert out == [first, replace(second, label="suffix#2")]


def test_one_column_per_suffix_mode_keeps_the_draft_s_other_fields() -> None:
    model = DraftChoice("demo Q4_1", Path("draft.gguf"), trees="on")
    out = with_suffix_modes([model], [True, False])
    assert out == [
        replace(model, label="demo Q4_1+suffix", suffix=True),
        replace(model, suffix=False),
    ]
