"""Tokens per second with the machine quiet and with one CPU-bound process beside it, for each
candidate thread setting (scripts/contention-bench; method in docs/threads.md).

llama.cpp's CPU threads meet at a barrier after every operation of the graph, hundreds of times
per token. When one of them is descheduled because another process wants the core, the others
wait at the barrier, spinning if OpenMP tells them to: a single competing process can cut the
speed tenfold. Whether the threads spin (OMP_WAIT_POLICY) is read by the OpenMP runtime once,
when it loads, so every measurement runs `specchat generate` in a fresh process with its own
environment.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from app.llama.threads import physical_cores

PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


@dataclass(frozen=True, slots=True)
class Candidate:
    label: str
    threads: int | None  # None: SpecChat's own choice (the cores other processes leave free)
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Outcome:
    label: str
    threads: int | None
    env: dict[str, str]
    quiet_tok_s: list[float]
    contended_tok_s: list[float]

    @property
    def quiet(self) -> float:
        return statistics.median(self.quiet_tok_s)

    @property
    def contended(self) -> float:
        return statistics.median(self.contended_tok_s)

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["quiet_median"] = round(self.quiet, 2)
        data["contended_median"] = round(self.contended, 2)
        data["kept_under_contention"] = round(self.contended / self.quiet, 3)
        return data


# Every candidate names the whole wait policy, so no row depends on what the shell exported;
# an empty value removes the variable (OpenMP's own default: spin briefly, then sleep).
OPENMP_DEFAULT = {"OMP_WAIT_POLICY": "", "GOMP_SPINCOUNT": ""}


def candidates() -> list[Candidate]:
    cores = physical_cores()
    out = [
        Candidate(
            "all cores, spinning waits (before)",
            cores,
            {**OPENMP_DEFAULT, "OMP_WAIT_POLICY": "ACTIVE"},
        ),
        Candidate("all cores, OpenMP default waits", cores, dict(OPENMP_DEFAULT)),
        Candidate(
            "all cores, passive waits", cores, {**OPENMP_DEFAULT, "OMP_WAIT_POLICY": "PASSIVE"}
        ),
        Candidate("default: the cores left free", None, dict(OPENMP_DEFAULT)),
    ]
    if cores > 1:
        out.append(Candidate("one core fewer", cores - 1, dict(OPENMP_DEFAULT)))
    return out


def measure(
    target: str,
    candidate: Candidate,
    max_tokens: int,
    *,
    draft: str | None = None,
    timeout_s: float = 600,
) -> float:
    env = {k: v for k, v in os.environ.items() if k not in candidate.env}
    env.update({k: v for k, v in candidate.env.items() if v})
    args = [
        sys.executable,
        "-m",
        "app.cli.main",
        "generate",
        "--target",
        target,
        *(["--draft", draft] if draft else ["--no-spec"]),
        *(["--threads", str(candidate.threads)] if candidate.threads else []),
        "--max-tokens",
        str(max_tokens),
        "--chat",
        "--prompt",
        PROMPT,
        "--json",
    ]
    proc = subprocess.run(
        args, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{candidate.label}: {proc.stderr.strip()[-300:]}")
    stats = json.loads(proc.stdout)["stats"]
    if stats["tokens_per_second"] is None:
        raise RuntimeError(f"{candidate.label}: the model generated too little to time")
    return float(stats["tokens_per_second"])


@contextmanager
def competitor() -> Iterator[None]:
    """One CPU-bound process, like a busy browser tab, for as long as the block runs."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def run(target: str, max_tokens: int, repeats: int, draft: str | None = None) -> list[Outcome]:
    quiet: dict[str, list[float]] = {}
    busy: dict[str, list[float]] = {}
    chosen = candidates()
    # Interleaved, and in a rotated order each round, so drift of a shared machine (and
    # whatever the previous run left behind) falls on every candidate alike.
    for round_no in range(repeats):
        shift = round_no % len(chosen)
        ordered = chosen[shift:] + chosen[:shift]
        for candidate in ordered:
            rate = measure(target, candidate, max_tokens, draft=draft)
            quiet.setdefault(candidate.label, []).append(rate)
        with competitor():
            for candidate in ordered:
                rate = measure(target, candidate, max_tokens, draft=draft)
                busy.setdefault(candidate.label, []).append(rate)
    return [Outcome(c.label, c.threads, c.env, quiet[c.label], busy[c.label]) for c in chosen]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="contention-bench",
        description="tokens/s quiet and beside one CPU-bound process, per thread setting",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--target", default="demo", help="target GGUF, or 'demo'")
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="measurements per condition")
    parser.add_argument(
        "--draft", default=None, help="draft GGUF or 'demo': measure speculation instead of plain"
    )
    args = parser.parse_args(argv)
    outcomes = run(args.target, args.max_tokens, args.repeat, args.draft)
    report = {
        "logical_cpus": os.cpu_count(),
        "physical_cores": physical_cores(),
        "target": args.target,
        "draft": args.draft,
        "max_tokens": args.max_tokens,
        "repeat": args.repeat,
        "candidates": [o.to_json() for o in outcomes],
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
