"""The Insight panel's words and figures as text: the summary under the chart, the round
table's cells and the what-if readouts. Pure functions over app.metrics, so any front end can
print them and tests read them without a window."""

from __future__ import annotations

from app.metrics import cost_model
from app.metrics.insight import Insight
from app.metrics.ledger import LedgerRow

DASH = "—"

# The sliders open at the cost model's reference point (E 3.362, 2.40×; docs/design.md).
WHAT_IF_DEFAULTS = {"alpha": 0.80, "gamma": 4, "c_draft": 0.10, "c_verify": 1.00}
ROUND_COLUMNS = (
    "round",
    "γ",
    "drafted",
    "accepted",
    "rejected at",
    "tokens",
    "Σ tokens",
    "Σ draft passes",
    "Σ target passes",
    "cost",
    "Σ cost",
    "draft ms",
    "verify ms",
)


def fmt(value: float | None, digits: int = 2, suffix: str = "") -> str:
    return DASH if value is None else f"{value:.{digits}f}{suffix}"


def summary_lines(insight: Insight) -> list[str]:
    """Three lines under the chart: α and per-position acceptance, the costs, and γ's figures."""
    conditional = ", ".join(
        f"{i}: {DASH if a is None else f'{a:.0%}'}"
        for i, a in enumerate(insight.conditional, start=1)
    )
    best = (
        DASH
        if insight.best_gamma is None or insight.best_speedup is None
        else f"{insight.best_gamma} ({insight.best_speedup:.2f}×)"
    )
    if insight.best_gamma == 0:
        best += ": no draft length pays, do not speculate"
    alpha = fmt(None if insight.alpha is None else insight.alpha * 100, 1, " %")
    step = fmt(None if insight.plain_step_s is None else insight.plain_step_s * 1000, 1, " ms")
    return [
        f"α, this reply (accepted / judged, not the acceptance rate): {alpha} · "
        f"per position: {conditional or DASH}",
        f"c_draft {fmt(insight.c_draft)} · c_verify at γ {insight.current_gamma or DASH}: "
        f"{fmt(insight.c_verify)} · plain step {step}",
        f"current γ {insight.current_gamma if insight.current_gamma is not None else DASH}: "
        f"predicted {fmt(insight.predicted_at_current, 2, '×')}, measured "
        f"{fmt(insight.measured.get(insight.current_gamma or -1), 2, '×')} · "
        f"whole reply measured {fmt(insight.measured_overall, 2, '×')} · best γ {best}",
    ]


def round_cells(r: LedgerRow) -> list[str]:
    """One round table row, in ROUND_COLUMNS' order."""
    rejected = (
        "bonus"
        if r.rejected_at is None and r.drafted
        else (DASH if r.rejected_at is None else str(r.rejected_at))
    )
    return [
        str(r.index),
        str(r.gamma),
        str(r.drafted),
        str(r.accepted),
        rejected,
        str(r.tokens),
        str(r.cumulative_tokens),
        str(r.cumulative_draft_passes),
        str(r.cumulative_target_passes),
        fmt(r.cost),
        fmt(r.cumulative_cost),
        f"{r.draft_ms:.1f}",
        f"{r.verify_ms:.1f}",
    ]


def what_if_figures(alpha: float, gamma: int, c_draft: float, c_verify: float) -> dict[str, str]:
    """The what-if readouts for the sliders' values: E in both of its forms (its tooltip
    spells the series), the round's cost, speedup, passes per token, ceiling and best γ."""
    e = cost_model.expected_tokens(alpha, gamma)
    series = " + ".join(f"{alpha:.2f}^{i}" for i in range(min(gamma, 3) + 1))
    if gamma > 3:
        series += " + …"
    # Both forms of E side by side: the series and the closed form agree.
    closed = DASH if alpha == 1.0 else f"{(1 - alpha ** (gamma + 1)) / (1 - alpha):.3f}"
    cost = cost_model.round_cost(gamma, c_draft, c_verify)
    speedup = cost_model.speedup(alpha, gamma, c_draft, c_verify)
    verdict = "faster than plain" if speedup > 1.0 else "not faster than plain"
    choice = cost_model.best_gamma(alpha, c_draft, c_verify)
    best = f"{choice.gamma} at {choice.speedup:.2f}×"
    if choice.message:
        best += f" — {choice.message}"
    return {
        "expected": f"{e:.3f}   (closed form {closed})",
        "expected_tip": f"E as a series: {series} = {e:.3f}; closed form {closed}",
        "cost": f"{cost:.2f}   ({gamma} × {c_draft:.2f} + {c_verify:.2f})",
        "speedup": f"{speedup:.2f}×   ({verdict})",
        "passes": f"{cost_model.passes_per_token(alpha, gamma, c_draft, c_verify):.3f}",
        "ceiling": f"{cost_model.ceiling_fraction(alpha, gamma) * 100:.1f} %",
        "best": best,
    }
