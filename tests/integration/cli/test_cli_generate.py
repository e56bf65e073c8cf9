"""`specchat generate` end to end in a subprocess: the JSON contract and user errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.errors import A_FOLDER, EMPTY_FILE
from app.metrics.cost_model import MAX_GAMMA


def specchat(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def assert_user_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_generate_json_contract(demo_models: Any) -> None:
    proc = specchat(
        "generate",
        "--target",
        str(demo_models.f32),
        "--draft",
        str(demo_models.q4_1),
        "--gamma",
        "4",
        "--max-tokens",
        "24",
        "--chat",
        "--prompt",
        "Say hello.",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {"text", "token_ids", "finish_reason", "mode", "stats"}
    # A draft model drafts together with the chat's own text unless --suffix off.
    assert out["mode"] == "hybrid"
    assert out["stats"]["gamma_setting"] == "4"
    by_source = out["stats"]["suffix_accepted"] + out["stats"]["model_accepted"]
    assert by_source == out["stats"]["accepted"]
    assert out["finish_reason"] in {"stop", "length"}
    assert len(out["token_ids"]) == out["stats"]["generated_tokens"] > 0
    for name in (
        "drafted",
        "accepted",
        "acceptance_rate",
        "rounds",
        "accepted_per_round",
        "tokens_per_round",
        "per_position_acceptance",
        "tokens_per_second",
        "ttft_s",
        "draft_s",
        "verify_s",
        "c_draft",
        "c_verify",
        "prompt_tokens",
        "generated_tokens",
        "gamma",
    ):
        assert name in out["stats"], name
    # γ is what ran: 4, but the last round may be cut short by the token budget.
    histogram = out["stats"]["gamma_histogram"]
    assert "4" in histogram and set(histogram) <= {"0", "1", "2", "3", "4"}
    assert sum(histogram.values()) == out["stats"]["rounds"]
    assert 3 < out["stats"]["gamma"] <= 4


def test_generate_chats_and_speculates_by_default(demo_models: Any) -> None:
    """With no flags but a target and a prompt: the chat template, the suffix index, γ auto."""
    common = ["--target", str(demo_models.f32), "--max-tokens", "24", "--json", "--exact"]
    prompt = ["--prompt", "Repeat after me: the quick brown fox jumps over the lazy dog."]
    default = json.loads(specchat("generate", *common, *prompt).stdout)
    raw = json.loads(specchat("generate", *common, *prompt, "--raw", "--no-spec").stdout)
    chat = json.loads(specchat("generate", *common, *prompt, "--chat", "--no-spec").stdout)
    assert default["mode"] == "suffix" and default["stats"]["gamma_setting"] == "auto"
    assert default["stats"]["suffix_accepted"] > 0
    assert default["token_ids"] == chat["token_ids"] != raw["token_ids"]
    assert chat["mode"] == raw["mode"] == "plain"
    # Plain decoding asks for no γ: a script must not read speculation into it.
    assert chat["stats"]["gamma_setting"] == raw["stats"]["gamma_setting"] == "off"


def test_plain_and_ngram_modes_agree_in_text(demo_models: Any, tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Repeat after me: the quick brown fox jumps over the lazy dog.", "utf-8")
    common = [
        "--target",
        str(demo_models.f32),
        "--max-tokens",
        "32",
        "--chat",
        "--prompt-file",
        str(prompt),
        "--json",
    ]
    plain = json.loads(specchat("generate", *common, "--no-spec").stdout)
    ngram = json.loads(specchat("generate", *common, "--draft", "ngram").stdout)
    assert plain["mode"] == "plain" and ngram["mode"] == "suffix"
    assert plain["stats"]["acceptance_rate"] is None
    assert plain["token_ids"] == ngram["token_ids"]


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory: pytest.TempPathFactory, demo_models: Any) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bad-models")
    empty = folder / "empty.gguf"
    empty.write_bytes(b"")
    random_bytes = folder / "random.gguf"
    random_bytes.write_bytes(os.urandom(4096))
    truncated = folder / "truncated.gguf"
    truncated.write_bytes(Path(demo_models.q4_1).read_bytes()[: 3 * 1024 * 1024])
    text = folder / "notes.gguf"
    text.write_text("these are not weights\n", "utf-8")
    return {
        "missing": folder / "nope.gguf",
        "directory": folder,
        "empty": empty,
        "random": random_bytes,
        "truncated": truncated,
        "text": text,
    }


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("missing", "no such file"),
        ("directory", A_FOLDER),
        ("empty", "empty"),
        ("random", "not a GGUF"),
        ("truncated", "cannot load model"),
        ("text", "not a GGUF"),
    ],
)
def test_bad_target_files_give_one_error_line(
    bad_files: dict[str, Path], kind: str, expected: str
) -> None:
    proc = specchat("generate", "--target", str(bad_files[kind]), "--prompt", "hi")
    assert_user_error(proc, expected)


def test_a_model_named_by_a_relative_path_loads_and_is_not_refused_later(demo_models: Any) -> None:
    # The load check's child runs in the code's folder: it must be told the file meant here, and
    # nothing it could not find there may be remembered against the file.
    model = Path(demo_models.q4_0)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    flags = ("--no-spec", "--prompt", "hi", "--max-tokens", "2")
    relative = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "generate", "--target", model.name, *flags],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=model.parent,
        env=env,
        check=False,
    )
    assert relative.returncode == 0, relative.stderr
    absolute = specchat("generate", "--target", str(model), *flags)
    assert absolute.returncode == 0, absolute.stderr


def test_bad_draft_file_gives_one_error_line(demo_models: Any, bad_files: dict[str, Path]) -> None:
    proc = specchat(
        "generate",
        "--target",
        str(demo_models.f32),
        "--draft",
        str(bad_files["truncated"]),
        "--prompt",
        "hi",
    )
    assert_user_error(proc, "truncated.gguf")


def test_draft_of_another_vocabulary_is_refused_with_reason(
    demo_models: Any, gemma_model: Path
) -> None:
    proc = specchat(
        "generate",
        "--target",
        str(demo_models.f32),
        "--draft",
        str(gemma_model),
        "--prompt",
        "hi",
    )
    assert_user_error(proc, "not compatible", "vocab")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--gamma", "-1"], "gamma"),
        (["--gamma", str(MAX_GAMMA + 1)], "gamma"),
        (["--gamma", "many"], "gamma"),
        (["--top-p", "1.5"], "top-p"),
        (["--max-tokens", "0"], "max tokens"),
    ],
)
def test_impossible_settings_fail_before_loading(
    demo_models: Any, flags: list[str], expected: str
) -> None:
    proc = specchat(
        "generate",
        "--target",
        str(demo_models.f32),
        "--draft",
        str(demo_models.q4_1),
        *flags,
        "--prompt",
        "hi",
    )
    assert_user_error(proc, expected)


def test_prompt_longer_than_context(demo_models: Any) -> None:
    proc = specchat(
        "generate",
        "--target",
        str(demo_models.f32),
        "--n-ctx",
        "256",
        "--prompt",
        "lorem ipsum " * 400,
    )
    assert_user_error(proc, "context holds 256")


def test_a_system_prompt_longer_than_the_context_is_named_not_the_prompt(
    demo_models: Any,
) -> None:
    proc = specchat(
        "generate",
        "--target",
        str(demo_models.q4_1),
        "--n-ctx",
        "512",
        "--system",
        "word " * 1000,
        "--prompt",
        "hi",
    )
    assert proc.returncode == 1
    # The prompt ("hi") is not what a user must shorten: the system message is.
    assert_user_error(
        proc, "the system prompt alone is ", "the context holds 512; shorten it or raise --n-ctx"
    )


def test_a_context_past_the_trained_length_runs_with_a_note(demo_models: Any) -> None:
    """SmolLM2 was trained on 8192 tokens: a larger context is run as asked, with a word."""
    proc = specchat(
        "generate",
        "--target",
        str(demo_models.q4_1),
        "--n-ctx",
        "9216",
        "--max-tokens",
        "2",
        "--threads",
        "1",
        "--prompt",
        "hi",
    )
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and "(9216 tokens)" in notes[0] and "(8192)" in notes[0]


def test_missing_prompt_file(demo_models: Any, tmp_path: Path) -> None:
    proc = specchat(
        "generate", "--target", str(demo_models.f32), "--prompt-file", str(tmp_path / "no.txt")
    )
    assert_user_error(proc, "does not exist")


def _prompt_tokens(demo_models: Any, *extra: str) -> int:
    proc = specchat(
        "generate",
        "--target",
        str(demo_models.f32),
        "--draft",
        "none",
        "--max-tokens",
        "1",
        "--chat",
        "--prompt",
        "Say hello.",
        "--json",
        *extra,
    )
    assert proc.returncode == 0, proc.stderr
    return int(json.loads(proc.stdout)["stats"]["prompt_tokens"])


def test_a_chat_template_file_replaces_the_models_own(demo_models: Any, tmp_path: Path) -> None:
    template = tmp_path / "terse.jinja"
    # ChatML without the model's default system turn: a shorter prompt than its own template's.
    template.write_text(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "<|im_start|>assistant\n",
        encoding="utf-8",
    )
    own = _prompt_tokens(demo_models)
    assert _prompt_tokens(demo_models, "--chat-template-file", str(template)) < own


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "does not exist"),
        ("{% for m in messages %}", "chat template failed"),
        # Read as no template at all, the model's own would have run unasked.
        (" \n", EMPTY_FILE),
        ("/dev/zero", "is larger than 1 MiB"),  # refused unread, not read until memory ends
    ],
    ids=["missing", "broken", "empty", "endless"],
)
def test_a_bad_chat_template_file_is_one_error_line_before_any_load(
    demo_models: Any, tmp_path: Path, text: str | None, expected: str
) -> None:
    template = tmp_path / "template.jinja"
    if text == "/dev/zero":
        template = Path(text)
    elif text is not None:
        template.write_text(text, encoding="utf-8")
    proc = specchat(
        "generate",
        "--target",
        str(demo_models.f32),
        "--chat-template-file",
        str(template),
        "--prompt",
        "hi",
    )
    assert_user_error(proc, "--chat-template-file", expected)
    assert "loading" not in proc.stderr.lower()


def test_a_model_whose_file_name_is_not_utf8_loads(demo_models: Any, tmp_path: Path) -> None:
    # File names are bytes; Python reads one that is not UTF-8 with lone surrogates, which the
    # path's plain encode() refused with a traceback. llama.cpp takes the bytes as they are.
    target = tmp_path / os.fsdecode(b"smol\xff.gguf")
    target.symlink_to(demo_models.q4_0)
    one_reply = ["--draft", "none", "--prompt", "Hi", "--max-tokens", "2"]
    proc = specchat("generate", "--target", str(target), *one_reply)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
