"""`specchat bench`'s flags checked before anything loads or is measured (exit status 2): the
values alone, the flags that contradict each other, the output files, and the flags that mean
nothing to `--server`, which are refused rather than silently dropped.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from app.bench.chart import plot_formats
from app.bench.openai_stream import parse_endpoint
from app.bench.plan import check_repeats
from app.bench.prompts import is_builtin, load_prompts
from app.bench.remote import check_servers
from app.cli.args import DEMO, DRAFT_SUFFIX, check_model_args, check_utf8, generation_from_args
from app.cli.output import check_output_file
from app.cli.rpc_options import check_worker_keys, draft_endpoints
from app.engine.gamma import AUTO
from app.errors import InvalidSettingError

DEMO_PRUNED = "demo-pruned"
_MODEL_DRAFTS = f"a path, {DEMO} or {DEMO_PRUNED}"

# Flags for the models this process loads, by argparse dest, in the order they are refused
# with --server: a server runs the models it loaded, as it was started. The sampling flags are
# not among them: they reach every server in its requests (app/bench/remote.py).
LOCAL_ONLY = (
    "target",
    "draft",
    "csv",
    "plot",
    "exact",
    "rpc",
    "draft_rpc",
    "gamma",
    "suffix",
    "trees",
    "p_min",
    "n_ctx",
    "n_gpu_layers",
    "draft_n_gpu_layers",
    "threads",
    "flash_attn",
    "prompt_cache",
    "chat_template_file",
)


def local_defaults(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """What each LOCAL_ONLY flag is when not given, so --server can tell a given one."""
    return {dest: parser.get_default(dest) for dest in LOCAL_ONLY}


def is_suffix_draft(draft: str) -> bool:
    """Whether a --draft value names the suffix index alone, no draft model."""
    return draft in (DRAFT_SUFFIX, "ngram")


def check_bench_args(args: argparse.Namespace) -> None:
    """Flag values alone, before anything loads; exit status 2 like every usage error."""
    check_model_args(args)
    generation_from_args(args, AUTO).validate()
    check_repeats(args.repeat)
    if is_builtin(args.prompts):
        load_prompts(args.prompts)  # an unknown class is the command line's error, not a file's
    if args.server:
        _check_server_args(args)
        return
    for flag, value in (
        ("--baseline", args.baseline),
        ("--api-key", args.api_key),
        ("--timeout", args.timeout),
    ):
        if value is not None:
            raise InvalidSettingError(f"{flag} goes with --server, and there is none")
    for flag, value in (("--target", args.target), ("--draft", args.draft)):
        if not value:
            raise InvalidSettingError(f"{flag} is required (or bench servers with --server URL)")
    _check_drafts(args)
    _check_outputs(args)


def _header_safe(text: str) -> bool:
    return bool(text) and all("!" <= c <= "~" for c in text)


def _check_server_args(args: argparse.Namespace) -> None:
    for dest in LOCAL_ONLY:
        if getattr(args, dest) != args.local_defaults[dest]:
            flag = "--" + dest.replace("_", "-")
            why = (
                "a server bench writes its report with --json only"
                if dest in ("csv", "plot")
                else "each server runs the models it loaded, as it was started"
            )
            raise InvalidSettingError(f"{flag} does not go with --server ({why})")
    for value in args.server:
        check_utf8("--server", value)  # its label goes into the JSON report
    if args.api_key is not None and not _header_safe(args.api_key):
        # It goes in an HTTP header, which holds printable ASCII only.
        raise InvalidSettingError("--api-key must be printable ASCII with no spaces")
    args.endpoints = [parse_endpoint(value, args.api_key) for value in args.server]
    check_servers(args.endpoints, args.baseline)
    check_output_file(args.json, "--json")
    _check_distinct_outputs(args, [("--json", args.json)])


def _check_drafts(args: argparse.Namespace) -> None:
    check_worker_keys(args)
    # --suffix off and --draft-rpc act on draft models; with none among the drafts they would
    # be silently ignored. With one, `--suffix on,off` compares both, as it should.
    if not all(is_suffix_draft(d) for d in args.draft):
        return
    if False in args.suffix:
        raise InvalidSettingError(
            f"--suffix off needs a draft model among --draft ({_MODEL_DRAFTS})"
        )
    if draft_endpoints(args):
        raise InvalidSettingError(
            f"--draft-rpc needs a draft model among --draft ({_MODEL_DRAFTS})"
        )


def _check_outputs(args: argparse.Namespace) -> None:
    # Fail before minutes of measuring, not after.
    for flag in ("--json", "--csv", "--plot"):
        check_output_file(getattr(args, flag[2:]), flag)
    _check_distinct_outputs(args, [(flag, getattr(args, flag[2:])) for flag in _OUTPUTS])
    if args.plot is not None:
        extension = args.plot.suffix.lower().removeprefix(".")
        formats = plot_formats()
        if extension not in formats:
            raise InvalidSettingError(
                f"--plot {args.plot}: end the file name in a chart format: .{', .'.join(formats)}"
            )


_OUTPUTS = ("--json", "--csv", "--plot")


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: equal once resolved, or (existing) one inode, as a
    hard link or a bind mount makes them."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return False


def _check_distinct_outputs(
    args: argparse.Namespace, outputs: list[tuple[str, Path | None]]
) -> None:
    """Refuse output files that name one another or an input: the last write would leave one
    report in place of the other, or overwrite the prompts or a model the user gave."""
    named = [(flag, path) for flag, path in outputs if path is not None]
    inputs: list[tuple[str, Path]] = []
    if not is_builtin(args.prompts):
        inputs.append(("--prompts", Path(args.prompts)))
    for flag, values in (("--target", [args.target]), ("--draft", args.draft or [])):
        inputs += [(flag, Path(v)) for v in values if v and Path(v).is_file()]
    for i, (flag, path) in enumerate(named):
        for other, other_path in [*named[:i], *inputs]:
            if _same_file(path, other_path):
                raise InvalidSettingError(
                    f"{flag} {path} is the same file as {other}; name another file"
                )
