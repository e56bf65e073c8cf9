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


def test_a_folder_or_a_non_utf8_prompt_file_is_refused_in_plain_words(tmp_path: Path) -> None:
    with pytest.raises(InvalidSettingError) as folder:
        prompts_from_file(tmp_path)
    assert str(folder.value) == f"prompt file {tmp_path} is a folder; name a file"
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9")
    with pytest.raises(InvalidSettingError) as binary:
        prompts_from_file(latin)
    assert str(binary.value) == f"prompt file {latin} is not UTF-8 text (byte 3)"


def test_a_prompt_file_with_no_end_is_refused_unread() -> None:
    with pytest.raises(InvalidSettingError) as endless:
        prompts_from_file(Path("/dev/zero"))
    assert str(endless.value) == "prompt file /dev/zero is larger than 16 MiB"
