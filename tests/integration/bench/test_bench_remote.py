"""`specchat bench --server`: streaming, timing and multi-turn order against a fake OpenAI server
written here, and the whole command against a real `specchat serve` on the demo models."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.bench.openai_stream import RemoteServerError, parse_endpoint, stream_reply
from app.bench.prompts import BenchPrompt
from app.bench.remote import RemoteBench
from app.cli.main import main
from app.engine.config import SamplingConfig
from app.errors import InvalidSettingError

pytestmark = pytest.mark.network

ROOT = Path(__file__).resolve().parents[3]
# The fake's pauses: before its first token, and between its first and last token.
FIRST_DELAY_S = 0.15
DECODE_DELAY_S = 0.25
COMPLETION_TOKENS = 5
DRAFT_N, DRAFT_ACCEPTED = 10, 7
HANG_S = 3.0


@dataclass
class FakeServer:
    """An OpenAI-style streaming server that records every request it is sent.

    Its reply to a chat is `<prefix>` plus the last user message, in two chunks; `mode` makes
    it misbehave: "refuse" (HTTP 500), "garbage" (a stream line that is not JSON),
    "cut-after-usage" (the stream ends after a chunk with the counts, before the reply does),
    "overcount" (counts that cannot hold: more accepted than drafted, more than max_tokens)."""

    prefix: str = "reply to: "
    mode: str = "ok"
    slow: float = 1.0
    # With mode "fail-at": the POST (1-based) answered with HTTP 500, the others as "ok"; with
    # "hang-at", that POST is answered with nothing for HANG_S seconds, then the connection closes.
    fail_at: int = 0
    requests: list[tuple[str, str, dict[str, Any] | None]] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def chats(self) -> list[list[dict[str, str]]]:
        return [body["messages"] for method, _p, body in self.requests if body and method == "POST"]


def _handler(fake: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

        def do_GET(self) -> None:
            fake.requests.append(("GET", self.path, None))
            fake.keys.append(self.headers.get("Authorization"))
            self._send_json(200, {"object": "list", "data": [{"id": "fake-model"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.requests.append(("POST", self.path, body))
            fake.keys.append(self.headers.get("Authorization"))
            posts = sum(1 for method, _p, _b in fake.requests if method == "POST")
            if fake.mode == "hang-at" and posts == fake.fail_at:
                time.sleep(HANG_S)
                return
            if fake.mode == "refuse" or (fake.mode == "fail-at" and posts == fake.fail_at):
                self._send_json(500, {"error": {"message": "the model is on fire"}})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            if fake.mode == "garbage":
                self._event("<html>not json</html>")
                return
            if fake.mode in _BROKEN_STREAMS:
                with contextlib.suppress(OSError):  # the client gives up first
                    _BROKEN_STREAMS[fake.mode](self)
                return
            question = body["messages"][-1]["content"]
            text = fake.prefix + question
            half = len(text) // 2
            self._event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
            time.sleep(FIRST_DELAY_S * fake.slow)
            self._event({"choices": [{"index": 0, "delta": {"content": text[:half]}}]})
            time.sleep(DECODE_DELAY_S * fake.slow)
            self._event({"choices": [{"index": 0, "delta": {"content": text[half:]}}]})
            timings = {"predicted_n": 99, "draft_n": DRAFT_N, "draft_n_accepted": DRAFT_ACCEPTED}
            usage = {"prompt_tokens": 3, "completion_tokens": COMPLETION_TOKENS}
            if fake.mode == "overcount":
                timings["draft_n_accepted"] = DRAFT_N + 2
                usage["completion_tokens"] = body["max_tokens"] + 4
            if fake.mode == "cut-after-usage":
                # Counts on a chunk of their own, then the connection closes: no finish, no [DONE].
                self._event({"choices": [], "usage": usage, "timings": timings})
                return
            self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
            self._event({"choices": [], "usage": usage, "timings": timings})
            self._event("[DONE]")

        def _event(self, payload: dict[str, Any] | str) -> None:
            data = payload if isinstance(payload, str) else json.dumps(payload)
            self.wfile.write(f"data: {data}\n\n".encode())
            self.wfile.flush()

        def _send_json(self, status: int, payload: dict[str, Any]) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


def _keep_alive_only(handler: Any) -> None:
    handler._event({"choices": [{"index": 0, "delta": {"content": "x"}}]})
    for _ in range(int(HANG_S / 0.1)):
        handler.wfile.write(b": ping\n\n")
        handler.wfile.flush()
        time.sleep(0.1)


# Streams a broken or hostile server sends (after its 200).
_BROKEN_STREAMS: dict[str, Callable[[Any], None]] = {
    "wrong-shape": lambda h: h._event({"choices": ["x"]}),
    "deep": lambda h: h._event("[" * 100_000 + "]" * 100_000),
    "huge-line": lambda h: h.wfile.write(b"data: " + b"y" * (5 * 2**20)),
    "keep-alive": _keep_alive_only,
}


@pytest.fixture
def serve_fake() -> Iterator[Any]:
    started: list[ThreadingHTTPServer] = []

    def start(**settings: Any) -> FakeServer:
        fake = FakeServer(**settings)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
        fake.port = httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        started.append(httpd)
        return fake

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def test_a_streamed_reply_is_timed_from_the_request_to_its_first_and_last_token(
    serve_fake: Any,
) -> None:
    fake = serve_fake()
    reply = stream_reply(
        parse_endpoint(fake.url), {"messages": [{"role": "user", "content": "hi"}]}, chat=True
    )
    assert reply.text == "reply to: hi"
    # usage wins over timings.predicted_n; the empty role chunk is not the first token.
    assert reply.completion_tokens == COMPLETION_TOKENS
    assert FIRST_DELAY_S <= reply.first_token_s < FIRST_DELAY_S + DECODE_DELAY_S
    assert reply.last_token_s - reply.first_token_s >= DECODE_DELAY_S
    assert (reply.draft_n, reply.draft_n_accepted) == (DRAFT_N, DRAFT_ACCEPTED)
    assert reply.finish_reason == "length"
    _method, path, body = fake.requests[-1]
    assert path == "/v1/chat/completions"
    assert body is not None and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/v1"),
        ("http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080/v1"),
        ("http://10.0.0.5:9000/v1/chat/completions", "http://10.0.0.5:9000/v1"),
        ("http://box/api/v1", "http://box:80/api/v1"),
        ("http://[::1]:8080", "http://[::1]:8080/v1"),
    ],
)
def test_a_server_url_may_stop_at_the_host_or_at_v1_or_name_the_chat_path(
    given: str, url: str
) -> None:
    assert parse_endpoint(given).url == url
    assert parse_endpoint(f"mine={given}").label == "mine"


@pytest.mark.parametrize("given", ["127.0.0.1:8080", "ftp://127.0.0.1/v1", "http://:80", "x=y"])
def test_a_bad_server_url_is_refused_in_words(given: str) -> None:
    with pytest.raises(InvalidSettingError, match="expected"):
        parse_endpoint(given)


def test_an_ipv6_server_is_labelled_as_a_url_writes_it() -> None:
    assert parse_endpoint("http://[::1]:8080").label == "[::1]:8080"


@pytest.mark.parametrize("given", ["http://127.0.0.1:0", "http://127.0.0.1:99999"])
def test_a_port_no_server_can_listen_on_is_refused(given: str) -> None:
    with pytest.raises(InvalidSettingError, match="port is not a number 1-65535"):
        parse_endpoint(given)


def test_earlier_turns_go_first_and_the_timed_conversation_holds_the_servers_own_reply(
    serve_fake: Any,
) -> None:
    fake = serve_fake(prefix="A says: ")
    prompts = [
        BenchPrompt("revision", "r", "now shorter", before=("explain fridges",)),
        BenchPrompt("asked-again", "a", "how do fridges work?", recall=("explain fridges",)),
    ]
    bench = RemoteBench(
        [parse_endpoint(fake.url)], prompts, max_tokens=17, sampling=SamplingConfig(), repeats=1
    )
    bench.run(warmup=False)
    report = bench.report()
    assert fake.chats() == [
        [{"role": "user", "content": "explain fridges"}],
        [
            {"role": "user", "content": "explain fridges"},
            {"role": "assistant", "content": "A says: explain fridges"},
            {"role": "user", "content": "now shorter"},
        ],
        [{"role": "user", "content": "explain fridges"}],
        [{"role": "user", "content": "how do fridges work?"}],
    ]
    # Only the prompts' own requests are timed; every request is greedy, streamed, same length.
    assert [r.text for r in report.runs] == ["A says: now shorter", "A says: how do fridges work?"]
    for _method, _path, body in fake.requests[1:]:
        assert body is not None
        assert (body["stream"], body["temperature"], body["max_tokens"]) == (True, 0.0, 17)
        assert body["model"] == "fake-model"


def test_servers_run_interleaved_and_are_compared_with_the_baseline(serve_fake: Any) -> None:
    fast, slow = serve_fake(), serve_fake(slow=2.0, prefix="other: ")
    servers = [parse_endpoint(f"fast={fast.url}"), parse_endpoint(f"slow={slow.url}")]
    prompts = [BenchPrompt("chat", "p", "one"), BenchPrompt("code", "q", "two")]
    bench = RemoteBench(servers, prompts, max_tokens=8, sampling=SamplingConfig(), repeats=2)
    bench.run(warmup=True)
    report = bench.report()
    order = [(r.repeat, r.prompt, r.server) for r in report.runs]
    assert order == [
        (repeat, prompt, server)
        for repeat in (0, 1)
        for prompt in ("chat/p", "code/q")
        for server in ("fast", "slow")
    ]
    # The warm-up is one untimed request per server, before any timed one.
    assert len(fast.chats()) == len(slow.chats()) == 1 + 4
    base, other = report.figures("fast"), report.figures("slow")
    assert base.ratio == 1.0 and base.same_as_baseline == 1.0
    assert base.tokens_per_second is not None and other.tokens_per_second is not None
    assert other.ratio == pytest.approx(other.tokens_per_second / base.tokens_per_second)
    assert other.ratio < 1.0
    assert other.same_as_baseline == 0.0
    assert other.acceptance_rate == pytest.approx(DRAFT_ACCEPTED / DRAFT_N)
    assert other.draft_n == 4 * DRAFT_N
    assert report.figures("slow", "code").runs == 2
    rate = sum(r.completion_tokens for r in report.runs if r.server == "fast") / sum(
        r.total_s for r in report.runs if r.server == "fast"
    )
    assert base.tokens_per_second == pytest.approx(rate)


def test_progress_names_the_repeat_when_prompts_run_more_than_once(serve_fake: Any) -> None:
    fake = serve_fake()

    def lines(repeats: int) -> list[str]:
        seen: list[str] = []
        bench = RemoteBench(
            [parse_endpoint(f"one={fake.url}")],
            [BenchPrompt("chat", "p", "hi")],
            max_tokens=8,
            sampling=SamplingConfig(),
            repeats=repeats,
        )
        bench.run(
            warmup=False, progress=lambda _done, _total, text: seen.append(text.split(" (")[0])
        )
        return seen

    assert lines(2) == ["one: chat/p · repeat 1/2", "one: chat/p · repeat 2/2"]
    assert lines(1) == ["one: chat/p"]


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(["bench", *args])
    except SystemExit as exited:  # argparse's own refusal
        code = int(str(exited.code))
    out, err = capsys.readouterr()
    return code, out, err.strip()


def test_cli_prints_the_table_and_writes_the_json(
    serve_fake: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one, two = serve_fake(), serve_fake(prefix="two: ")
    out_file = tmp_path / "remote.json"
    code, out, _err = _cli(
        [
            *("--server", f"one={one.url}", "--server", f"two={two.url}", "--baseline", "two"),
            *("--prompts", "builtin:revision", "--max-tokens", "9", "--json", str(out_file)),
            *("--quiet", "--no-warmup", "--api-key", "sesame"),
        ],
        capsys,
    )
    assert code == 0
    assert set(one.keys) == set(two.keys) == {"Bearer sesame"}
    assert re.search(r"^one\s+all\s+2\s", out, re.MULTILINE)
    report = json.loads(out_file.read_text(encoding="utf-8"))
    assert report["baseline"] == "two"
    assert [s["label"] for s in report["servers"]] == ["one", "two"]
    assert report["summary"]["two"]["all"]["ratio"] == 1.0
    assert report["summary"]["one"]["revision"]["acceptance_rate"] == DRAFT_ACCEPTED / DRAFT_N
    assert len(report["runs"]) == 4 and report["settings"]["max_tokens"] == 9


def test_figures_a_server_reports_that_cannot_hold_are_flagged_not_mended(
    serve_fake: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = serve_fake(mode="overcount")
    out_file = tmp_path / "remote.json"
    code, out, _err = _cli(
        [
            *("--server", f"odd={fake.url}", "--prompts", "builtin:chat", "--max-tokens", "9"),
            *("--json", str(out_file), "--quiet", "--no-warmup"),
        ],
        capsys,
    )
    assert code == 0
    report = json.loads(out_file.read_text(encoding="utf-8"))
    doubts = [
        f"draft_n_accepted {DRAFT_N + 2} is more than draft_n {DRAFT_N}",
        "13 completion tokens, more than max_tokens 9",
    ]
    assert all(run["warnings"] == doubts for run in report["runs"])
    assert len(report["warnings"]) == 2 * len(report["runs"])
    assert report["warnings"][0].startswith("odd: chat/")
    # The numbers stay as the server sent them.
    assert report["summary"]["odd"]["all"]["acceptance_rate"] == (DRAFT_N + 2) / DRAFT_N
    assert all(run["completion_tokens"] == 13 for run in report["runs"])
    (line,) = [line for line in out.splitlines() if line.startswith("warning:")]
    assert line.startswith("warning: odd reported figures that cannot hold in 3 of 3 runs")
    assert doubts[0] in line


def test_a_server_whose_figures_hold_gets_no_warning(
    serve_fake: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = serve_fake()
    code, out, _err = _cli(
        ["--server", fake.url, "--prompts", "builtin:chat", "--quiet", "--no-warmup"], capsys
    )
    assert code == 0 and "warning" not in out


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("mode", "status", "message"),
    [
        ("refuse", 1, "refused the request: HTTP 500: the model is on fire"),
        ("garbage", 1, "sent a stream event that is not JSON: '<html>not json</html>'"),
        ("wrong-shape", 1, "sent a stream event in an unexpected form"),
        ("deep", 1, "sent a stream event that is not JSON"),
        ("huge-line", 1, "sent a stream line longer than 4 MiB"),
        ("keep-alive", 1, "no reply data for 0.5 s (--timeout), only keep-alive lines"),
        ("bad-key", 2, "--api-key must be printable ASCII with no spaces"),
        ("long-timeout", 2, "at most 604800"),
        ("cut-after-usage", 1, "the stream ended before the reply did"),
        ("closed", 1, "connection refused"),
        ("bad-url", 2, "expected [LABEL=]http://HOST:PORT"),
        ("with-target", 2, "--target does not go with --server"),
        ("bad-baseline", 2, "--baseline 'nobody' is none of the servers"),
        ("twice", 2, "two servers are called"),
        ("no-model", 2, "--target is required (or bench servers with --server URL)"),
        ("lonely-baseline", 2, "--baseline goes with --server, and there is none"),
    ],
)
def test_cli_user_errors_are_one_line(
    serve_fake: Any, capsys: pytest.CaptureFixture[str], mode: str, status: int, message: str
) -> None:
    fake = serve_fake(mode=mode)
    url = f"http://127.0.0.1:{_closed_port()}" if mode == "closed" else fake.url
    extra = {
        "bad-url": ["--server", "127.0.0.1:1234"],
        "with-target": ["--server", url, "--target", "demo"],
        "bad-baseline": ["--server", url, "--baseline", "nobody"],
        "twice": ["--server", url, "--server", url],
        "no-model": [],
        "lonely-baseline": ["--target", "t.gguf", "--draft", "suffix", "--baseline", "x"],
        "keep-alive": ["--server", url, "--timeout", "0.5"],
        "bad-key": ["--server", url, "--api-key", "bad\nkey"],
        "long-timeout": ["--server", url, "--timeout", "1e10"],
    }.get(mode, ["--server", url])
    code, _out, err = _cli([*extra, "--prompts", "builtin:chat", "--quiet", "--no-warmup"], capsys)
    assert code == status
    assert err.startswith("error:") and message in err
    assert "\n" not in err and "Traceback" not in err


def test_a_stream_cut_after_its_counts_is_a_failed_request_not_a_whole_reply(
    serve_fake: Any,
) -> None:
    fake = serve_fake(mode="cut-after-usage")
    with pytest.raises(RemoteServerError, match=r"the stream ended before the reply did"):
        stream_reply(
            parse_endpoint(fake.url), {"messages": [{"role": "user", "content": "hi"}]}, chat=True
        )


def test_a_stream_without_token_counts_is_refused(serve_fake: Any) -> None:
    class Bare(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'data: {"choices":[{"delta":{"content":"x"}}]}\n\ndata: [DONE]\n\n')

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Bare)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        endpoint = parse_endpoint(f"http://127.0.0.1:{httpd.server_address[1]}")
        with pytest.raises(RemoteServerError, match=r"neither usage\.completion_tokens"):
            stream_reply(endpoint, {"messages": []}, chat=True)
    finally:
        httpd.shutdown()
        httpd.server_close()


# -- a real `specchat serve` ------------------------------------------------------------------

_READY = re.compile(r"at http://127\.0\.0\.1:(\d+)/v1")
SERVE_MAX_TOKENS = 16


@pytest.fixture(scope="module")
def specchat_server(demo_models: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    log_path = tmp_path_factory.mktemp("serve") / "serve.log"
    command = [sys.executable, "-m", "app.cli", "serve", "--target", str(demo_models.f32)]
    command += ["--draft", str(demo_models.q4_1), "--port", "0", "--threads", "1"]
    # Exact greedy: speculation cannot change a reply, so two requests must read the same.
    command += ["--n-ctx", "1024", "--max-tokens", str(SERVE_MAX_TOKENS), "--exact"]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, cwd=ROOT)
    try:
        deadline = time.monotonic() + 300
        port = None
        while port is None and time.monotonic() < deadline:
            found = _READY.search(log_path.read_text(encoding="utf-8", errors="replace"))
            port = int(found.group(1)) if found else None
            if port is None:
                assert proc.poll() is None, log_path.read_text()
                time.sleep(0.2)
        assert port is not None, log_path.read_text()
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _whole_reply(port: int, text: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    body = {"messages": [{"role": "user", "content": text}], "temperature": 0}
    try:
        conn.request(
            "POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"}
        )
        payload = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    return str(payload["choices"][0]["message"]["content"])


def test_specchat_serve_is_benched_with_its_draft_figures(
    specchat_server: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = tmp_path / "one.txt"
    question = "Name three colours of the rainbow."
    prompts.write_text(question, encoding="utf-8")
    out_file = tmp_path / "serve.json"
    url = f"specchat=http://127.0.0.1:{specchat_server}/v1"
    code, out, err = _cli(
        [
            *("--server", url, "--prompts", str(prompts)),
            *("--max-tokens", str(SERVE_MAX_TOKENS), "--json", str(out_file), "--quiet"),
        ],
        capsys,
    )
    assert code == 0, err
    assert out.splitlines()[2].startswith("specchat")
    (run,) = json.loads(out_file.read_text(encoding="utf-8"))["runs"]
    # The streamed pieces put together are the reply the server gives unstreamed.
    assert run["text"] == _whole_reply(specchat_server, question)
    assert 0 < run["completion_tokens"] <= SERVE_MAX_TOKENS
    assert 0 < run["ttft_s"] <= run["total_s"]
    assert run["draft_n"] is not None and 0 <= run["draft_n_accepted"] <= run["draft_n"]
    assert run["tokens_per_second"] == run["completion_tokens"] / run["total_s"]


def test_counts_below_zero_are_flagged() -> None:
    from app.bench.openai_stream import StreamedReply
    from app.bench.remote import doubts

    reply = StreamedReply("x", -5, 0.1, 0.2, "length", {"draft_n": 3, "draft_n_accepted": -1})
    assert doubts(reply, 16) == (
        "completion tokens -5 is below 0",
        "draft_n_accepted -1 is below 0",
    )
