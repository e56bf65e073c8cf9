"""A bench prompt file with an empty prompt is refused, as `generate --prompt ""` is: a reply
to nothing measures nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.bench.prompts import prompts_from_file
from app.errors import InvalidSettingError


@pytest.mark.parametrize(
    ("items", "bad"),
    [(["", "  "], 1), (["Name a fruit.", " \n\t"], 2), ([{"text": "  ", "name": "blank"}], 1)],
)
def test_an_empty_prompt_in_a_json_file_is_refused(
    tmp_path: Path, items: list[object], bad: int
) -> None:
    path = tmp_path / "prompts.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    with pytest.raises(InvalidSettingError, match=f"item {bad} is an empty prompt"):
        prompts_from_file(path)
