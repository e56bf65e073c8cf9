"""What the model dropdowns offer: every known GGUF file, read and judged against the target.

Runs in a helper process (Jobs.run_in_process), never in the window's process: parsing a
header is a pure-Python loop over the whole vocabulary (half a second for Gemma's 262k tokens)
that would hold the GIL and stall the UI thread by 100 ms and more. So this module must not
import Qt, and everything it returns is small picklable data without the token lists.

Known files are those the Models dialog lists (library_catalog): the demo family, the app's
models folder, the user's folders and files, the Hugging Face cache and LM Studio's folders.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.engine.builtin_templates import BuiltinTemplate, builtin_template
from app.errors import SpecChatError
from app.paths import same_file
from models.compat import check_compatibility, rank_drafts
from models.discovery import discover_models
from models.gguf import GGUFInfo, inspect_gguf
from ui.messages import describe


@dataclass(frozen=True, slots=True)
class ModelFile:
    path: str
    size_bytes: int  # on disk, every part of a split model (GGUFInfo.total_size_bytes)
    quantization: str
    name: str
    architecture: str
    # Equal fingerprints mean identical vocabularies, so a draft of one suits the other.
    tokenizer_fingerprint: str
    # The chat format a file without a template is chatted in (app/engine/builtin_templates);
    # None when the file has its own template.
    builtin_format: BuiltinTemplate | None = None


@dataclass(frozen=True, slots=True)
class DraftOption:
    path: str
    size_bytes: int  # on disk, every part of a split model (GGUFInfo.total_size_bytes)
    quantization: str
    compatible: bool
    reason: str  # why not, in words, when not compatible
    note: str  # "compatible, 18% of the target's size", ...


@dataclass(frozen=True, slots=True)
class Unreadable:
    path: str
    message: str


@dataclass(frozen=True, slots=True)
class Catalog:
    models: list[ModelFile]  # usable model files, smallest first
    unreadable: list[Unreadable]
    target: ModelFile | None
    drafts: list[DraftOption]  # rank_drafts' order: usable by size, then the rest


@dataclass(frozen=True, slots=True)
class Vetted:
    """A file the user added: usable or not (message), and whether it suits as the draft."""

    path: str
    message: str | None
    as_draft: bool


def known_paths(
    extra: Iterable[str], demo: Iterable[Path] = (), models_folder: Path | None = None
) -> list[str]:
    """Demo files, the models folder's GGUF files and the user's own, without duplicates."""
    found: list[Path] = [*demo]
    # An unreadable or missing models folder just contributes nothing.
    if models_folder is not None:
        with contextlib.suppress(OSError):
            found.extend(sorted(models_folder.rglob("*.gguf")))
    found.extend(Path(p) for p in extra)
    seen: set[str] = set()
    out: list[str] = []
    for path in found:
        key = str(path.resolve()) if path.exists() else str(path)
        if key not in seen:
            seen.add(key)
            out.append(str(path))
    return out


def _read(path: str) -> GGUFInfo | str:
    """The file's header, or a readable sentence saying why it cannot be used."""
    try:
        info = inspect_gguf(path)
    except SpecChatError as exc:
        return describe(exc)
    if info.problem is not None:
        return f"{Path(path).name} cannot be used: {info.problem}."
    return info


def _model_file(path: str, info: GGUFInfo) -> ModelFile:
    return ModelFile(
        path,
        info.total_size_bytes,
        info.quantization,
        info.name,
        info.architecture,
        info.tokenizer_fingerprint,
        None if info.chat_template else _builtin_format(info),
    )


def _builtin_format(info: GGUFInfo) -> BuiltinTemplate:
    """What the engine will chat in: the format whose control tokens the vocabulary holds
    (chat_prompt_ids asks llama.cpp's tokenizer; the header's token texts say the same)."""
    markup = {text for text in info.tokens if text.startswith("<")}
    return builtin_template(markup.__contains__)


def build_catalog(paths: Sequence[str], target_path: str | None) -> Catalog:
    infos: dict[str, GGUFInfo] = {}
    unreadable: list[Unreadable] = []
    for path in paths:
        result = _read(path)
        if isinstance(result, str):
            unreadable.append(Unreadable(path, result))
        else:
            infos[path] = result
    if target_path and not any(_same(p, target_path) for p in infos):
        result = _read(target_path)
        if not isinstance(result, str):
            infos[target_path] = result
    models = sorted((_model_file(p, i) for p, i in infos.items()), key=lambda m: m.size_bytes)
    target_info = next((i for p, i in infos.items() if _same(p, target_path)), None)
    drafts: list[DraftOption] = []
    if target_info is not None:
        paths_by_info = {id(i): p for p, i in infos.items()}
        for verdict in rank_drafts(target_info, list(infos.values())):
            drafts.append(
                DraftOption(
                    paths_by_info[id(verdict.info)],
                    verdict.info.total_size_bytes,
                    verdict.info.quantization,
                    verdict.compatible,
                    verdict.reason,
                    verdict.note,
                )
            )
    target = next((m for m in models if _same(m.path, target_path)), None)
    return Catalog(models, unreadable, target, drafts)


def library_catalog(
    places: Sequence[Path], also: Sequence[str], target_path: str | None, models_folder: Path
) -> Catalog:
    """The dropdowns' content from the Models dialog's own search (models.discovery: the app's
    folder, the user's folders and files, the Hugging Face cache, LM Studio, the bundled demo
    file), plus `also` (drafts in use or remembered): a file the library calls a compatible
    draft is one the Draft list offers."""
    entries = discover_models(places, app_folder=models_folder)
    files = [str(e.path) for e in entries if not e.is_folder]
    return build_catalog(known_paths([*files, *also]), target_path)


def vet_new_file(path: str, target_path: str | None) -> Vetted:
    """Read a file the user added; it suits as the draft if compatible and smaller."""
    result = _read(path)
    if isinstance(result, str):
        return Vetted(path, result, False)
    target = _read(target_path) if target_path else None
    as_draft = (
        isinstance(target, GGUFInfo)
        and result.total_size_bytes < target.total_size_bytes
        and check_compatibility(target, result).compatible
    )
    return Vetted(path, None, as_draft)


def _same(a: str, b: str | None) -> bool:
    return b is not None and same_file(Path(a), Path(b))
