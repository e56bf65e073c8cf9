"""llama.cpp's llama-server beside `specchat serve` on the demo models (scripts/llama-server-compare
builds llama-server and runs this).

Every server is started on 127.0.0.1 with the same threads and context size, then one
`specchat bench --server` run benches them all, interleaved prompt by prompt; the bench sends
one request at a time, so no two servers ever decode at once. llama-server runs with its own
defaults for each speculative type (llama.cpp's common/common.h: ngram-mod drafts 48-64 tokens
after a 24-token match, a draft model drafts up to 3); SpecChat runs its defaults (suffix index,
γ auto), and plain (`--draft none`), which tells its plain decoding through the server apart
from what speculation adds. The report is the bench's JSON plus each server's command line.
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from app.llama.config import FLASH_ATTENTION_CHOICES
from scripts.llama_tools_compare import add_run_arguments, no_repack

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PROMPTS = "builtin:copy,revision,asked-again,chat"
START_TIMEOUT_S = 300.0


@dataclass(frozen=True, slots=True)
class ServerSpec:
    label: str
    command: list[str]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llama-server-compare",
        description="llama-server (plain, ngram-mod, ngram-simple, ngram-mod + draft model) and "
        "specchat serve (plain; suffix index; with the draft model) on the demo models, through "
        "one `specchat bench --server` run.",
    )
    parser.add_argument("--llama-server", type=Path, required=True, help="the llama-server binary")
    add_run_arguments(parser, prompts=DEFAULT_PROMPTS, repeat=1)
    parser.add_argument("--threads", type=int, default=2, help="threads of every server")
    parser.add_argument("--ctx-size", type=int, default=4096, help="context of every server")
    parser.add_argument(
        "--only", default=None, metavar="LABEL[,LABEL]", help="start only these servers"
    )
    parser.add_argument(
        "--llama-flash-attn",
        choices=("on", "off", "auto"),
        default="auto",
        help="llama-server's flash attention (its default: auto, on for the CPU backend; "
        "SpecChat keeps it off for a model held in host memory)",
    )
    parser.add_argument(
        "--specchat-flash-attn",
        choices=FLASH_ATTENTION_CHOICES,
        default="auto",
        help="specchat serve's --flash-attn",
    )
    return parser


def server_specs(args: argparse.Namespace, target: Path, draft: Path) -> list[ServerSpec]:
    threads, ctx = str(args.threads), str(args.ctx_size)
    llama = [str(args.llama_server), "-m", str(target), "--host", "127.0.0.1", "-c", ctx]
    # One slot, as SpecChat serves one request at a time; no web UI to serve.
    llama += ["-t", threads, "-tb", threads, "-np", "1", "--no-webui", *no_repack()]
    llama += ["-fa", args.llama_flash_attn]
    with_draft = ["-md", str(draft), "-td", threads, "-tbd", threads]
    specchat = [sys.executable, "-m", "app.cli", "serve", "--target", str(target)]
    specchat += ["--threads", threads, "--n-ctx", ctx, "--max-tokens", str(args.max_tokens)]
    specchat += ["--flash-attn", args.specchat_flash_attn]
    return [
        ServerSpec("llama plain", llama),
        ServerSpec("llama ngram-mod", [*llama, "--spec-type", "ngram-mod"]),
        ServerSpec("llama ngram-simple", [*llama, "--spec-type", "ngram-simple"]),
        ServerSpec(
            "llama ngram-mod+draft", [*llama, "--spec-type", "ngram-mod,draft-simple", *with_draft]
        ),
        ServerSpec("specchat plain", [*specchat, "--draft", "none"]),
        ServerSpec("specchat suffix", [*specchat, "--draft", "suffix"]),
        ServerSpec("specchat hybrid", [*specchat, "--draft", str(draft)]),
    ]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


@contextmanager
def running(spec: ServerSpec, logs: Path) -> Iterator[int]:
    """The server started on a free port and answering /health; stopped on the way out."""
    port = _free_port()
    log = logs / (spec.label.replace(" ", "_").replace("+", "_") + ".log")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*spec.command, "--port", str(port)], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _healthy(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace").strip().splitlines()[-5:]
                raise SystemExit(f"error: {spec.label} did not start:\n" + "\n".join(tail))
            time.sleep(0.5)
        print(f"{spec.label}: ready on port {port} (log {log})", file=sys.stderr)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds `running`, so no server outlives this script


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if not args.llama_server.is_file():
        print(f"error: no llama-server at {args.llama_server}", file=sys.stderr)
        return 1
    from models.demo import ensure_demo_models  # noqa: PLC0415 - after the flags are checked

    demo = ensure_demo_models(folder=args.models_dir)
    specs = server_specs(args, demo.f32, demo.q4_1)
    if args.only:
        wanted = {label.strip() for label in args.only.split(",")}
        specs = [s for s in specs if s.label in wanted]
    logs = Path(tempfile.mkdtemp(prefix="llama-server-compare-"))
    with ExitStack() as stack:
        ports = [stack.enter_context(running(spec, logs)) for spec in specs]
        bench = [sys.executable, "-m", "app.cli", "bench", "--prompts", args.prompts]
        bench += ["--max-tokens", str(args.max_tokens), "--repeat", str(args.repeat)]
        bench += ["--temperature", "0", "--json", str(args.json)]
        for spec, port in zip(specs, ports, strict=True):
            bench += ["--server", f"{spec.label}=http://127.0.0.1:{port}"]
        status = subprocess.run(bench, cwd=ROOT, check=False).returncode
    if status != 0:
        return status
    report = json.loads(args.json.read_text(encoding="utf-8"))
    report["commands"] = {spec.label: spec.command for spec in specs}
    report["machine"] = {"threads_per_server": args.threads, "ctx_size": args.ctx_size}
    args.json.write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"report: {args.json} (server logs in {logs})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
