"""Figures for the hostile-file corpus through the real CLI (not a test: it prints a summary).

    python -m tests.helpers.corpus_report [TARGET_FOR_DRAFT_RUNS]

Builds the corpus in a temporary folder, runs `models inspect FILE`, `generate --target FILE` and
`generate --target TARGET --draft FILE` for every case, each in its own process with a fresh data
folder per mode, and prints per mode: runs, signal deaths, tracebacks, runs over 30 s, runs over
1 GB peak memory, refusals that are not exactly one `error:` line, the slowest run and the largest
peak memory. Wall times are as measured on the machine at hand (noisy on a loaded one).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from tests.helpers.hostile_gguf import build_corpus
from tests.helpers.measure import Measured, run_measured
from tests.helpers.model_files import bundled_q4_1

REPO_ROOT = Path(__file__).resolve().parents[2]
GENERATE = ["generate", "--prompt", "hi", "--max-tokens", "2", "--threads", "1", "--n-ctx", "64"]


def _summary(label: str, runs: dict[str, Measured], expect_refusal: dict[str, bool]) -> None:
    def one_error_line(run: Measured) -> bool:
        lines = run.stderr.splitlines()
        return run.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ")

    bad_refusals = [n for n, r in runs.items() if expect_refusal[n] and not one_error_line(r)]
    slowest = max(runs.items(), key=lambda item: item[1].seconds)
    largest = max(runs.items(), key=lambda item: item[1].max_rss_bytes)
    print(
        f"{label}: {len(runs)} runs, "
        f"{sum(r.signal_death for r in runs.values())} signal deaths, "
        f"{sum('Traceback' in r.stderr for r in runs.values())} tracebacks, "
        f"{sum(r.seconds > 30 for r in runs.values())} over 30 s, "
        f"{sum(r.max_rss_bytes > 1024**3 for r in runs.values())} over 1 GB, "
        f"{sum(expect_refusal.values())} refusals expected, "
        f"{len(bad_refusals)} not exactly one error line {bad_refusals}; "
        f"slowest {slowest[1].seconds:.1f} s ({slowest[0]}), "
        f"largest {largest[1].max_rss_bytes / 2**20:.0f} MiB ({largest[0]})"
    )


def main() -> int:
    draft_target = sys.argv[1] if len(sys.argv) > 1 else None
    with tempfile.TemporaryDirectory() as tmp:
        cases = build_corpus(bundled_q4_1(), Path(tmp) / "corpus")
        modes: dict[str, list[str]] = {
            "models inspect FILE": ["models", "inspect"],
            "generate --target FILE": [*GENERATE, "--target"],
        }
        if draft_target:
            modes["generate --draft FILE"] = [*GENERATE, "--target", draft_target, "--draft"]
        for label, args in modes.items():
            data = Path(tmp) / f"data-{len(label)}"
            env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "SPECCHAT_DATA_DIR": str(data)}
            runs = {
                case.name: run_measured(
                    [sys.executable, "-m", "app.cli", *args, str(case.path)],
                    timeout_s=120,
                    env=env,
                    cwd=str(REPO_ROOT),
                )
                for case in cases
            }
            inspect = label.startswith("models")
            expect = {c.name: (c.refuse is not None) if inspect else True for c in cases}
            _summary(label, runs, expect)
    return 0


if __name__ == "__main__":
    sys.exit(main())
