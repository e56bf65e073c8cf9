"""Flags and settings the sub-commands share: model files, sampling, the demo models.

Its own module so that sub-command modules (bench) and the main parser import it, not each
other.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from app.cli.output import STANDARD_OUTPUT
from app.cli.rpc_options import check_worker_keys
from app.engine.chat_template import render_chat
from app.engine.config import MAX_SEED, GenerationConfig, SamplingConfig, check_model_config
from app.engine.gamma import DEFAULT_GAMMA_SETTING, GAMMA_HELP, GammaSetting, parse_gamma
from app.errors import InvalidSettingError, user_message
from app.llama.config import DEFAULT_PROMPT_CACHE_MIB, FLASH_ATTENTION_CHOICES, ModelConfig
from app.text_files import MIB, read_text_file

DEMO = "demo"
# `--draft` spellings besides a GGUF path and `demo`, the same in every sub-command.
DRAFT_SUFFIX = "suffix"  # draft from what the conversation already holds, no draft model
DRAFT_NONE = "none"  # plain decoding
_DRAFT_ALIASES = {"ngram": DRAFT_SUFFIX}
_DRAFT_NAMES = frozenset({DEMO, DRAFT_SUFFIX, DRAFT_NONE, *_DRAFT_ALIASES})
DRAFT_HELP = (
    f"draft GGUF file, '{DEMO}' (the bundled Q4_1 draft), '{DRAFT_SUFFIX}' (the chat's own text, "
    f"no draft model; 'ngram' is another name for it) or '{DRAFT_NONE}' (plain decoding)"
)


def check_utf8(flag: str, text: str) -> None:
    """Python reads bytes of the command line that are not UTF-8 as lone surrogates, which no
    tokenizer or hash takes: refuse them in words, as a prompt file's are."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        byte = len(os.fsencode(text[: exc.start]))
        raise InvalidSettingError(f"{flag} is not UTF-8 text (byte {byte})") from None


def user_path(value: str) -> str:
    """A file path as typed, with ~ expanded (the shell leaves `--flag=~/x` alone) and made
    absolute, here where flags are read: every process that opens it then reads the same file,
    the model load check's child included, which runs in another folder."""
    if not value.strip():
        # Path("") is the current folder: an unset shell variable would write there unasked.
        raise argparse.ArgumentTypeError("an empty path; name a file or folder")
    try:
        return str(Path(value).expanduser().absolute())
    except RuntimeError:  # `~name` of a user this machine does not know
        raise argparse.ArgumentTypeError(f"cannot find the home folder in {value!r}") from None


def user_file(value: str) -> Path:
    """user_path for flags read as a Path (--prompt-file, bench's output files, ...)."""
    return Path(user_path(value))


def output_file(value: str) -> Path:
    """An output flag (bench's --json, --csv): a file, or `-` for stdout (./- is the file)."""
    return STANDARD_OUTPUT if value == str(STANDARD_OUTPUT) else user_file(value)


def target_value(value: str) -> str:
    """`--target`: a GGUF path, or `demo`."""
    return value if value == DEMO else user_path(value)


def draft_value(value: str) -> str:
    """`--draft`: a GGUF path, or one of the names that are no file (demo, suffix, ...)."""
    return value if value in _DRAFT_NAMES else user_path(value)


def add_draft_argument(parser: argparse.ArgumentParser) -> None:
    """`--draft` and its synonym `--no-spec` (= `--draft none`); with neither, the reply drafts
    from the chat's own text. `--suffix off` keeps a draft model from drafting with it."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--draft", type=draft_value, default=DRAFT_SUFFIX, help=DRAFT_HELP)
    group.add_argument(
        "--no-spec", action="store_true", help=f"plain decoding (= --draft {DRAFT_NONE})"
    )
    parser.add_argument(
        "--suffix",
        choices=("on", "off"),
        default="on",
        help="with a draft model, draft from the chat's own text too, whichever pays more "
        "each round",
    )


def draft_source(args: argparse.Namespace) -> str | None:
    """What the flags ask to draft from: a GGUF path or `demo`, DRAFT_SUFFIX, or None (plain)."""
    if args.no_spec:
        return None
    value = _DRAFT_ALIASES.get(args.draft, args.draft)
    return None if value == DRAFT_NONE else str(value)


def add_model_arguments(parser: argparse.ArgumentParser, *, target_required: bool = True) -> None:
    """Model flags; a command that can run without a local model (`bench --server`) checks
    `--target` itself."""
    parser.add_argument(
        "--target",
        type=target_value,
        required=target_required,
        help="target GGUF file, or 'demo' for the bundled SmolLM2 F32 demo target",
    )
    parser.add_argument(
        "--n-ctx",
        type=int,
        default=4096,
        help="context size in tokens (llama.cpp rounds it up to a multiple of 256)",
    )
    parser.add_argument(
        "--n-gpu-layers", type=int, default=-1, help="target layers on the GPU (-1 = all)"
    )
    parser.add_argument(
        "--draft-n-gpu-layers", type=int, default=-1, help="draft layers on the GPU (-1 = all)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads per model (default: automatic, see docs/threads.md)",
    )
    parser.add_argument(
        "--flash-attn",
        choices=FLASH_ATTENTION_CHOICES,
        default="auto",
        help="llama.cpp's flash attention for both models (auto: off for a model in host "
        "memory, where it slows verification a few turns deep; docs/benchmarks.md)",
    )
    parser.add_argument(
        "--prompt-cache",
        type=int,
        default=DEFAULT_PROMPT_CACHE_MIB,
        metavar="MIB",
        help="host memory for earlier conversations' KV cache states, so a prompt that comes "
        "back is restored rather than re-read (as llama-server's --cache-ram); 0 = none",
    )
    parser.add_argument(
        "--chat-template-file",
        type=user_path,
        metavar="PATH",
        help="Jinja chat template to use instead of the target file's own (as llama-server's)",
    )


# The sampling flags, each named after the SamplingConfig field it sets (`--top-k`: top_k) and
# defaulting to that field's default, so the CLI and the engine cannot disagree on what "off" is.
_SAMPLING_FLAGS: tuple[tuple[str, type[float] | type[int], str], ...] = (
    ("temperature", float, "0 = greedy"),
    ("top_k", int, "0 = off"),
    ("top_p", float, "nucleus sampling; 1 = off, 0 = the most likely token only"),
    ("min_p", float, "0 = off"),
    ("repeat_penalty", float, "1 = off"),
    (
        "seed",
        int,
        f"0..{MAX_SEED} for a reproducible sampled reply (default: random); with a draft "
        "model under --gamma auto, rounds follow measured times: the same distribution, not "
        "always the same text",
    ),
)


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = SamplingConfig()
    for name, kind, help_text in _SAMPLING_FLAGS:
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=kind,
            default=getattr(defaults, name),
            help=help_text,
        )
    parser.add_argument("--max-tokens", type=int, default=256, help="longest reply in tokens")
    parser.add_argument(
        "--p-min",
        type=float,
        default=0.0,
        help="stop drafting when the draft's top probability falls below this",
    )
    parser.add_argument(
        "--exact",
        action="store_true",
        help="bit-exact greedy: plain steps use the same kernels as verification, so "
        "speculation cannot change the reply (plain steps 1.2-1.4x slower on a CPU)",
    )


def check_model_args(args: argparse.Namespace) -> None:
    """Flag values every model-loading command shares, checked before anything loads."""
    for gpu_layers in (args.n_gpu_layers, args.draft_n_gpu_layers):
        check_model_config(
            ModelConfig(
                "",
                args.n_ctx,
                gpu_layers,
                n_threads=args.threads,
                prompt_cache_mib=args.prompt_cache,
            )
        )


def check_draft_args(args: argparse.Namespace) -> None:
    """Draft flags that contradict each other, for the commands with one draft (generate,
    serve); bench, which compares several, checks its own."""
    check_worker_keys(args)
    source = draft_source(args)
    if source is None and args.gamma.kind == "fixed":
        plain = "--no-spec" if args.no_spec else f"--draft {DRAFT_NONE}"
        raise InvalidSettingError(
            f"--gamma {args.gamma} does not go with {plain}: plain decoding drafts nothing"
        )
    if source in (None, DRAFT_SUFFIX):
        # --suffix off only keeps a draft model from drafting with the chat's text beside it;
        # without one it would be ignored, or leave nothing to draft from.
        if args.suffix == "off":
            raise InvalidSettingError(
                f"--suffix off needs a draft model (--draft PATH or {DEMO}) to draft "
                "without the chat's own text"
            )
        if getattr(args, "draft_rpc", ()):
            raise InvalidSettingError(
                f"--draft-rpc needs a draft model (--draft PATH or {DEMO}) to place on the workers"
            )


def resolve_model_path(value: str, *, role: str) -> str:
    """The file a --target/--draft value names, checked to load without crashing llama.cpp."""
    from models.probe import ensure_loadable  # noqa: PLC0415

    if value != DEMO:
        ensure_loadable(value)  # a file that would crash llama.cpp is refused here, in words
        return value
    from models.demo import ensure_demo_models  # noqa: PLC0415

    demo = ensure_demo_models(progress=_progress_printer())
    path = demo.f32 if role == "target" else demo.q4_1
    ensure_loadable(path)
    return str(path)


# Chat templates run to a few KiB (the largest, with tool calling, some tens of KiB).
MAX_TEMPLATE_BYTES = MIB


def chat_template_file(args: argparse.Namespace) -> str | None:
    """`--chat-template-file`'s template, read and tried on a one-line chat before any model
    loads; None when the flag is not given."""
    path = getattr(args, "chat_template_file", None)
    if path is None:
        return None
    template = read_text_file(
        Path(path), name=f"--chat-template-file {path}", limit=MAX_TEMPLATE_BYTES
    )
    if not template.strip():
        # An empty template reads as none given: the model file's own would run unasked.
        raise InvalidSettingError(f"--chat-template-file {path}: the file is empty")
    try:
        render_chat(template, [{"role": "user", "content": "hi"}])
    except InvalidSettingError as exc:
        raise InvalidSettingError(f"--chat-template-file {path}: {exc}") from None
    return template


def _progress_printer() -> Callable[[int, int, str], None]:
    """Progress as lines on stderr, each once: a file's last poll and its end report the same
    size, which read as a stutter."""
    last = ""

    def show(done: int, total: int, message: str) -> None:
        nonlocal last
        line = f"[{100 * done // max(total, 1):3d}%] {message}"
        if line != last:
            print(line, file=sys.stderr)
            last = line

    return show


def sampling_from_args(args: argparse.Namespace) -> SamplingConfig:
    return SamplingConfig(**{name: getattr(args, name) for name, _kind, _help in _SAMPLING_FLAGS})


def generation_from_args(args: argparse.Namespace, gamma: GammaSetting) -> GenerationConfig:
    return GenerationConfig(
        max_tokens=args.max_tokens,
        gamma=gamma,
        p_min=args.p_min,
        sampling=sampling_from_args(args),
        exact=args.exact,
    )


def gamma_value(value: str) -> GammaSetting:
    try:
        return parse_gamma(value)
    except InvalidSettingError as exc:
        raise argparse.ArgumentTypeError(user_message(exc)) from None


def add_gamma_argument(parser: argparse.ArgumentParser) -> None:
    """`--gamma`, spelled and defaulted the same in every sub-command."""
    parser.add_argument(
        "--gamma",
        type=gamma_value,
        default=DEFAULT_GAMMA_SETTING,
        help=f"draft length: {GAMMA_HELP}",
    )


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    """Everything a command that loads a target and a draft and generates with them takes:
    the model files, the draft, γ and sampling, in that order in --help."""
    add_model_arguments(parser)
    add_draft_argument(parser)
    add_gamma_argument(parser)
    add_sampling_arguments(parser)
