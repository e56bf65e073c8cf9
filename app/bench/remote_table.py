"""The `specchat bench --server` report as the table the CLI prints."""

from __future__ import annotations

from app.bench.plan import ALL_CLASSES
from app.bench.remote_report import RemoteFigures, RemoteReport

_LEGEND = (
    "tok/s: completion tokens over request-to-last-token time (prompt processing included); "
    "decode: first to last token; TTFT: mean time to first token; accept: draft tokens "
    "accepted/drafted as the server reports them; ×base, same: tok/s ratio and share of "
    "identical replies against {baseline}"
)


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{suffix}"


def _row(server: str, name: str, f: RemoteFigures, widths: tuple[int, int]) -> str:
    ttft = None if f.ttft_s is None else f.ttft_s * 1000
    return (
        f"{server:<{widths[0]}} {name:<{widths[1]}} {f.runs:>4} "
        f"{_fmt(f.tokens_per_second, '.1f'):>7} "
        f"{_fmt(f.ratio, '.2f', '×'):>6} {_fmt(f.decode_tokens_per_second, '.1f'):>7} "
        f"{_fmt(ttft, '.0f', 'ms'):>7} {_fmt(f.acceptance_rate, '.1%'):>7} "
        f"{_fmt(f.same_as_baseline, '.0%'):>5}"
    )


def format_remote_table(report: RemoteReport) -> str:
    # As wide as the longest label and class: cut, two servers could read alike.
    widths = (
        max(22, *(len(s.label) for s in report.servers)),
        max(12, *(len(c) for c in report.classes)),
    )
    header = (
        f"{'server':<{widths[0]}} {'class':<{widths[1]}} {'runs':>4} {'tok/s':>7} {'×base':>6} "
        f"{'decode':>7} "
        f"{'TTFT':>7} {'accept':>7} {'same':>5}"
    )
    lines = [header, "-" * len(header)]
    names = [ALL_CLASSES, *report.classes] if len(report.classes) > 1 else [ALL_CLASSES]
    for name in names:
        for server in report.servers:
            lines.append(_row(server.label, name, report.figures(server.label, name), widths))
        if len(report.servers) > 1 and name != names[-1]:
            lines.append("")
    lines.append(_LEGEND.format(baseline=report.baseline))
    lines += _warning_lines(report)
    stopped = report.interrupted or report.failure is not None
    if report.failure is not None:
        f = report.failure
        lines.append(f"{f.server}: failed on {f.prompt} (repeat {f.repeat + 1}): {f.message}")
    if stopped:
        cut = f" ({len(report.uncounted)} more of an unfinished block are in the JSON only)"
        lines.append(
            f"{'interrupted' if report.interrupted else 'stopped'}: the figures cover the "
            f"{len(report.runs)} runs completed before it" + (cut if report.uncounted else "")
        )
    return "\n".join(lines)


def _warning_lines(report: RemoteReport) -> list[str]:
    """One line per server that reported figures that cannot hold: taken as given, they would
    read as a result (an acceptance over 100 %, a rate over more tokens than were asked for)."""
    lines = []
    for server in report.servers:
        runs = [r for r in (*report.runs, *report.uncounted) if r.server == server.label]
        doubtful = [r for r in runs if r.warnings]
        if doubtful:
            first = doubtful[0]
            lines.append(
                f"warning: {server.label} reported figures that cannot hold in "
                f"{len(doubtful)} of {len(runs)} runs, first {first.prompt} (repeat "
                f"{first.repeat + 1}): {first.warnings[0]}; the figures use them as reported "
                "(every one is in the JSON's warnings)"
            )
    return lines
