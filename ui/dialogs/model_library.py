"""The local-library side of the Models dialog, without widgets: words, verdicts, drafts.

What the dialog shows about the GGUF files on disk is worked out here: a file's status and
header rows, the memory plan in words, the vocabulary verdicts of every possible draft (`judge`),
quantizing a new draft and judging it (`make_draft_file`), and a Hub file's label. Failures are
put in words by ui.messages.describe, as everywhere in the window. The functions that read files
or quantize run as background jobs, so they take plain values and hand back the frozen
dataclasses below; nothing here touches a widget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.errors import DraftIncompatibleError, InvalidSettingError
from app.paths import same_file
from models.compat import check_compatibility, rank_drafts, size_ratio
from models.describe import detail_rows, format_params
from models.discovery import ModelEntry
from models.gguf import GGUFInfo, inspect_gguf
from models.hub import RemoteFile
from models.memory import FitPlan, format_bytes, plan_fit
from ui.messages import describe
from ui.themes import Status

DASH = "—"


# ---------------------------------------------------------------------------------------------
# Words


def opt(value: object) -> str:
    return DASH if value is None else str(value)


def _layers_word(n_gpu_layers: int) -> str:
    return "all" if n_gpu_layers < 0 else str(n_gpu_layers)


def entry_status(entry: ModelEntry) -> tuple[str, Status | None]:
    info = entry.info
    if info is None:
        return entry.error or "unreadable", Status.ERROR
    if entry.problem is not None:  # an adapter, no weights, a load that failed before
        return entry.problem, Status.WARNING
    return ("ok" if info.has_chat_template else "ok, no chat template"), None


def entry_cells(entry: ModelEntry) -> list[str]:
    """Source, architecture, quantization, parameters, size, context and vocabulary, in words."""
    source = entry.source + (" (read-only)" if entry.read_only else "")
    info = entry.info
    if info is None:
        return [source, DASH, DASH, DASH, DASH, DASH, DASH]
    return [
        source,
        info.architecture,
        info.quantization,
        format_params(info.parameter_count),
        format_bytes(info.total_size_bytes),
        opt(info.context_length),
        f"{info.vocab_type or DASH}/{info.vocab_size}",
    ]


def inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------
# What background jobs hand back (frozen, no Qt)


@dataclass(frozen=True, slots=True)
class _DraftRow:
    name: str
    path: Path
    quantization: str
    size: str
    verdict: str
    kind: Literal["usable", "compatible", "refused"]


@dataclass(frozen=True, slots=True)
class Details:
    path: Path
    rows: tuple[tuple[str, str], ...]
    memory: str
    warnings: tuple[str, ...]
    drafts: tuple[_DraftRow, ...]


@dataclass(frozen=True, slots=True)
class MadeDraft:
    path: Path
    target: Path
    type_name: str
    size_bytes: int
    ratio: float
    reason: str
    compatible: bool


@dataclass(frozen=True, slots=True)
class Downloaded:
    paths: tuple[Path, ...]  # every file that landed, first part of a split model first
    error: BaseException | None  # why the rest did not (Cancelled included)


def _info_rows(entry: ModelEntry, info: GGUFInfo) -> list[tuple[str, str]]:
    source = entry.source + (" (read-only)" if entry.read_only else "")
    if entry.repo_id:
        source += f", {entry.repo_id}"
    path, *rest = detail_rows(info, missing=DASH)
    return [path, ("source", source), *rest]


def _memory_text(plan: FitPlan, n_ctx: int, n_gpu_layers: int) -> str:
    t = plan.target
    lines = [
        f"At {n_ctx} tokens of context, GPU layers {_layers_word(n_gpu_layers)}: weights "
        f"{format_bytes(t.weights_bytes)}, KV cache {format_bytes(t.kv_bytes)}, "
        f"compute about {format_bytes(t.compute_bytes)}."
    ]
    mem = plan.memory
    available = format_bytes(mem.ram_available_bytes)
    ram = f"{format_bytes(plan.host_needed_bytes)} of RAM ({available} available)"
    if plan.fits_gpu is None:
        lines.append(f"No NVIDIA GPU found: it runs on the CPU and needs about {ram}.")
    else:
        lines.append(
            f"Needs about {format_bytes(plan.gpu_needed_bytes)} of GPU memory "
            f"({format_bytes(mem.vram_free_bytes)} free) and {ram}."
        )
    lines.append("It fits." if plan.fits else "It does not fit as set.")
    return "\n".join(lines)


def judge(
    entry: ModelEntry,
    entries: Sequence[ModelEntry],
    n_ctx: int,
    n_gpu_layers: int,
) -> Details:
    """Everything the details pane shows for one file (runs on a pool thread)."""
    info = entry.info
    if info is None:
        broken = (("path", str(entry.path)), ("status", entry.error or "unreadable"))
        return Details(entry.path, broken, "", (), ())
    rows = tuple(_info_rows(entry, info))
    if entry.problem is not None:
        note = f"Cannot be a target or a draft: {entry.problem}."
        return Details(entry.path, rows, note, (), ())
    plan = plan_fit(info, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers)
    drafts: list[_DraftRow] = []
    infos = [e.info for e in entries if e.info is not None]
    for verdict in rank_drafts(info, infos):
        kind: Literal["usable", "compatible", "refused"] = (
            "usable" if verdict.usable else "compatible" if verdict.compatible else "refused"
        )
        drafts.append(
            _DraftRow(
                verdict.path.name,
                verdict.path,
                verdict.info.quantization,
                format_bytes(verdict.info.total_size_bytes),
                verdict.note,
                kind,
            )
        )
    # Broken files cannot be judged by their vocabulary; they are refused with their own reason,
    # so the user sees every file the draft dropdown will not offer.
    for other in entries:
        if other.info is None and not other.is_folder:
            reason = f"unreadable: {other.error or 'unknown problem'}"
            drafts.append(_DraftRow(other.path.name, other.path, DASH, DASH, reason, "refused"))
    return Details(
        entry.path,
        rows,
        _memory_text(plan, n_ctx, n_gpu_layers),
        plan.warnings,
        tuple(drafts),
    )


def make_draft_file(target: Path, out: Path, type_name: str) -> MadeDraft:
    """Quantize, then judge the result against its source the way `models make-draft` does."""
    from models.quantize import quantize_gguf  # noqa: PLC0415 - loads llama.cpp, only when used

    target_info = inspect_gguf(target)
    if out.exists():
        if same_file(out, target):
            raise InvalidSettingError(f"{out.name} is the target itself; choose another type")
        raise InvalidSettingError(
            f"a file named {out.name} already exists in {out.parent}; it is in the list already"
        )
    quantize_gguf(target, out, type_name)
    draft_info = inspect_gguf(out)
    verdict = check_compatibility(target_info, draft_info)
    ratio = size_ratio(draft_info, target_info)
    return MadeDraft(
        out,
        target,
        type_name,
        draft_info.total_size_bytes,
        ratio,
        verdict.reason,
        verdict.compatible,
    )


def made_draft_status(made: MadeDraft) -> tuple[str, Status]:
    """What "Make draft" says when the file is made, and as what status."""
    size = f"{format_bytes(made.size_bytes)}, {made.ratio:.0%} of the target"
    if not made.compatible:
        # The file is kept, as the CLI keeps it, but the user learns why it is refused.
        error = DraftIncompatibleError(made.path.name, made.target.name, made.reason)
        return describe(error), Status.ERROR
    note = "" if made.ratio < 1 else " (not smaller: it will not speed anything up)"
    text = f"Made {made.path.name} ({made.type_name}, {size}): {made.reason} with "
    return text + f"{made.target.name}{note}.", Status.OK if made.ratio < 1 else Status.WARNING


def remote_label(chosen: RemoteFile, files: Sequence[RemoteFile]) -> str:
    shard = chosen.shard
    if shard is None:
        return f"{chosen.path} ({format_bytes(chosen.size)})"
    prefix = chosen.path[: -len("-00001-of-00002.gguf")]
    total = sum(f.size for f in files if f.shard and f.path.startswith(prefix))
    return f"{chosen.path} ({format_bytes(total)} in {shard[1]} parts)"
