"""`select_file`: an exact path wins over a same-named file elsewhere in the repository."""

from __future__ import annotations

import pytest

from app.errors import DownloadError
from models.hub.listing import RemoteFile, select_file

ROOT = RemoteFile("model.gguf", 10, None)
NESTED = RemoteFile("Q2/model.gguf", 5, None)
UPPER = RemoteFile("Model.gguf", 7, None)


@pytest.mark.parametrize("pattern", ["model.gguf", "/model.gguf"])
def test_the_root_file_is_chosen_over_a_subfolder_file_of_the_same_name(pattern: str) -> None:
    assert select_file([ROOT, NESTED], pattern) == ROOT


def test_the_subfolder_file_is_chosen_by_its_path() -> None:
    assert select_file([ROOT, NESTED], "Q2/model.gguf") == NESTED


def test_case_as_spelled_wins_over_another_case() -> None:
    assert select_file([ROOT, UPPER], "model.gguf") == ROOT
    assert select_file([ROOT, UPPER], "Model.gguf") == UPPER


def test_a_name_in_two_subfolders_is_still_ambiguous() -> None:
    files = [NESTED, RemoteFile("Q4/model.gguf", 6, None)]
    with pytest.raises(DownloadError, match="matches 2 GGUF files"):
        select_file(files, "model.gguf")
