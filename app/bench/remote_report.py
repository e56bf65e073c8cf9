"""What a `specchat bench --server` run reports: each timed reply, each server's aggregates by
prompt class against the baseline server, and the request that ended the run early, as the
table (app/bench/remote_table.py) and the JSON read them. The runs themselves:
app/bench/remote.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from app.bench.openai_stream import Endpoint
from app.bench.plan import ALL_CLASSES

__all__ = ["RemoteFailure", "RemoteFigures", "RemoteReport", "RemoteRun"]


@dataclass(frozen=True, slots=True)
class RemoteRun:
    """One timed reply of one server to one prompt."""

    server: str
    prompt_class: str
    prompt: str
    repeat: int
    completion_tokens: int
    ttft_s: float
    total_s: float
    decode_s: float
    draft_n: int | None
    draft_n_accepted: int | None
    finish_reason: str | None
    text: str
    # What the server reported that cannot hold for the request it was sent (`doubts`); the
    # figures use the numbers as reported, so the report says which runs to read with care.
    warnings: tuple[str, ...] = ()

    @property
    def tokens_per_second(self) -> float | None:
        return _rate(self.completion_tokens, self.total_s)

    @property
    def decode_tokens_per_second(self) -> float | None:
        # The first token's arrival opens the interval, so it is not counted in it.
        return _rate(self.completion_tokens - 1, self.decode_s)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["tokens_per_second"] = self.tokens_per_second
        out["decode_tokens_per_second"] = self.decode_tokens_per_second
        return out


def _rate(tokens: int, seconds: float) -> float | None:
    return tokens / seconds if tokens > 0 and seconds > 0 else None


@dataclass(frozen=True, slots=True)
class RemoteFigures:
    """One server's aggregates over some runs (a prompt class, or all of them)."""

    runs: int
    completion_tokens: int
    tokens_per_second: float | None
    decode_tokens_per_second: float | None
    ttft_s: float | None
    draft_n: int | None
    draft_n_accepted: int | None
    acceptance_rate: float | None
    # Against the baseline server on the same prompts: tok/s ratio, share of identical replies.
    ratio: float | None
    same_as_baseline: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class RemoteReport:
    servers: tuple[Endpoint, ...]
    models: tuple[str | None, ...]
    baseline: str
    classes: tuple[str, ...]
    runs: tuple[RemoteRun, ...]
    settings: dict[str, Any]
    # Runs of a block that a stop or a failure cut short: reported, counted in no figure.
    uncounted: tuple[RemoteRun, ...] = ()
    interrupted: bool = False
    failure: RemoteFailure | None = None

    def figures(self, server: str, prompt_class: str = ALL_CLASSES) -> RemoteFigures:
        return _figures(self.runs, server, prompt_class, self.baseline)

    @property
    def warnings(self) -> list[str]:
        """Every run's warnings, each with the run it is about, counted or not."""
        return [
            f"{r.server}: {r.prompt} (repeat {r.repeat + 1}): {w}"
            for r in (*self.runs, *self.uncounted)
            for w in r.warnings
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "interrupted": self.interrupted,
            "error": None if self.failure is None else self.failure.to_json(),
            "warnings": self.warnings,
            "settings": self.settings,
            "baseline": self.baseline,
            "servers": [
                {"label": s.label, "url": s.url, "model": m}
                for s, m in zip(self.servers, self.models, strict=True)
            ],
            "classes": list(self.classes),
            "summary": {
                s.label: {
                    c: self.figures(s.label, c).to_json() for c in (ALL_CLASSES, *self.classes)
                }
                for s in self.servers
            },
            "runs": [
                {**r.to_json(), "counted": counted}
                for r, counted in [
                    *((r, True) for r in self.runs),
                    *((r, False) for r in self.uncounted),
                ]
            ],
        }


def _figures(
    runs: Sequence[RemoteRun], server: str, prompt_class: str, baseline: str
) -> RemoteFigures:
    def mine(label: str) -> list[RemoteRun]:
        return [
            r for r in runs if r.server == label and prompt_class in (ALL_CLASSES, r.prompt_class)
        ]

    own, base = mine(server), mine(baseline)
    tokens = sum(r.completion_tokens for r in own)
    rate = _rate(tokens, sum(r.total_s for r in own))
    base_rate = _rate(sum(r.completion_tokens for r in base), sum(r.total_s for r in base))
    reported = [r for r in own if r.draft_n is not None and r.draft_n_accepted is not None]
    drafted = sum(r.draft_n or 0 for r in reported) if reported else None
    accepted = sum(r.draft_n_accepted or 0 for r in reported) if reported else None
    base_text = {(r.prompt, r.repeat): r.text for r in base}
    paired = [
        r.text == base_text[(r.prompt, r.repeat)] for r in own if (r.prompt, r.repeat) in base_text
    ]
    return RemoteFigures(
        runs=len(own),
        completion_tokens=tokens,
        tokens_per_second=rate,
        decode_tokens_per_second=_rate(
            sum(r.completion_tokens - 1 for r in own), sum(r.decode_s for r in own)
        ),
        ttft_s=sum(r.ttft_s for r in own) / len(own) if own else None,
        draft_n=drafted,
        draft_n_accepted=accepted,
        acceptance_rate=accepted / drafted if drafted and accepted is not None else None,
        ratio=rate / base_rate if rate is not None and base_rate else None,
        same_as_baseline=sum(paired) / len(paired) if paired else None,
    )


@dataclass(frozen=True, slots=True)
class RemoteFailure:
    """The request that failed and ended a `--server` bench early."""

    server: str
    prompt: str
    repeat: int
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
