"""`specchat models ...`: list, inspect, pull and derive GGUF models from the command line.

    specchat models list [--dir DIR ...] [--json]
    specchat models inspect PATH [--json]
    specchat models pull REPO [--file PATTERN] [--revision REV] [--dest DIR] [--force]
                              [--endpoint URL]
    specchat models make-draft TARGET --type Q4_0 [--out PATH] [--force] [--json]
    specchat models catalog [--json]

Handlers return an exit code; user errors are raised as SpecChatError subclasses, which
`app.cli.main` prints as one `error: ...` line (exit status 1).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from app.errors import (
    DownloadError,
    DraftIncompatibleError,
    InvalidSettingError,
    ModelLoadError,
    SpecChatError,
)
from app.paths import models_dir
from models.catalog import CATALOG
from models.describe import detail_rows, format_params
from models.probe import remembered_failure
from models.terminal import printable

if TYPE_CHECKING:
    from models.discovery import ModelEntry
    from models.hub import DownloadProgress

# The heavy modules (gguf, huggingface_hub) load inside the handlers: `register` runs on every
# `specchat` invocation, including `specchat generate`.

__all__ = ["register"]

_PROGRESS_INTERVAL_S = 0.5


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `models` and its subcommands to the top-level parser's subcommands."""
    parser = commands.add_parser(
        "models",
        help="find, inspect, download and derive GGUF models",
        description="Find, inspect, download and derive GGUF models.",
    )
    parser.set_defaults(handler=lambda _args: _usage(parser))
    sub = parser.add_subparsers(dest="models_command", metavar="COMMAND")

    p_list = sub.add_parser("list", help="every GGUF file found, broken ones with their reason")
    p_list.add_argument(
        "--dir",
        action="extend",
        nargs="+",
        default=[],
        metavar="DIR",
        help="also search these folders (repeatable)",
    )
    p_list.add_argument("--json", action="store_true", help="print JSON")
    p_list.set_defaults(handler=run_list, check=check_list_args)

    p_inspect = sub.add_parser("inspect", help="what a GGUF file holds (header only)")
    p_inspect.add_argument("path", type=Path)
    p_inspect.add_argument("--json", action="store_true", help="print JSON")
    p_inspect.set_defaults(handler=run_inspect)

    p_pull = sub.add_parser("pull", help="download a GGUF file from the Hugging Face Hub")
    p_pull.add_argument("repo", help="repository id, e.g. Qwen/Qwen2.5-0.5B-Instruct-GGUF")
    p_pull.add_argument(
        "--file",
        default=None,
        metavar="PATTERN",
        help="file name, glob or part (default: the only GGUF file)",
    )
    p_pull.add_argument(
        "--revision", default="main", metavar="REV", help="branch, tag or commit (default: main)"
    )
    p_pull.add_argument("--dest", type=Path, default=None, help="folder (default: models folder)")
    p_pull.add_argument(
        "--force", action="store_true", help="replace a file of the same name in --dest"
    )
    p_pull.add_argument("--endpoint", default=None, help="Hub URL (default: $HF_ENDPOINT)")
    p_pull.set_defaults(handler=run_pull, check=check_pull_args)

    p_draft = sub.add_parser("make-draft", help="re-quantize a target into a draft")
    p_draft.add_argument("target", type=Path)
    p_draft.add_argument("--type", required=True, dest="type_name", help="e.g. Q4_0, Q8_0, Q2_K")
    p_draft.add_argument(
        "--out", type=Path, default=None, help="output file (default: models folder/NAME.TYPE.gguf)"
    )
    p_draft.add_argument("--force", action="store_true", help="replace an existing output file")
    p_draft.add_argument("--json", action="store_true", help="print JSON")
    p_draft.set_defaults(handler=run_make_draft, check=check_make_draft_args)

    p_catalog = sub.add_parser("catalog", help="known target/draft pairs on the Hub")
    p_catalog.add_argument("--json", action="store_true", help="print JSON")
    p_catalog.set_defaults(handler=run_catalog)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        print("  ".join(cells).rstrip(), file=out)


def _bytes(n: float | None) -> str:
    from models.memory import format_bytes  # noqa: PLC0415 - gguf loads only when needed

    return format_bytes(n)


def check_list_args(args: argparse.Namespace) -> None:
    """Every --dir is a folder: exit status 2, like every usage error."""
    for folder in args.dir:
        path = Path(folder).expanduser()
        if not path.is_dir():
            why = "a file, not a folder" if path.exists() else "no such folder"
            raise InvalidSettingError(f"--dir {printable(folder)}: {why}")


def run_list(args: argparse.Namespace) -> int:
    from models.discovery import discover_models, scan_summary  # noqa: PLC0415
    from models.library import library_places  # noqa: PLC0415

    # The window's own folders and files too: the command lists what the window lists.
    entries = discover_models([*args.dir, *library_places()])
    if args.json:
        print(json.dumps([e.to_dict() for e in entries], indent=2))
        return 0
    if not entries:
        print(f"no GGUF files found (models folder: {printable(models_dir())})")
        return 0
    rows = [["NAME", "ARCH", "QUANT", "PARAMS", "SIZE", "VOCAB", "SOURCE", "PATH / PROBLEM"]]
    for entry in entries:
        rows.append([printable(cell) for cell in _list_row(entry)])
    _table(rows, sys.stdout)
    print(f"\n{scan_summary(entries)}")
    return 0


def _list_row(entry: ModelEntry) -> list[str]:
    source = entry.source + (" (ro)" if entry.read_only else "")
    info = entry.info
    if info is None:
        return [entry.path.name, "-", "-", "-", "-", "-", source, f"{entry.path}: {entry.error}"]
    problem = entry.problem
    return [
        info.name if len(info.name) <= 32 else info.name[:31] + "…",
        info.architecture,
        info.quantization,
        format_params(info.parameter_count),
        _bytes(info.total_size_bytes),
        f"{info.vocab_type or '-'}/{info.vocab_size}",
        source,
        str(entry.path) + (f": {problem}" if problem else ""),
    ]


def run_inspect(args: argparse.Namespace) -> int:
    from models.gguf import inspect_gguf  # noqa: PLC0415

    info = inspect_gguf(args.path)  # ModelLoadError -> "error: cannot load model ...: reason"
    if args.json:
        print(json.dumps(info.to_dict(include_template=True), indent=2))
        return 0
    rows = detail_rows(info, missing="-")
    problem = info.problem or remembered_failure(info.path)
    rows.append(("usable", "yes" if problem is None else f"no, {problem}"))
    _table([[f"{k}:", printable(v)] for k, v in rows], sys.stdout)
    return 0


class _ProgressPrinter:
    """One line per file on stderr, redrawn in place on a terminal, throttled elsewhere."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.last = 0.0
        self.current = ""
        self.downloaded = 0  # of the file under way, as last shown
        self.open_line = False

    def __call__(self, p: DownloadProgress) -> None:
        now = time.monotonic()
        final = p.phase == "done"
        self.downloaded = 0 if final else p.downloaded
        if not final and p.filename == self.current and now - self.last < _PROGRESS_INTERVAL_S:
            return
        self.current = p.filename
        self.last = now
        name = printable(p.filename)
        total = _bytes(p.total) if p.total else "?"
        pct = f" {p.fraction:.0%}" if p.fraction is not None else ""
        verb = {"checking": "checking", "done": "done"}.get(p.phase, "downloading")
        line = f"{verb} {name}: {_bytes(p.downloaded)} / {total}{pct}"
        if p.resumed_from and p.phase != "checking":
            line += f" (resumed at {_bytes(p.resumed_from)})"
        if self.tty:
            print("\r\x1b[2K" + line, end="\n" if final else "", file=self.out, flush=True)
            self.open_line = not final
        else:
            print(line, file=self.out, flush=True)

    def end_line(self) -> None:
        """Close a line left open for redrawing."""
        if self.open_line:
            print(file=self.out, flush=True)
            self.open_line = False


def check_pull_args(args: argparse.Namespace) -> None:
    """The repository id and --endpoint as typed, before any request: exit status 2, like every
    usage error. ($HF_ENDPOINT is the environment's, refused when the download asks for it.)"""
    from models.hub import check_repo_id, resolve_endpoint  # noqa: PLC0415 - huggingface_hub

    try:
        check_repo_id(args.repo)
        if args.endpoint:
            resolve_endpoint(args.endpoint)
    except DownloadError as exc:
        raise InvalidSettingError(str(exc)) from None
    if args.dest is not None and args.dest.exists() and not args.dest.is_dir():
        raise InvalidSettingError(f"--dest {args.dest} is a file, not a folder")


def run_pull(args: argparse.Namespace) -> int:
    from app.cli.signals import Interrupted  # noqa: PLC0415
    from models.hub import pull  # noqa: PLC0415

    printer = _ProgressPrinter(sys.stderr)
    try:
        paths = pull(
            args.repo,
            args.file,
            revision=args.revision,
            dest_dir=args.dest,
            endpoint=args.endpoint,
            progress=printer,
            replace=args.force,
        )
    except (KeyboardInterrupt, Interrupted):
        printer.end_line()
        if printer.downloaded:
            print(
                f"{_bytes(printer.downloaded)} of {printable(printer.current)} kept: the same "
                "pull resumes it",
                file=sys.stderr,
            )
        raise
    finally:
        printer.end_line()  # an error message must not go on the progress line
    for path in paths:
        print(printable(path))
    return 0


_QUANT_SUFFIX = re.compile(
    r"[._-](f32|f16|bf16|q\d(_[01k])?(_[sml])?|iq\d_\w+)$",
    re.IGNORECASE,
)


def default_draft_path(target: Path, type_name: str, folder: Path | None = None) -> Path:
    """<folder, else models_dir>/<target name without its quantization>.<TYPE>.gguf.

    Where that name already holds a draft of another model (one whose vocabulary the target
    does not share), the name gains a tag of the target's path: two targets named alike in two
    folders (model.gguf) must neither share one draft nor replace each other's."""
    stem = _QUANT_SUFFIX.sub("", target.stem)
    folder = folder if folder is not None else models_dir()
    plain = folder / f"{stem}.{type_name.upper()}.gguf"
    if not plain.exists() or _drafts_for(plain, target):
        return plain
    tag = hashlib.sha256(os.fsencode(target.resolve())).hexdigest()[:8]
    return folder / f"{stem}-{tag}.{type_name.upper()}.gguf"


def _drafts_for(existing: Path, target: Path) -> bool:
    """Whether `existing` can draft for `target`; a file either cannot read is taken to (the
    caller then says the name is taken, as it did before)."""
    from models.compat import check_compatibility  # noqa: PLC0415
    from models.gguf import inspect_gguf  # noqa: PLC0415

    try:
        return check_compatibility(inspect_gguf(target), inspect_gguf(existing)).compatible
    except (SpecChatError, OSError):
        return True


def check_make_draft_args(args: argparse.Namespace) -> None:
    """The type and the output file, before a minute of quantizing: exit status 2, like every
    usage error. Sets args.type_name (upper case) and args.out (the default filled in)."""
    from models.quantize import FTYPES  # noqa: PLC0415

    type_name = args.type_name.upper()
    if type_name not in FTYPES:
        raise InvalidSettingError(
            f"unknown quantization type {args.type_name!r}; choose one of {', '.join(FTYPES)}"
        )
    out: Path = args.out if args.out is not None else default_draft_path(args.target, type_name)
    if out.suffix.lower() != ".gguf":
        raise InvalidSettingError(f"--out must end in .gguf: {out}")
    if out.is_dir():
        raise InvalidSettingError(f"--out {out} is a folder; name the .gguf file to write")
    if out.exists():
        if out.resolve() == args.target.resolve():
            raise InvalidSettingError("--out is the target itself; choose another file")
        if not args.force:
            raise InvalidSettingError(f"{out} already exists; pass --force to replace it")
    args.type_name, args.out = type_name, out


def run_make_draft(args: argparse.Namespace) -> int:
    from app.cli.signals import Interrupted, exit_at_once  # noqa: PLC0415
    from models.compat import check_compatibility, size_ratio  # noqa: PLC0415
    from models.gguf import inspect_gguf  # noqa: PLC0415
    from models.quantize import quantize_gguf  # noqa: PLC0415 - loads llama.cpp

    type_name, out = args.type_name, args.out  # as check_make_draft_args settled them
    target_info = inspect_gguf(args.target)
    if target_info.problem is not None:  # a draft of it could never be used
        raise ModelLoadError(str(args.target), target_info.problem)
    print(f"quantizing {args.target.name} to {type_name} ...", file=sys.stderr, flush=True)
    try:
        quantize_gguf(args.target, out, type_name)
    except Interrupted as exc:
        # llama.cpp's quantizer cannot be stopped and still runs on its own thread (its partial
        # file is already removed); an ordinary exit would tear llama.cpp down under it.
        exit_at_once(exc.signum)
    try:
        draft_info = inspect_gguf(out)
        verdict = check_compatibility(target_info, draft_info)
        if not verdict.compatible:
            raise DraftIncompatibleError(out.name, args.target.name, verdict.reason)
    except SpecChatError:
        out.unlink(missing_ok=True)  # a draft that fails its own check is no use to anyone
        raise
    ratio = size_ratio(draft_info, target_info)
    if args.json:
        result: dict[str, Any] = {
            "path": str(out),
            "type": type_name,
            "size_bytes": draft_info.total_size_bytes,
            "size_ratio": ratio,
            "compatible": verdict.compatible,
            "reason": verdict.reason,
        }
        print(json.dumps(result, indent=2))
        return 0
    print(out)
    note = "" if ratio < 1 else " (not smaller than the target: it will not speed anything up)"
    print(
        f"{type_name} draft, {_bytes(draft_info.total_size_bytes)}, {ratio:.0%} of the target; "
        f"{verdict.reason} with {args.target.name}{note}",
        file=sys.stderr,
    )
    return 0


def run_catalog(args: argparse.Namespace) -> int:
    if args.json:
        data = [
            {
                "key": p.key,
                "title": p.title,
                "target": {"repo": p.target.repo_id, "file": p.target.file_pattern},
                "draft": {"repo": p.draft.repo_id, "file": p.draft.file_pattern},
                "note": p.note,
                "verified_offline": p.verified_offline,
            }
            for p in CATALOG
        ]
        print(json.dumps(data, indent=2))
        return 0
    for pair in CATALOG:
        print(f"{pair.title}  [{pair.key}]")
        for role, m in (("target", pair.target), ("draft", pair.draft)):
            print(f"  {role}: specchat models pull {m.repo_id} --file '{m.file_pattern}'")
        print(f"  {pair.note}; not verified offline" if not pair.verified_offline else "")
    return 0
