"""llama.cpp's draft/target vocabulary rules, on real files, synthetic files and rule by rule."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from models.compat import check_compatibility, rank_drafts
from models.gguf import GGUFInfo, TokenTable, inspect_gguf, tokenizer_fingerprint
from tests.helpers.model_files import bundled_q4_1, write_tiny_gguf


def _vocab(info: GGUFInfo, **changes: object) -> GGUFInfo:
    """A copy of `info` with tokenizer fields changed and its fingerprint recomputed."""
    changed = dataclasses.replace(info, **changes)  # type: ignore[arg-type]
    fingerprint = tokenizer_fingerprint(
        changed.vocab_type,
        changed.tokens,
        bos=changed.bos_token_id,
        eos=changed.eos_token_id,
        add_bos=changed.add_bos,
        add_eos=changed.add_eos,
    )
    return dataclasses.replace(
        changed, tokenizer_fingerprint=fingerprint, vocab_size=len(changed.tokens)
    )


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> GGUFInfo:
    tokens = ["<unk>", "<s>", "</s>", *[f"tok{i}" for i in range(3, 300)]]
    return inspect_gguf(write_tiny_gguf(tmp_path_factory.mktemp("c") / "base.gguf", tokens=tokens))


def _tokens(info: GGUFInfo) -> list[bytes]:
    return [info.tokens.raw(i) for i in range(len(info.tokens))]


def test_identical_vocabularies_are_compatible(base: GGUFInfo) -> None:
    assert check_compatibility(base, base).compatible
    assert check_compatibility(base, base).reason == "compatible"


def test_rule_vocab_type(base: GGUFInfo) -> None:
    other = _vocab(base, vocab_type="llama")
    verdict = check_compatibility(base, other)
    assert not verdict.compatible
    assert verdict.reason == "vocabulary type differs (target gpt2, draft llama)"


def test_rule_bos(base: GGUFInfo) -> None:
    adds = _vocab(base, add_bos=True)
    assert check_compatibility(base, adds).reason == (
        "BOS handling differs (target does not add BOS, draft adds BOS)"
    )
    # Different BOS ids only matter when BOS is added.
    assert check_compatibility(base, _vocab(base, bos_token_id=7)).compatible
    both = _vocab(base, add_bos=True)
    verdict = check_compatibility(both, _vocab(both, bos_token_id=7))
    assert verdict.reason == "BOS token differs (target id 1, draft id 7)"


def test_rule_eos(base: GGUFInfo) -> None:
    adds = _vocab(base, add_eos=True)
    assert "EOS handling differs" in check_compatibility(base, adds).reason
    assert check_compatibility(base, _vocab(base, eos_token_id=9)).compatible
    verdict = check_compatibility(adds, _vocab(adds, eos_token_id=9))
    assert verdict.reason == "EOS token differs (target id 2, draft id 9)"


def test_rule_vocab_size_tolerance_is_128(base: GGUFInfo) -> None:
    extra = [f"pad{i}".encode() for i in range(129)]
    within = _vocab(base, tokens=TokenTable(_tokens(base) + extra[:128]))
    assert check_compatibility(base, within).compatible
    beyond = _vocab(base, tokens=TokenTable(_tokens(base) + extra))
    verdict = check_compatibility(base, beyond)
    assert verdict.reason.startswith("vocab sizes differ by 129 tokens (limit 128)")


def test_rule_token_text_from_id_5(base: GGUFInfo) -> None:
    texts = _tokens(base)
    early = _vocab(base, tokens=TokenTable([*texts[:4], b"other", *texts[5:]]))
    assert check_compatibility(base, early).compatible  # ids below 5 are not compared
    texts[123] = b"something else"
    late = _vocab(base, tokens=TokenTable(texts))
    verdict = check_compatibility(base, late)
    assert verdict.reason == "token 123 differs: target 'tok123', draft 'something else'"


def test_draft_without_vocabulary_or_not_a_model(tmp_path: Path, base: GGUFInfo) -> None:
    bare = inspect_gguf(write_tiny_gguf(tmp_path / "bare.gguf", vocab_model=None))
    assert check_compatibility(base, bare).reason == "draft has no vocabulary"
    lora = inspect_gguf(write_tiny_gguf(tmp_path / "lora.gguf", general_type="adapter"))
    assert "not a language model" in check_compatibility(base, lora).reason


@pytest.mark.model
def test_demo_drafts_are_compatible_with_the_demo_target(demo_models: object) -> None:
    target = inspect_gguf(demo_models.f32)  # type: ignore[attr-defined]
    for attr in ("q8_0", "q4_1", "q4_0", "q2_k"):
        verdict = check_compatibility(target, inspect_gguf(getattr(demo_models, attr)))
        assert verdict.compatible, (attr, verdict.reason)


@pytest.mark.model
def test_gemma_is_refused_for_smollm2(gemma_model: Path) -> None:
    smol = inspect_gguf(bundled_q4_1())
    gemma = inspect_gguf(gemma_model)
    verdict = check_compatibility(smol, gemma)
    assert not verdict.compatible
    assert verdict.reason == "vocabulary type differs (target gpt2, draft llama)"


@pytest.mark.model
def test_synthetic_other_vocabularies_are_refused_for_smollm2(tmp_path: Path) -> None:
    smol = inspect_gguf(bundled_q4_1())
    # Same tokenizer type, far smaller vocabulary.
    small = inspect_gguf(write_tiny_gguf(tmp_path / "small.gguf", bos=1, eos=2))
    verdict = check_compatibility(smol, small)
    assert verdict.reason.startswith("vocab sizes differ by 49088 tokens (limit 128)")
    # Same size and specials, one token renamed: the real file's list, edited and rewritten.
    tokens = list(smol.tokens)
    tokens[1234] = "renamed"
    edited = inspect_gguf(write_tiny_gguf(tmp_path / "edited.gguf", tokens=tokens))
    verdict = check_compatibility(smol, edited)
    assert verdict.reason == f"token 1234 differs: target {smol.tokens[1234]!r}, draft 'renamed'"
    # The unedited list written into a tiny file is compatible: only the vocabulary matters.
    same = inspect_gguf(write_tiny_gguf(tmp_path / "same.gguf", tokens=list(smol.tokens)))
    assert check_compatibility(smol, same).compatible


@pytest.mark.model
def test_rank_drafts_orders_by_size_and_flags_the_rest(
    demo_models: object, gemma_model: Path
) -> None:
    paths = {a: getattr(demo_models, a) for a in ("f32", "q8_0", "q4_1", "q4_0", "q2_k")}
    infos = {a: inspect_gguf(p) for a, p in paths.items()}
    gemma = inspect_gguf(gemma_model)
    candidates = [infos["q8_0"], gemma, infos["f32"], infos["q2_k"], infos["q4_1"], infos["q4_0"]]

    ranked = rank_drafts(infos["f32"], candidates)
    assert [v.path for v in ranked] == [
        paths["q2_k"],
        paths["q4_0"],
        paths["q4_1"],
        paths["q8_0"],
        gemma_model,
    ]  # the target's own file is left out
    assert all(v.usable for v in ranked[:4])
    assert ranked[0].size_ratio < ranked[3].size_ratio < 1
    assert (
        not ranked[-1].compatible
        and ranked[-1].note == "vocabulary type differs (target gpt2, draft llama)"
    )

    # Against a small target, the bigger files are compatible but flagged, after the smaller.
    small_target = rank_drafts(infos["q4_0"], candidates)
    assert [v.path for v in small_target[:1]] == [paths["q2_k"]]
    flagged = [v for v in small_target if v.compatible and not v.smaller_than_target]
    assert {v.path for v in flagged} == {paths["q8_0"], paths["f32"], paths["q4_1"]}
    assert all("not smaller than the target" in v.note for v in flagged)
    assert small_target[-1].path == gemma_model
