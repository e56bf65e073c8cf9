"""Server overhead: tokens/s through `specchat serve` against the same engine in-process.

`python -m app.cli.bench_server --target PATH|demo [--draft PATH|demo|suffix|none]
[--gamma auto|off|N] [--prompts builtin|builtin:CLASS,...|FILE] [--max-tokens N] [--repeat R]
[--exact] [--json OUT]`
(scripts/bench-server runs it).

For each prompt, interleaved so drift in machine load hits both sides alike: one reply from a
Runtime in this process (what `specchat generate` runs, without its process start and model
load), then the same request through a `specchat serve` subprocess with the same flags. Both
sides are timed the same way, from the request to the last token, prompt processing included;
the ratio of total tokens over total seconds is the server's share of the engine's speed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.bench.plan import check_repeats
from app.bench.prompts import BenchPrompt, load_prompts
from app.cli.args import (
    DRAFT_SUFFIX,
    add_generation_arguments,
    draft_source,
    generation_from_args,
    resolve_model_path,
)
from app.cli.loading import load_runtime
from app.cli.output import (
    STANDARD_OUTPUT,
    StdoutError,
    check_output_file,
    silence_stdout,
    worded_stdout,
    write_output_file,
    write_stdout,
)
from app.cli.report import print_error
from app.engine.config import GenerationConfig
from app.engine.events import FinishEvent
from app.engine.session import EngineSession
from app.errors import InvalidSettingError, SpecChatError
from app.leftovers import scratch_dir

_READY = re.compile(r"at http://127\.0\.0\.1:(\d+)/v1")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench-server",
        description="Tokens/s through `specchat serve` against the same engine in-process.",
    )
    add_generation_arguments(parser)
    parser.add_argument("--prompts", default="builtin", help="builtin, builtin:CLASS,... or FILE")
    parser.add_argument("--repeat", type=int, default=1, help="replies per prompt and side")
    parser.add_argument("--json", type=Path, default=None, help="also write the report here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        # Before the models load and the server starts, as `specchat bench` checks its files.
        check_output_file(args.json, "--json")
        report = run(args)
        text = json.dumps(report, indent=2)
        # The file first: a reader of stdout that went away must not cost the report.
        if args.json not in (None, STANDARD_OUTPUT):  # stdout has it anyway
            write_output_file(args.json, text + "\n", "--json")
        with worded_stdout():
            write_stdout(text + "\n")
    except StdoutError as exc:
        print_error(exc)
        silence_stdout()  # the unwritten rest would fail again in the final flush
        return 1
    except InvalidSettingError as exc:  # a setting, as `specchat bench` answers it
        print_error(exc)
        return 2
    except SpecChatError as exc:
        print_error(exc)
        return 1
    return 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    config = generation_from_args(args, args.gamma)
    config.validate()
    check_repeats(args.repeat)
    prompts = load_prompts(args.prompts)
    # Resolve `demo` once, so both sides load the very same files.
    args.target = resolve_model_path(args.target, role="target")
    draft = draft_source(args)
    if draft not in (None, DRAFT_SUFFIX):
        draft = resolve_model_path(draft, role="draft")
    args.draft, args.no_spec = draft or "none", False
    runtime = load_runtime(args, draft)
    rows: list[dict[str, Any]] = []
    # The server's log: a folder a later run removes if this one is killed before it can.
    with scratch_dir("benchserver") as folder, _Server(args, Path(folder)) as server:
        for prompt in prompts:
            for _ in range(args.repeat):
                local_n, local_s = _in_process(runtime, prompt, config)
                served_n, served_s = server.complete(prompt)
                rows.append(
                    {
                        "prompt": f"{prompt.prompt_class}/{prompt.name}",
                        "generate_tokens": local_n,
                        "generate_s": local_s,
                        "server_tokens": served_n,
                        "server_s": served_s,
                    }
                )
    runtime.close()
    local = sum(r["generate_tokens"] for r in rows) / sum(r["generate_s"] for r in rows)
    served = sum(r["server_tokens"] for r in rows) / sum(r["server_s"] for r in rows)
    return {
        "settings": {
            "target": args.target,
            "draft": args.draft,
            "gamma_setting": str(args.gamma),
            "max_tokens": args.max_tokens,
            "exact": args.exact,
            "threads": args.threads,
        },
        "generate_tokens_per_s": local,
        "server_tokens_per_s": served,
        "server_over_generate": served / local,
        "rows": rows,
    }


def _in_process(
    runtime: EngineSession, prompt: BenchPrompt, config: GenerationConfig
) -> tuple[int, float]:
    start = time.perf_counter()
    ids = (
        runtime.chat_prompt([{"role": "user", "content": prompt.text}])
        if prompt.chat
        else runtime.text_prompt(prompt.text)
    )
    for event in runtime.generate(ids, config):
        if isinstance(event, FinishEvent):
            return event.result.stats.generated_tokens, time.perf_counter() - start
    raise AssertionError("a generation always ends with a FinishEvent")


class _Server:
    """A `specchat serve` subprocess with the benchmark's model flags, on a free local port."""

    def __init__(self, args: argparse.Namespace, folder: Path) -> None:
        self._args = args
        self._log = folder / "server.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def __enter__(self) -> _Server:
        a = self._args
        command = [sys.executable, "-m", "app.cli", "serve", "--target", a.target, "--port", "0"]
        command += ["--n-ctx", str(a.n_ctx), "--gamma", str(a.gamma), "--max-tokens"]
        command += [str(a.max_tokens), "--temperature", str(a.temperature)]
        command += ["--p-min", str(a.p_min)]
        command += ["--n-gpu-layers", str(a.n_gpu_layers)]
        command += ["--draft-n-gpu-layers", str(a.draft_n_gpu_layers)]
        command += ["--draft", a.draft]
        if a.threads is not None:
            command += ["--threads", str(a.threads)]
        if a.exact:
            command.append("--exact")
        with self._log.open("wb") as log:
            self._proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            found = _READY.search(self._log.read_text(errors="replace"))
            if found:
                self.port = int(found.group(1))
                return self
            if self._proc.poll() is not None:
                break
            time.sleep(0.2)
        self.__exit__()
        raise InvalidSettingError(f"the server did not start: {self._log.read_text().strip()}")

    def __exit__(self, *_exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=60)

    def complete(self, prompt: BenchPrompt) -> tuple[int, float]:
        if prompt.chat:
            path = "/v1/chat/completions"
            body: dict[str, Any] = {"messages": [{"role": "user", "content": prompt.text}]}
        else:
            path, body = "/v1/completions", {"prompt": prompt.text}
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        start = time.perf_counter()
        try:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            response = conn.getresponse()
            payload = json.loads(response.read())
        finally:
            conn.close()
        seconds = time.perf_counter() - start
        if response.status != 200:
            raise InvalidSettingError(f"the server refused a prompt: {payload}")
        return int(payload["usage"]["completion_tokens"]), seconds


if __name__ == "__main__":
    sys.exit(main())
