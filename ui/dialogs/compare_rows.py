"""What the Compare dialog writes for a benchmark report: its table's columns with their tips
(the metrics' definitions, word for word), a configuration's row, and the one-line verdict."""

from __future__ import annotations

from app.bench.summary import BenchReport, ConfigReport
from app.errors import as_sentence
from app.metrics.summary import METRIC_DEFINITIONS
from ui.formatting import speedup_band

DASH = "—"
NOT_RUN = "not run"
COLUMNS = (
    "configuration",
    "tok/s",
    "speedup",
    "predicted",
    "acceptance",
    "tokens/round",
    "c_draft",
    "c_verify",
    "TTFT",
    "same as plain",
)
_D = METRIC_DEFINITIONS
# A figure's tip is its definition, word for word as everywhere else it is shown.
COLUMN_TIPS = {
    "tok/s": _D["tokens_per_second"],
    "speedup": (
        "tokens/s over plain decoding's on the same prompts, timed beside this draft so that "
        "a machine whose speed drifts moves both alike; it can differ from the ratio of the "
        "tok/s column, whose plain row covers every plain run"
    ),
    "predicted": (
        "the cost model (docs/design.md) fed by the measured per-position acceptance and costs"
    ),
    "acceptance": _D["acceptance_rate"],
    "tokens/round": _D["tokens_per_round"],
    "c_draft": _D["c_draft"],
    "c_verify": _D["c_verify"],
    "TTFT": _D["ttft_s"],
    "same as plain": "greedy output identical to plain decoding, token for token",
}


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return DASH if value is None else f"{value:{spec}}{suffix}"


def unmeasured_text(config: ConfigReport) -> str | None:
    """What a row with no runs says in place of its figures (None: it was measured)."""
    if config.measured:
        return None
    return as_sentence(config.error) if config.error else NOT_RUN


def row_texts(config: ConfigReport, greedy: bool) -> list[str]:
    f = config.figures
    plain = config.draft is None
    # Greedy runs that were measured always have a verdict; None then means no plain twin.
    same = {True: "yes", False: "NO", None: DASH if greedy else "n/a (sampling)"}[
        f.identical_to_plain
    ]
    return [
        config.label,
        _fmt(f.tokens_per_second, ".1f"),
        "1.00× (baseline)" if plain else _fmt(f.speedup, ".2f", "×"),
        "" if plain else _fmt(f.predicted_speedup, ".2f", "×"),
        ""
        if plain
        else _fmt(None if f.acceptance_rate is None else f.acceptance_rate * 100, ".1f", " %"),
        _fmt(f.tokens_per_round, ".2f"),
        "" if plain else _fmt(f.c_draft, ".2f"),
        "" if plain else _fmt(f.c_verify, ".2f"),
        _fmt(None if f.ttft_s is None else f.ttft_s * 1000, ".0f", " ms"),
        "" if plain else same,
    ]


def verdict(report: BenchReport) -> str:
    """The plain headline: which configuration was fastest, and γ auto where it ran."""
    timed = [c for c in report.configs if c.figures.speedup is not None]
    if not timed:
        return "Done."
    best = max(timed, key=lambda c: c.figures.speedup or 0.0)
    speedup = _fmt(best.figures.speedup, ".2f", "×")
    # Within a run's noise of plain decoding, the fastest row is no draft to switch to.
    text = {
        "faster": f"Done. Fastest: {best.label}, {speedup} as fast as plain decoding",
        "about": f"Done. No draft was clearly faster than plain decoding (best: {best.label}, "
        f"{speedup})",
        "slower": f"Done. Every draft was slower than plain decoding (best: {best.label}, "
        f"{speedup})",
    }[speedup_band(best.figures.speedup or 0.0)]
    autos = [
        f"{d.draft} {_fmt(d.auto_speedup, '.2f', '×')}"
        for d in report.drafts
        if d.auto_speedup is not None
    ]
    text += f"; with γ auto: {', '.join(autos)}." if autos else "."
    failed = dict.fromkeys(c.draft for c in report.configs if c.error and c.draft)
    return text + (f" Not measured: {', '.join(failed)} (see the table)." if failed else "")
