"""The benchmark's speedup chart on a matplotlib Figure: the CLI saves it, the Compare dialog
shows it in a Qt canvas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.bench.plan import ALL_CLASSES
from app.bench.summary import BenchReport


def draw_speedup_chart(report: BenchReport, figure: Any) -> None:
    """Speedup over plain by configuration (groups) and prompt class (bars) on a matplotlib
    Figure; the CLI saves it, the Compare dialog shows it in a Qt canvas."""
    figure.clear()
    axes = figure.add_subplot(1, 1, 1)
    # A draft that failed to load (or a stopped run never reached) has no figure: a bar at 0
    # would read as measured.
    configs = tuple(c for c in report.configs if c.measured)
    series = [ALL_CLASSES, *report.classes] if len(report.classes) > 1 else [ALL_CLASSES]
    width = 0.8 / len(series)
    for s, name in enumerate(series):
        values = [
            (c.figures if name == ALL_CLASSES else c.by_class[name]).speedup or 0.0 for c in configs
        ]
        positions = [i - 0.4 + width * (s + 0.5) for i in range(len(configs))]
        axes.bar(
            positions,
            values,
            width=width,
            label=name,
            edgecolor="black" if name == ALL_CLASSES else "none",
            linewidth=0.8,
        )
        if name == ALL_CLASSES:
            # Whiskers: the lowest and highest paired speedup over prompts and repeats, so a
            # bar's height is read against the noise of the machine it was measured on.
            low = [v - (c.figures.speedup_min or v) for v, c in zip(values, configs, strict=True)]
            high = [(c.figures.speedup_max or v) - v for v, c in zip(values, configs, strict=True)]
            axes.errorbar(
                positions, values, yerr=[low, high], fmt="none", ecolor="black", capsize=3
            )
            predicted = [c.figures.predicted_speedup for c in configs]
            axes.scatter(
                [p for p, v in zip(positions, predicted, strict=True) if v is not None],
                [v for v in predicted if v is not None],
                marker="_",
                s=220,
                color="crimson",
                zorder=3,
                label="predicted (cost model)",
            )
    axes.axhline(1.0, color="black", linestyle="--", linewidth=1.0)
    axes.text(len(configs) - 0.5, 1.0, " plain = 1×", va="bottom", ha="right", fontsize=8)
    axes.set_xticks(range(len(configs)))
    axes.set_xticklabels([c.label for c in configs], rotation=20, ha="right", fontsize=8)
    # Two short lines: one long line is taller than the axes of a short chart and is clipped.
    axes.set_ylabel("speedup over\nplain decoding (×)")
    mode = "greedy" if report.settings.get("greedy") else f"T={report.settings.get('temperature')}"
    axes.set_title(
        f"{Path(report.target).name}: {mode}, {report.settings.get('max_tokens')} tokens, "
        f"×{report.settings.get('repeat')}",
        fontsize=9,
    )
    axes.legend(fontsize=7, ncols=min(len(series), 4))
    figure.tight_layout()


def plot_formats() -> tuple[str, ...]:
    """The file extensions save_plot can write (png, svg, pdf, ...), without their dots."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415

    return tuple(sorted(FigureCanvasAgg.get_supported_filetypes()))


def save_plot(report: BenchReport, path: Path, file_format: str | None = None) -> None:
    """Draw the chart into `path`, in `file_format` (png, svg, ...; by default the one its
    extension names)."""
    # The Agg canvas directly, not pyplot: no GUI backend is chosen or opened.
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415

    figure = Figure(figsize=(max(6.0, 1.2 * len(report.configs) + 2.0), 4.5), dpi=110)
    FigureCanvasAgg(figure)
    draw_speedup_chart(report, figure)
    figure.savefig(str(path), format=file_format)
