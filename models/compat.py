"""Can this draft speculate for that target? llama.cpp's vocabulary rules, said in words.

The rules are those of llama.cpp's `common_speculative_are_compatible` (current version):

1. the same vocabulary type (tokenizer.ggml.model: "llama" = SPM, "gpt2" = BPE, ...);
2. the same add-BOS flag and, when BOS is added, the same BOS id;
3. the same for EOS;
4. vocabulary sizes within 128 tokens of each other (Qwen2.5's small and large models differ by
   padding rows);
5. identical token text for every id from 5 up to the smaller vocabulary's size.

`check_compatibility` returns the first rule that fails, so the window and the CLI can say why a
draft is refused. `rank_drafts` orders a list of candidates for a draft dropdown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from app.errors import DraftIncompatibleError
from app.paths import same_file
from models.gguf import GGUFInfo, inspect_gguf

__all__ = [
    "SPEC_VOCAB_CHECK_START_TOKEN_ID",
    "SPEC_VOCAB_MAX_SIZE_DIFFERENCE",
    "Compatibility",
    "DraftVerdict",
    "check_compatibility",
    "check_draft_file",
    "rank_drafts",
]

SPEC_VOCAB_MAX_SIZE_DIFFERENCE = 128
SPEC_VOCAB_CHECK_START_TOKEN_ID = 5
_SHOWN_TOKEN_CHARS = 40


@dataclass(frozen=True)
class Compatibility:
    compatible: bool
    reason: str  # "compatible", or the first failing rule in words


def _ok() -> Compatibility:
    return Compatibility(True, "compatible")


def _no(reason: str) -> Compatibility:
    return Compatibility(False, reason)


def _show(text: str) -> str:
    shown = text if len(text) <= _SHOWN_TOKEN_CHARS else text[: _SHOWN_TOKEN_CHARS - 1] + "…"
    return repr(shown)


def _special_rule(
    label: str, t_add: bool, d_add: bool, t_id: int | None, d_id: int | None
) -> Compatibility | None:
    if t_add != d_add:
        return _no(
            f"{label} handling differs (target {'adds' if t_add else 'does not add'} {label}, "
            f"draft {'adds' if d_add else 'does not add'} {label})"
        )
    if t_add and t_id != d_id:
        return _no(f"{label} token differs (target id {t_id}, draft id {d_id})")
    return None


def check_compatibility(target: GGUFInfo, draft: GGUFInfo) -> Compatibility:
    """First failing llama.cpp vocabulary rule, or Compatibility(True, "compatible")."""
    if not target.has_vocab:
        return _no("target has no vocabulary")
    if not draft.has_vocab:
        return _no("draft has no vocabulary")
    if draft.kind != "model":
        return _no(f"draft is not a language model (it is a {draft.kind} file)")
    if target.tokenizer_fingerprint == draft.tokenizer_fingerprint:
        return _ok()  # same tokens, same special ids and flags: every rule holds

    if target.vocab_type != draft.vocab_type:
        # Each side named: the CLI's sentence names the draft first, the window the target.
        return _no(
            f"vocabulary type differs (target {target.vocab_type}, draft {draft.vocab_type})"
        )
    t, d = target, draft
    for rule in (
        _special_rule("BOS", t.add_bos, d.add_bos, t.bos_token_id, d.bos_token_id),
        _special_rule("EOS", t.add_eos, d.add_eos, t.eos_token_id, d.eos_token_id),
    ):
        if rule is not None:
            return rule
    diff = abs(target.vocab_size - draft.vocab_size)
    if diff > SPEC_VOCAB_MAX_SIZE_DIFFERENCE:
        return _no(
            f"vocab sizes differ by {diff} tokens (limit {SPEC_VOCAB_MAX_SIZE_DIFFERENCE}): "
            f"target {target.vocab_size}, draft {draft.vocab_size}"
        )
    n = min(target.vocab_size, draft.vocab_size)
    first = target.tokens.first_difference(draft.tokens, SPEC_VOCAB_CHECK_START_TOKEN_ID, n)
    if first is not None:
        return _no(
            f"token {first} differs: target {_show(target.tokens[first])}, "
            f"draft {_show(draft.tokens[first])}"
        )
    return _ok()


@dataclass(frozen=True)
class DraftVerdict:
    """One candidate for the draft dropdown, judged against a target."""

    info: GGUFInfo
    compatibility: Compatibility
    size_ratio: float  # draft bytes / target bytes
    smaller_than_target: bool
    note: str  # "compatible, 8% of the target's size", "not smaller than the target", or the reason

    @property
    def path(self) -> Path:
        return self.info.path

    @property
    def compatible(self) -> bool:
        return self.compatibility.compatible

    @property
    def usable(self) -> bool:
        """Compatible and smaller than the target: worth offering first."""
        return self.compatible and self.smaller_than_target

    @property
    def reason(self) -> str:
        return self.compatibility.reason


def size_ratio(draft: GGUFInfo, target: GGUFInfo) -> float:
    """The draft's size on disk over the target's, every part of a split model counted."""
    return draft.total_size_bytes / max(target.total_size_bytes, 1)


def rank_drafts(target: GGUFInfo, candidates: Iterable[GGUFInfo]) -> list[DraftVerdict]:
    """Judge every candidate (the target's own file is left out).

    Order: compatible drafts smaller than the target, smallest first; then compatible drafts that
    are not smaller (flagged: they cannot speed anything up); then incompatible ones with their
    reason, by name.
    """
    verdicts: list[DraftVerdict] = []
    for info in candidates:
        if same_file(info.path, target.path):
            continue
        compat = check_compatibility(target, info)
        ratio = size_ratio(info, target)
        smaller = info.total_size_bytes < target.total_size_bytes
        if not compat.compatible:
            note = compat.reason
        elif smaller:
            note = f"compatible, {ratio:.0%} of the target's size"
        else:
            note = f"compatible but not smaller than the target ({ratio:.1f}x its size)"
        verdicts.append(DraftVerdict(info, compat, ratio, smaller, note))

    def order(v: DraftVerdict) -> tuple[int, float, str]:
        group = 0 if v.usable else 1 if v.compatible else 2
        return (group, v.size_ratio if group < 2 else 0.0, str(v.path))

    return sorted(verdicts, key=order)


def check_draft_file(draft: Path, target: Path) -> None:
    """Raise DraftIncompatibleError unless llama.cpp's vocabulary rules accept the pair.

    Reads only the two GGUF headers, so a wrong draft is refused before its weights load.
    """
    verdict = check_compatibility(inspect_gguf(target), inspect_gguf(draft))
    if not verdict.compatible:
        raise DraftIncompatibleError(draft.name, target.name, verdict.reason)
