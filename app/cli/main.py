"""`specchat`: the window with no arguments; `generate`, `bench` and `models` headless.

User errors end as one `error: ...` line on stderr and exit status 1 (2 for bad flags), never a
traceback; only real bugs show one.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, cast

from app.engine.config import MAX_GAMMA, GenerationConfig, ModelConfig, SamplingConfig
from app.engine.events import FinishEvent, NoticeEvent, TokenEvent
from app.engine.result import GenerationResult
from app.engine.runtime import NGRAM, Runtime
from app.errors import InvalidSettingError, SpecChatError

DEMO = "demo"


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad flags in the same one-line `error:` form as everything else."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def _gamma(value: str) -> int | str:
    if value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {value!r}") from None


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        required=True,
        help="target GGUF file, or 'demo' for the bundled SmolLM2 F32 demo target",
    )
    parser.add_argument("--n-ctx", type=int, default=4096, help="context size in tokens")
    parser.add_argument(
        "--n-gpu-layers", type=int, default=-1, help="target layers on the GPU (-1 = all)"
    )
    parser.add_argument(
        "--draft-n-gpu-layers", type=int, default=-1, help="draft layers on the GPU (-1 = all)"
    )
    parser.add_argument("--threads", type=int, default=None, help="CPU threads per model")


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--top-k", type=int, default=0, help="0 = off")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--min-p", type=float, default=0.0)
    parser.add_argument("--repeat-penalty", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--max-tokens", type=int, default=256)
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="specchat",
        description="Offline chat with local GGUF models, sped up by speculative decoding. "
        "Run with no command to open the window.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {app_version()}")
    # Sub-parsers are _Parser too, so their flag errors are one `error:` line as well.
    commands = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", parser_class=_Parser),
    )

    gen = commands.add_parser("generate", help="generate one reply headless")
    add_model_arguments(gen)
    spec = gen.add_mutually_exclusive_group()
    spec.add_argument(
        "--draft",
        default=None,
        help="draft GGUF file, 'ngram' for prompt lookup, or 'demo' for the bundled Q4_1 draft",
    )
    spec.add_argument("--no-spec", action="store_true", help="plain decoding, no speculation")
    gen.add_argument(
        "--gamma", type=_gamma, default=5, help=f"draft length 1..{MAX_GAMMA}, or 'auto'"
    )
    add_sampling_arguments(gen)
    gen.add_argument("--chat", action="store_true", help="wrap the prompt in the chat template")
    gen.add_argument("--system", default=None, help="system message (with --chat)")
    source = gen.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt")
    source.add_argument("--prompt-file", type=Path)
    gen.add_argument("--json", action="store_true", help="print one JSON object")

    _register_optional(commands)
    return parser


def _register_optional(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Sub-command modules register themselves; each owns its flags and handler.
    from app.cli import bench as bench_cli  # noqa: PLC0415
    from models import cli as models_cli  # noqa: PLC0415

    bench_cli.register(commands)
    models_cli.register(commands)


def resolve_model_path(value: str, *, role: str) -> str:
    if value != DEMO:
        return value
    from models.demo import ensure_demo_models  # noqa: PLC0415

    demo = ensure_demo_models(progress=_progress_line)
    return str(demo.f32 if role == "target" else demo.q4_1)


def _progress_line(done: int, total: int, message: str) -> None:
    print(f"[{100 * done // max(total, 1):3d}%] {message}", file=sys.stderr)


def sampling_from_args(args: argparse.Namespace) -> SamplingConfig:
    return SamplingConfig(
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        repeat_penalty=args.repeat_penalty,
        seed=args.seed,
    )


def generation_from_args(args: argparse.Namespace, gamma: int | str) -> GenerationConfig:
    adaptive = gamma == "auto"
    return GenerationConfig(
        max_tokens=args.max_tokens,
        gamma=5 if adaptive else int(gamma),
        adaptive=adaptive,
        p_min=args.p_min,
        sampling=sampling_from_args(args),
        exact=args.exact,
    )


def load_runtime(args: argparse.Namespace, draft: str | None) -> Runtime:
    from models.compat import check_draft_file  # noqa: PLC0415 - only when generating

    runtime = Runtime(vet_draft=check_draft_file)
    try:
        runtime.load_target(
            ModelConfig(
                resolve_model_path(args.target, role="target"),
                n_ctx=args.n_ctx,
                n_gpu_layers=args.n_gpu_layers,
                n_threads=args.threads,
            )
        )
        if draft == NGRAM:
            runtime.use_prompt_lookup()
        elif draft is not None:
            runtime.load_draft(
                ModelConfig(
                    resolve_model_path(draft, role="draft"),
                    n_ctx=args.n_ctx,
                    n_gpu_layers=args.draft_n_gpu_layers,
                    n_threads=args.threads,
                )
            )
    except BaseException:
        runtime.close()
        raise
    return runtime


def _read_prompt(args: argparse.Namespace) -> str:
    if args.prompt is not None:
        return str(args.prompt)
    path: Path = args.prompt_file
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidSettingError(f"prompt file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidSettingError(f"cannot read prompt file {path}: {exc}") from None


def run_generate(args: argparse.Namespace) -> int:
    config = generation_from_args(args, args.gamma)
    config.validate()  # before loading anything: a bad flag should not cost a model load
    prompt = _read_prompt(args)
    runtime = load_runtime(args, None if args.no_spec else args.draft)
    try:
        if args.chat:
            messages = [{"role": "system", "content": args.system}] if args.system else []
            messages.append({"role": "user", "content": prompt})
            prompt_ids = runtime.chat_prompt(messages)  # type: ignore[arg-type]
        else:
            prompt_ids = runtime.text_prompt(prompt)
        result: GenerationResult | None = None
        for event in runtime.generate(prompt_ids, config, speculative=not args.no_spec):
            if isinstance(event, TokenEvent) and not args.json:
                sys.stdout.write(event.text)
                sys.stdout.flush()
            elif isinstance(event, NoticeEvent):
                print(f"note: {event.message}", file=sys.stderr)
            elif isinstance(event, FinishEvent):
                result = event.result
        assert result is not None
        if args.json:
            print(json.dumps(result.to_json(), ensure_ascii=False))
        else:
            sys.stdout.write("\n")
            print(format_stats_line(result), file=sys.stderr)
    finally:
        runtime.close()
    return 0


def format_stats_line(result: GenerationResult) -> str:
    s = result.stats
    parts = [f"mode {result.mode}", f"{s.generated_tokens} tokens"]
    if s.tokens_per_second is not None:
        parts.append(f"{s.tokens_per_second:.1f} tok/s")
    if s.acceptance_rate is not None:
        parts.append(f"acceptance {s.acceptance_rate:.1%} ({s.accepted}/{s.drafted})")
    if s.tokens_per_round is not None:
        parts.append(f"{s.tokens_per_round:.2f} tokens/round")
    if s.ttft_s is not None:
        parts.append(f"TTFT {s.ttft_s * 1000:.0f} ms")
    parts.append(f"finish {result.finish_reason}")
    return " · ".join(parts)


def app_version() -> str:
    """The installed distribution's version; a frozen bundle carries the same metadata."""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("specchat")
    except PackageNotFoundError:
        return "unknown (running from a source tree that is not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    # A frozen bundle re-runs this executable for spawned helper processes (the window's
    # catalog helper); this hands those over to multiprocessing instead of starting the app.
    multiprocessing.freeze_support()
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv:
        from ui.main import run_app  # noqa: PLC0415 - Qt only when the window is wanted

        return run_app()
    args = parser.parse_args(argv)
    handler = {"generate": run_generate}.get(args.command) or getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(args))
    except SpecChatError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
