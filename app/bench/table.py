"""The benchmark report as text: the table the CLI prints, and CSV rows."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from app.bench.plan import ALL_CLASSES
from app.bench.summary import BenchReport

# One prompt's paired speedups spread wider than this (max / min) over its repeats mean the
# machine's load changed under the runs; the table then says so. Over prompts a spread says
# nothing of noise: the six built-in classes run from about 1.1x to 10x.
NOISY_SPREAD = 2.0


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{suffix}"


def format_table(report: BenchReport) -> str:
    """The human-readable summary the CLI prints."""
    # As wide as the longest label: a cut label loses what tells rows apart (a γ, +suffix).
    width = max(len("configuration"), *(len(c.label) for c in (report.plain, *report.configs)))
    header = (
        f"{'configuration':<{width}} {'tok/s':>7} {'speedup':>8} {'range':>11} {'median':>7} "
        f"{'2nd½':>6} {'pred.':>6} {'accept':>7} {'tok/rnd':>7} {'c_dr':>5} {'c_ver':>5} "
        f"{'TTFT':>7} {'same':>5}"
    )
    lines = [header, "-" * len(header)]
    for c in (report.plain, *report.configs):
        f = c.figures
        spread = (
            f"{f.speedup_min:.2f}-{f.speedup_max:.2f}"
            if f.speedup_min is not None and f.speedup_max is not None and c.draft is not None
            else ""
        )
        same = (
            "" if c.draft is None else {True: "yes", False: "NO", None: "n/a"}[f.identical_to_plain]
        )
        lines.append(
            f"{c.label:<{width}} {_fmt(f.tokens_per_second, '.1f'):>7} "
            f"{_fmt(f.speedup, '.2f', '×'):>8} {spread:>11} "
            f"{_fmt(f.speedup_median if c.draft else None, '.2f', '×'):>7} "
            f"{_fmt(f.speedup_second_half if c.draft else None, '.2f', '×'):>6} "
            f"{_fmt(f.predicted_speedup if c.draft else None, '.2f', '×'):>6} "
            f"{_fmt(f.acceptance_rate, '.1%'):>7} {_fmt(f.tokens_per_round, '.2f'):>7} "
            f"{_fmt(f.c_draft, '.2f'):>5} {_fmt(f.c_verify, '.2f'):>5} "
            f"{_fmt(None if f.ttft_s is None else f.ttft_s * 1000, '.0f', 'ms'):>7} {same:>5}"
        )
    for draft, error in dict.fromkeys((c.draft, c.error) for c in report.configs if c.error):
        lines.append(f"{draft}: not measured: {error}")
    if report.interrupted:
        counted = sum(1 for r in report.runs if r["counted"])
        cut = len(report.runs) - counted
        lines.append(
            f"interrupted: the figures cover the {counted} runs completed before the stop"
            + (f" ({cut} more of an unfinished block are listed in the JSON only)" if cut else "")
        )
    lines.append(
        "speedup: tok/s over plain on the same prompts; range, median: of the speedups per "
        "prompt and repeat; 2nd½: speedup over the rounds in the second half of each reply; "
        "pred.: cost model from measured per-position acceptance and costs; accept: "
        "accepted/drafted; c_dr, c_ver: in plain steps; same: greedy output identical to plain"
    )
    noisy = [
        c.label for c in report.configs if (c.figures.speedup_repeat_spread or 0.0) > NOISY_SPREAD
    ]
    if noisy:
        lines.append(
            f"warning: paired speedups of {len(noisy)} configuration(s) varied more than "
            f"{NOISY_SPREAD:.1f}-fold between repeats of one prompt ({', '.join(noisy[:3])}"
            f"{', …' if len(noisy) > 3 else ''}); the machine was probably busy: read the "
            "aggregates with care, raise --repeat, or use fewer --threads"
        )
    if report.classes and len(report.classes) > 1:
        lines.append("")
        lines.append("speedup by prompt class")
        # Each class's column as wide as its name (asked-again is 11 characters).
        widths = [max(10, len(name)) for name in report.classes]
        names = " ".join(f"{c:>{w}}" for c, w in zip(report.classes, widths, strict=True))
        lines.append(f"{'configuration':<{width}} " + names)
        for c in report.configs:
            cells = [_fmt(c.by_class[name].speedup, ".2f", "×") for name in report.classes]
            row = " ".join(f"{x:>{w}}" for x, w in zip(cells, widths, strict=True))
            lines.append(f"{c.label:<{width}} " + row)
    if report.settings.get("exact"):
        lines.append(
            "exact mode: every target pass, plain included, computed at least two rows, so "
            "speedups are over exact plain decoding (1.2-1.4× slower than one-row plain "
            "steps on a CPU); run without --exact to measure speed"
        )
    for d in report.drafts:
        if d.auto is not None and d.best_fixed is not None:
            lines.append("")
            best = _fmt(d.best_fixed_speedup, ".2f", "×")
            lines.append(
                f"{d.draft}: best fixed {d.best_fixed} at {best}; "
                f"auto {_fmt(d.auto_speedup, '.2f', '×')} "
                f"({_fmt(d.auto_vs_best_fixed, '.1%')} of the best fixed γ)"
            )
    return "\n".join(lines)


CSV_COLUMNS = (
    "label",
    "draft",
    "gamma",
    "class",
    "runs",
    "generated_tokens",
    "tokens_per_second",
    "speedup",
    "speedup_min",
    "speedup_max",
    "speedup_median",
    "speedup_repeat_spread",
    "speedup_second_half",
    "predicted_speedup",
    "predicted_speedup_iid",
    "acceptance_rate",
    "accepted",
    "suffix_accepted",
    "model_accepted",
    "alpha",
    "tokens_per_round",
    "mean_gamma",
    "c_draft",
    "c_verify",
    "ttft_s",
    "identical_to_plain",
    "error",
)


def csv_rows(report: BenchReport) -> Iterator[dict[str, Any]]:
    """One row per configuration and prompt class, plus an `all` row per configuration."""
    for c in (report.plain, *report.configs):
        for name, f in [(ALL_CLASSES, c.figures), *c.by_class.items()]:
            data = f.to_json()
            row = {k: data.get(k) for k in CSV_COLUMNS}
            row.update(
                {
                    "label": c.label,
                    "draft": c.draft or "",
                    "gamma": str(c.gamma),
                    "class": name,
                    "error": c.error,
                }
            )
            yield row


def to_csv(report: BenchReport) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in csv_rows(report):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()
