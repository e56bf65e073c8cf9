"""`specchat bench --trees`: which suffix-index columns it makes, and its one-line usage error."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from app.bench.plan import DraftChoice
from app.cli.bench_drafts import tree_modes, with_tree_modes


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
