"""`specchat`: the window with no arguments; `generate`, `bench`, `serve`, `worker` and `models`
headless.

User errors end as one `error: ...` line on stderr, never a traceback; only real bugs show one.
Exit status 2 means the command line itself is wrong (an unknown flag, a value out of range,
flags that contradict each other), checked before anything loads, the same way in every
sub-command; 1 means a file, a model or the machine refused; 130/143 mean SIGINT/SIGTERM (which
stop a running `serve` or `worker` the normal way, with 0).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, cast

from app.cli.args import (
    add_generation_arguments,
    check_draft_args,
    check_model_args,
    check_utf8,
    draft_source,
    generation_from_args,
    user_file,
)
from app.cli.loading import load_runtime, placement_json
from app.cli.output import StdoutError, silence_stdout, worded_stdout, write_stdout
from app.cli.report import print_error
from app.cli.rpc_options import add_rpc_arguments, uses_rpc
from app.cli.signals import Interrupted, interrupt_on_signals, stop_on_signals
from app.engine.chat_template import ChatMessage
from app.engine.config import MAX_PROMPT_FILE_BYTES, GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import FinishEvent, NoticeEvent, TokenEvent
from app.engine.job_driver import Job, job_events
from app.engine.result import GenerationResult
from app.errors import InvalidSettingError, RpcWorkerLostError, SpecChatError, user_message
from app.llama.facts import ModelFacts
from app.metrics.sources import accepted_by_source
from app.text_files import MIB, read_text_file
from app.version import app_version
from models.probe import PROBE_FLAG


class _HelpFormatter(argparse.HelpFormatter):
    """Appends each flag's default to its help, unless the help already names it or the
    default is "not set" (None, False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        # 0.0 == False: use `is`. An empty list or tuple (--rpc) is "none", not a Python repr.
        unset = (
            default is None
            or default is False
            or (isinstance(default, list | tuple) and not default)
        )
        if "default" in text or unset or action.default == argparse.SUPPRESS:
            return text
        return f"{text} (default: %(default)s)" if action.option_strings else text


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad flags in the same one-line `error:` form as everything else,
    and whose --help shows every default."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


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
    add_generation_arguments(gen)
    wrap = gen.add_mutually_exclusive_group()
    wrap.add_argument(
        "--raw",
        action="store_true",
        help="complete the prompt as plain text instead of sending it as a chat message",
    )
    # The default since chat became it; kept so that existing command lines still work.
    wrap.add_argument("--chat", action="store_true", help=argparse.SUPPRESS)
    gen.add_argument("--system", default=None, help="system message (not with --raw)")
    source = gen.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="the prompt text")
    source.add_argument(
        "--prompt-file",
        type=_prompt_file,
        help=f"read the prompt from a UTF-8 file, or - for standard input (at most "
        f"{MAX_PROMPT_FILE_BYTES // 2**20} MiB)",
    )
    gen.add_argument("--json", action="store_true", help="print one JSON object")
    add_rpc_arguments(gen)
    gen.set_defaults(check=check_generate_args)

    _register_optional(commands)
    return parser


def _register_optional(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Sub-command modules register themselves; each owns its flags and handler.
    from app.cli import bench as bench_cli  # noqa: PLC0415
    from app.cli import serve as serve_cli  # noqa: PLC0415
    from app.cli import worker as worker_cli  # noqa: PLC0415
    from models import cli as models_cli  # noqa: PLC0415

    bench_cli.register(commands)
    serve_cli.register(commands)
    models_cli.register(commands)
    worker_cli.register(commands)


def check_generate_args(args: argparse.Namespace) -> None:
    check_model_args(args)
    check_draft_args(args)
    generation_from_args(args, args.gamma).validate()
    if args.system is not None and args.raw:
        raise InvalidSettingError("--system does not go with --raw (it is a chat turn)")
    if args.prompt is not None and not args.prompt.strip():
        raise InvalidSettingError("--prompt is empty")
    for flag, text in (("--prompt", args.prompt), ("--system", args.system)):
        if text is not None:
            check_utf8(flag, text)


# `--prompt-file -`: the prompt comes from standard input, as pipes expect.
STDIN = "-"


def _prompt_file(value: str) -> Path | str:
    return STDIN if value == STDIN else user_file(value)


def _read_prompt(args: argparse.Namespace) -> str:
    if args.prompt is not None:
        return str(args.prompt)
    path: Path | str = args.prompt_file
    if path == STDIN:
        name = "standard input"
        if sys.stdin is None:  # started with standard input closed (`<&-`)
            raise InvalidSettingError("standard input is closed; give --prompt-file a file")
        try:
            data = sys.stdin.buffer.read(MAX_PROMPT_FILE_BYTES + 1)
        except OSError as exc:
            raise InvalidSettingError(f"cannot read {name}: {exc.strerror}") from None
        if len(data) > MAX_PROMPT_FILE_BYTES:
            raise InvalidSettingError(f"{name} is larger than {MAX_PROMPT_FILE_BYTES // MIB} MiB")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidSettingError(f"{name} is not UTF-8 text (byte {exc.start})") from None
    else:
        name = f"prompt file {path}"
        text = read_text_file(Path(path), name=name, limit=MAX_PROMPT_FILE_BYTES)
    if not text.strip():
        raise InvalidSettingError(f"{name} is empty")
    return text


def run_generate(args: argparse.Namespace) -> int:
    config = generation_from_args(args, args.gamma)  # checked by check_generate_args
    prompt = _read_prompt(args)
    facts: list[ModelFacts] = []
    runtime = load_runtime(args, draft_source(args), facts)
    reply: list[str] = []
    try:
        control = GenerationControl()
        _prompt_ids, events = job_events(runtime, _job(args, config, prompt), control)
        result: GenerationResult | None = None
        try:
            with stop_on_signals(control) as caught:
                for event in events:
                    if isinstance(event, TokenEvent):
                        reply.append(event.text)
                    _show(event, args)
                    if isinstance(event, FinishEvent):
                        result = event.result
        except RpcWorkerLostError as exc:
            # The reply so far stays: on the terminal already, or in the JSON object.
            text = "".join(reply)
            partial = {"text": text, "finish_reason": "error", "error": user_message(exc)}
            write_stdout((json.dumps(partial, ensure_ascii=False) if args.json else "") + "\n")
            raise
        assert result is not None
        if args.json:
            out = result.to_json()
            # Plain decoding (--no-spec, --draft none) asks for no γ, whatever the default is.
            plain = draft_source(args) is None
            out["stats"]["gamma_setting"] = "off" if plain else str(config.gamma)
            if uses_rpc(args):
                out["devices"] = placement_json(facts)
            write_stdout(json.dumps(out, ensure_ascii=False) + "\n")
        else:
            write_stdout("\n")
            print(format_stats_line(result), file=sys.stderr)
    finally:
        runtime.close()
    # A signal stopped the reply: what was generated is printed, and the exit says why.
    return 128 + caught.signum if caught.signum else 0


def _job(args: argparse.Namespace, config: GenerationConfig, prompt: str) -> Job:
    """The prompt as one user turn under the target's chat template, or as raw text."""
    if args.raw:
        return Job(config, prompt=prompt)
    turns: list[ChatMessage] = [{"role": "system", "content": args.system}] if args.system else []
    turns.append({"role": "user", "content": prompt})
    return Job(config, messages=tuple(turns))


def _show(event: object, args: argparse.Namespace) -> None:
    if isinstance(event, TokenEvent) and not args.json:
        write_stdout(event.text)
    elif isinstance(event, NoticeEvent):
        print(f"note: {event.message}", file=sys.stderr)


def format_stats_line(result: GenerationResult) -> str:
    s = result.stats
    parts = [f"mode {result.mode}", f"{s.generated_tokens} tokens"]
    if s.tokens_per_second is not None:
        parts.append(f"{s.tokens_per_second:.1f} tok/s")
    if s.acceptance_rate is not None:
        parts.append(f"acceptance {s.acceptance_rate:.1%} ({s.accepted}/{s.drafted})")
        by_source = accepted_by_source({**s.to_dict(), "mode": result.mode})
        if by_source:
            parts.append(by_source)
    if s.tokens_per_round is not None:
        parts.append(f"{s.tokens_per_round:.2f} tokens/round")
    if s.ttft_s is not None:
        parts.append(f"TTFT {s.ttft_s * 1000:.0f} ms")
    parts.append(f"finish {result.finish_reason}")
    return " · ".join(parts)


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    try:
        return parser.parse_args(argv)
    except SystemExit:
        # --help and --version print, then exit: their text must fail here, in words, rather
        # than be lost in the interpreter's final flush.
        sys.stdout.flush()
        raise


def main(argv: Sequence[str] | None = None) -> int:
    # A frozen bundle re-runs this executable for spawned helper processes (the window's
    # catalog helper); this hands those over to multiprocessing instead of starting the app.
    multiprocessing.freeze_support()
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 2 and argv[0] == PROBE_FLAG:
        # The model load check's child (models/probe.py) when there is no `python -m`.
        from models.probe import probe_child  # noqa: PLC0415

        return probe_child(argv[1])
    parser = build_parser()
    if not argv:
        from ui.main import run_app  # noqa: PLC0415 - Qt only when the window is wanted

        return run_app()
    try:
        with worded_stdout():
            args = _parse(parser, argv)
            handler = {"generate": run_generate}.get(args.command) or getattr(args, "handler", None)
            if handler is None:
                parser.print_help()
                sys.stdout.flush()
                return 2
    except StdoutError as exc:
        print_error(exc)
        silence_stdout()
        return 1
    except BrokenPipeError:  # `specchat --help | head -0`: the reader went away, not an error
        silence_stdout()
        return 141
    check = getattr(args, "check", None)
    try:
        if check is not None:
            check(args)  # a bad flag must not cost a model load
    except InvalidSettingError as exc:
        command = " ".join(filter(None, (args.command, getattr(args, "models_command", None))))
        print_error(exc, f" (see specchat {command} --help)")
        return 2
    except SpecChatError as exc:  # the machine refusing while a flag was checked (data folder)
        print_error(exc)
        return 1
    try:
        with interrupt_on_signals(), worded_stdout():
            code = int(handler(args))
            sys.stdout.flush()  # what print() left in the buffer fails here, in words
            return code
    except StdoutError as exc:
        print_error(exc)
        silence_stdout()  # the unwritten rest would fail again in the final flush
        return 1
    except SpecChatError as exc:
        print_error(exc)
        return 1
    except BrokenPipeError:
        # The reader went away (`specchat generate ... | head`): not an error worth a traceback.
        # Point stdout at nothing so the interpreter's final flush does not fail again.
        silence_stdout()
        return 141
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Interrupted as exc:
        print("error: interrupted", file=sys.stderr)
        return 128 + exc.signum


if __name__ == "__main__":
    sys.exit(main())
