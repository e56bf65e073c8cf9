"""Make a draft by deleting transformer blocks from a GGUF model, with the `gguf` package's writer.

Deleting blocks without retraining leaves a model that shares the tokenizer and the embedding and
output weights of its source, so it passes every vocabulary check and loads as a draft, yet it
predicts nearly nothing the full model would: the demo's "useless draft". The benchmark and the
tests use it for the unprofitable case, where speculation must be seen to lose (fixed γ) and to
switch itself off (γ auto).

The copy keeps every metadata key, lowers `<arch>.block_count`, trims per-layer metadata arrays,
and renumbers the surviving `blk.N.*` tensors so they run 0..n-1 without gaps, as llama.cpp
requires. Tensor bytes are copied verbatim, so quantized tensors stay quantized.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.durable import replace_atomically
from app.errors import NO_SUCH_FILE, InvalidSettingError, ModelLoadError
from models.partial import partial_path, remove_stale_partials

# The layers dropped for the useless demo draft: 9 to 28 inclusive, 20 of SmolLM2's 30.
USELESS_DRAFT_DROP = range(9, 29)
USELESS_DRAFT_FILE = "SmolLM2-135M-Instruct.Q4_1.pruned-9-28.gguf"

_BLOCK = re.compile(r"^blk\.(\d+)\.(.+)$")


def prune_layers(src: Path, dst: Path, drop: Iterable[int]) -> Path:
    """Write `src` without the blocks listed in `drop` to `dst` and return `dst`.

    Raises ModelLoadError when `src` cannot be read as a GGUF and InvalidSettingError when the
    layer list does not fit the model (out of range, or nothing left).
    """
    import gguf  # noqa: PLC0415 - only needed when a draft is being made

    src = Path(src)
    dst = Path(dst)
    if not src.is_file():
        raise ModelLoadError(str(src), NO_SUCH_FILE)
    try:
        reader = gguf.GGUFReader(src)
    except (ValueError, OSError) as exc:  # gguf raises ValueError for bad magic or truncation
        raise ModelLoadError(str(src), f"not a readable GGUF file ({exc})") from exc

    arch = _string_field(reader, "general.architecture")
    if arch is None:
        raise ModelLoadError(str(src), "the file names no general.architecture")
    count_key = f"{arch}.block_count"
    count_field = reader.fields.get(count_key)
    if count_field is None:
        raise ModelLoadError(str(src), f"the file has no {count_key}")
    n_blocks = int(count_field.contents())

    dropped = sorted(set(drop))
    outside = [i for i in dropped if not 0 <= i < n_blocks]
    if outside:
        raise InvalidSettingError(
            f"cannot remove layers {outside}: the model has layers 0..{n_blocks - 1}"
        )
    kept = [i for i in range(n_blocks) if i not in set(dropped)]
    if not kept:
        raise InvalidSettingError("removing every layer would leave no model")
    new_index = {old: new for new, old in enumerate(kept)}

    dst.parent.mkdir(parents=True, exist_ok=True)
    # A killed run leaves its copy (up to the model's size) under a name no later run reuses.
    remove_stale_partials(dst.parent)

    def write(partial: Path) -> None:
        writer = gguf.GGUFWriter(partial, arch)
        try:
            _copy_metadata(reader, writer, arch=arch, n_blocks=n_blocks, kept=kept)
            for tensor in reader.tensors:
                name = _renamed(tensor.name, new_index)
                if name is None:
                    continue
                # The reader exposes quantized tensors as raw bytes (uint8 rows); with raw_dtype
                # the writer recovers the logical shape and writes the blocks unchanged.
                writer.add_tensor(name, tensor.data, raw_dtype=tensor.tensor_type)
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file()
        finally:
            writer.close()

    # Renamed into place last, so an interrupted run never leaves a loadable half-file.
    replace_atomically(dst, write, temporary=partial_path(dst))
    return dst


def useless_draft(source: Path, folder: Path | None = None) -> Path:
    """The demo's useless draft: `source` (the Q4_1 demo model) with layers 9 to 28 removed.

    Built once into `folder` (default: the demo models folder) and reused afterwards.
    """
    from app.paths import demo_models_dir  # noqa: PLC0415

    folder = folder or demo_models_dir()
    dst = folder / USELESS_DRAFT_FILE
    if not dst.is_file():
        prune_layers(source, dst, USELESS_DRAFT_DROP)
    return dst


def useless_demo_draft(folder: Path | None = None) -> Path:
    """useless_draft() of the bundled demo model: the bench's `--draft demo-pruned`."""
    from models.demo import bundled_model_path  # noqa: PLC0415

    return useless_draft(bundled_model_path(), folder)


def _renamed(name: str, new_index: dict[int, int]) -> str | None:
    """The tensor's name in the pruned file, or None when its block was removed."""
    match = _BLOCK.match(name)
    if match is None:
        return name  # embeddings, output norm and head belong to no block
    old = int(match.group(1))
    if old not in new_index:
        return None
    return f"blk.{new_index[old]}.{match.group(2)}"


def _string_field(reader: Any, key: str) -> str | None:
    field = reader.fields.get(key)
    if field is None:
        return None
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def _copy_metadata(reader: Any, writer: Any, *, arch: str, n_blocks: int, kept: list[int]) -> None:
    import gguf  # noqa: PLC0415

    value_type = gguf.GGUFValueType
    count_key = f"{arch}.block_count"
    for key, field in reader.fields.items():
        # The header counts are recomputed by the writer, and it writes the architecture itself.
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if key == count_key:
            writer.add_key_value(key, len(kept), value_type.UINT32)
            continue
        if key == "general.alignment":
            writer.data_alignment = int(field.contents())
        main = field.types[0]
        if main == value_type.ARRAY:
            sub = field.types[-1]
            if len(field.types) != 2:
                raise ModelLoadError(key, "nested metadata arrays are not supported")
            if sub == value_type.STRING:
                # Raw bytes, not decoded text: a token that is not valid UTF-8 must survive.
                items: list[Any] = [bytes(field.parts[i]) for i in field.data]
            else:
                items = list(field.contents())
            if key.startswith(f"{arch}.") and len(items) == n_blocks:
                # A per-layer setting (some architectures vary heads by layer) follows its layers.
                items = [items[i] for i in kept]
            writer.add_key_value(key, items, main, sub_type=sub)
        elif main == value_type.STRING:
            writer.add_key_value(key, bytes(field.parts[field.data[0]]), main)
        else:
            writer.add_key_value(key, field.contents(), main)
