"""`specchat bench --server`: the bench's prompts against running OpenAI-compatible servers.

Servers are benched interleaved, prompt by prompt, so a change in the machine's load hits them
alike; every request ends before the next one starts, so no two servers decode at once. A
prompt's earlier turns are answered by the server under test, untimed, right before its timed
request: `before` turns open the same conversation, so the timed request carries the server's
own replies; `recall` turns are an earlier conversation of their own, which the server may
remember (a suffix index, a prompt cache), and the timed request starts a new one.

Per reply: tokens/s over the time from sending the request to the last token (prompt
processing included, what a user waits for), the decode-only rate from the first token to the
last, time to first token, and the draft figures the server reports in llama-server's
`timings` (`draft_n`, `draft_n_accepted`; SpecChat's server sends them too).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from app.bench.openai_stream import (
    READ_TIMEOUT_S,
    Endpoint,
    RemoteServerError,
    StreamedReply,
    served_model,
    stream_reply,
)
from app.bench.plan import repeat_note
from app.bench.prompts import BenchPrompt
from app.bench.remote_report import RemoteFailure, RemoteReport, RemoteRun
from app.engine.chat_template import ChatMessage
from app.engine.config import SamplingConfig
from app.engine.control import GenerationControl
from app.errors import InvalidSettingError, user_message

ProgressFn = Callable[[int, int, str], None]
# Untimed: the first request a server answers pays for lazy allocations and cold caches.
_WARMUP_PROMPT = "Say hello in one short sentence."
_WARMUP_TOKENS = 8


def check_servers(servers: Sequence[Endpoint], baseline: str | None) -> str:
    """The baseline's label (the first server unless named); labels must tell servers apart."""
    labels = [s.label for s in servers]
    if not labels:
        raise InvalidSettingError("--server: give at least one server URL")
    doubled = sorted({label for label in labels if labels.count(label) > 1})
    if doubled:
        raise InvalidSettingError(
            f"--server: two servers are called {doubled[0]}; label them LABEL=URL"
        )
    if baseline is None:
        return labels[0]
    if baseline not in labels:
        raise InvalidSettingError(
            f"--baseline {baseline!r} is none of the servers ({', '.join(labels)})"
        )
    return baseline


class _Client:
    """Requests to one server with the bench's generation settings."""

    def __init__(
        self, endpoint: Endpoint, model: str | None, sampling: dict[str, Any], timeout: float
    ) -> None:
        self.endpoint = endpoint
        self._model = {"model": model} if model else {}
        self._sampling = sampling
        self._timeout = timeout

    def chat(self, messages: list[ChatMessage], max_tokens: int) -> StreamedReply:
        body = {**self._model, **self._sampling, "messages": messages, "max_tokens": max_tokens}
        return stream_reply(self.endpoint, body, chat=True, timeout=self._timeout)

    def complete(self, text: str, max_tokens: int) -> StreamedReply:
        body = {**self._model, **self._sampling, "prompt": text, "max_tokens": max_tokens}
        return stream_reply(self.endpoint, body, chat=False, timeout=self._timeout)

    def timed(self, prompt: BenchPrompt, max_tokens: int) -> StreamedReply:
        """The prompt's earlier turns, untimed, then its own request; returns the timed reply."""
        if not prompt.chat:
            return self.complete(prompt.text, max_tokens)
        self._converse(list(prompt.recall), max_tokens)
        messages = self._converse(list(prompt.before), max_tokens)
        messages.append({"role": "user", "content": prompt.text})
        return self.chat(messages, max_tokens)

    def _converse(self, questions: list[str], max_tokens: int) -> list[ChatMessage]:
        messages: list[ChatMessage] = []
        for question in questions:
            messages.append({"role": "user", "content": question})
            reply = self.chat(list(messages), max_tokens)
            messages.append({"role": "assistant", "content": reply.text})
        return messages


def request_sampling(sampling: SamplingConfig) -> dict[str, Any]:
    """The request fields that make every benched server sample alike: OpenAI's own
    (temperature, top_p, seed) and llama-server's (top_k, min_p, repeat_penalty), which
    `specchat serve` reads too. Each is sent even at its "off" value, so a server's own default
    (llama-server's top_k 40, say) does not make it sample differently from the others."""
    fields: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "min_p": sampling.min_p,
        "repeat_penalty": sampling.repeat_penalty,
    }
    if sampling.seed is not None:
        fields["seed"] = sampling.seed
    return fields


class RemoteBench:
    """One `--server` benchmark: the servers checked, then `run` measures, and `report` folds
    whatever was measured, all of it or the runs before a stop or a failed request."""

    def __init__(
        self,
        servers: Sequence[Endpoint],
        prompts: Sequence[BenchPrompt],
        *,
        max_tokens: int,
        sampling: SamplingConfig,
        repeats: int,
        baseline: str | None = None,
        timeout: float = READ_TIMEOUT_S,
    ) -> None:
        self.baseline = check_servers(servers, baseline)
        if not prompts:
            raise InvalidSettingError("the benchmark needs at least one prompt")
        self.servers = tuple(servers)
        self.prompts = tuple(prompts)
        self.max_tokens = max_tokens
        self.repeats = repeats
        self.timeout = timeout
        self.fields = request_sampling(sampling)
        self.models = tuple(served_model(s, timeout) for s in servers)
        self.runs: list[RemoteRun] = []
        self.failure: RemoteFailure | None = None

    def run(
        self,
        *,
        warmup: bool = True,
        progress: ProgressFn | None = None,
        control: GenerationControl | None = None,
    ) -> None:
        """Measure every prompt on every server, interleaved; runs land in `self.runs` as they
        end. A stop (`control`) ends it after the request in progress; a request that fails
        ends it with `self.failure` set, keeping the runs before it."""
        clients = [
            _Client(s, m, self.fields, self.timeout)
            for s, m in zip(self.servers, self.models, strict=True)
        ]
        total = self.repeats * len(self.prompts) * len(clients)
        if warmup:
            for client in clients:
                if progress is not None:
                    # A server that never answers shows here, not as a silent wait.
                    progress(0, total, f"{client.endpoint.label}: warm-up request (untimed)")
                client.chat([{"role": "user", "content": _WARMUP_PROMPT}], _WARMUP_TOKENS)
        for repeat in range(self.repeats):
            for prompt in self.prompts:
                for client in clients:
                    if control is not None and control.stop_requested:
                        return
                    label = client.endpoint.label
                    try:
                        reply = client.timed(prompt, self.max_tokens)
                    except RemoteServerError as exc:
                        name = f"{prompt.prompt_class}/{prompt.name}"
                        self.failure = RemoteFailure(label, name, repeat, user_message(exc))
                        return
                    self.runs.append(_record(label, prompt, repeat, reply, self.max_tokens))
                    if progress is not None:
                        line = _progress_line(self.runs[-1], self.repeats)
                        progress(len(self.runs), total, line)

    def report(self, *, interrupted: bool = False) -> RemoteReport:
        """The report of the runs so far. Runs come in blocks (every server on one prompt and
        repeat); only whole blocks are counted in the figures, so that no server is compared
        with the baseline on prompts the other did not get. The rest are listed, uncounted."""
        whole = len(self.runs) - len(self.runs) % len(self.servers)
        return RemoteReport(
            servers=self.servers,
            models=self.models,
            baseline=self.baseline,
            classes=tuple(dict.fromkeys(p.prompt_class for p in self.prompts)),
            runs=tuple(self.runs[:whole]),
            settings={
                "max_tokens": self.max_tokens,
                **self.fields,
                "repeats": self.repeats,
                "timeout_s": self.timeout,
            },
            uncounted=tuple(self.runs[whole:]),
            interrupted=interrupted,
            failure=self.failure,
        )


def _record(
    server: str, prompt: BenchPrompt, repeat: int, reply: StreamedReply, max_tokens: int
) -> RemoteRun:
    return RemoteRun(
        server=server,
        prompt_class=prompt.prompt_class,
        prompt=f"{prompt.prompt_class}/{prompt.name}",
        repeat=repeat,
        completion_tokens=reply.completion_tokens,
        ttft_s=reply.first_token_s,
        total_s=reply.last_token_s,
        decode_s=reply.last_token_s - reply.first_token_s,
        draft_n=reply.draft_n,
        draft_n_accepted=reply.draft_n_accepted,
        finish_reason=reply.finish_reason,
        text=reply.text,
        warnings=doubts(reply, max_tokens),
    )


def doubts(reply: StreamedReply, max_tokens: int) -> tuple[str, ...]:
    """What a server reported about a reply that cannot hold for the request it was sent: more
    draft tokens accepted than drafted, more completion tokens than max_tokens allowed, a
    count below zero."""
    out: list[str] = []
    drafted, accepted = reply.draft_n, reply.draft_n_accepted
    if drafted is not None and accepted is not None and accepted > drafted:
        out.append(f"draft_n_accepted {accepted} is more than draft_n {drafted}")
    if reply.completion_tokens > max_tokens:
        out.append(
            f"{reply.completion_tokens} completion tokens, more than max_tokens {max_tokens}"
        )
    for name, count in (
        ("completion tokens", reply.completion_tokens),
        ("draft_n", drafted),
        ("draft_n_accepted", accepted),
    ):
        if count is not None and count < 0:
            out.append(f"{name} {count} is below 0")
    return tuple(out)


def _progress_line(run: RemoteRun, repeats: int) -> str:
    rate = run.tokens_per_second
    figure = "—" if rate is None else f"{rate:.1f} tok/s"
    where = f"{run.prompt}{repeat_note(run.repeat, repeats)}"
    return f"{run.server}: {where} ({run.completion_tokens} tokens, {figure})"
