"""The bench's figures and table on scripted runs: undefined rates are None, never 0; the
second-half rate counts the same wall time as tokens/s; long labels are never cut."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

import pytest

from app.bench.figures import figures_for
from app.bench.plan import BenchConfig, DraftChoice
from app.bench.prompts import BenchPrompt
from app.bench.summary import summarize
from app.bench.table import format_table, to_csv
from app.engine.config import GenerationConfig
from app.engine.gamma import AUTO, OFF, fixed
from tests.helpers.bench_data import round_record, run_record, seed_rounds


def test_tokens_per_second_is_none_when_no_token_was_decoded() -> None:
    # --max-tokens 1: each reply is its first token alone, drawn from the prompt's pass.
    one = replace(run_record(0, [round_record(0, 0, 0)], (7,)), generation_s=0.01)
    figures = figures_for([one], [one], greedy=True)
    assert figures.tokens_per_second is None
    assert figures.speedup is None


def test_plain_decoding_reads_one_token_a_round_though_its_last_step_drew_the_end() -> None:
    last = replace(round_record(9, 0, 0), emitted=0)  # the end of the reply, never shown
    plain = run_record(0, [*(round_record(i, 0, 0) for i in range(9)), last])
    assert figures_for([plain], [plain], greedy=True).tokens_per_round == 1.0


def test_the_second_half_rate_counts_catch_up_and_overhead_like_tokens_per_second() -> None:
    plain = run_record(0, [round_record(i, 0, 0) for i in range(20)])
    rounds = seed_rounds()
    slow_tail = [
        replace(r, draft_catchup_s=1.0, overhead_s=0.5) if i >= 3 else r
        for i, r in enumerate(rounds)
    ]
    fast, slow = (run_record(1, rs) for rs in (rounds, slow_tail))
    fast_half = figures_for([fast], [plain], greedy=True).speedup_second_half
    slow_half = figures_for([slow], [plain], greedy=True).speedup_second_half
    assert fast_half is not None and slow_half is not None
    # 1.5 s more in each of three second-half rounds against ~0.014 s a round before.
    assert slow_half < fast_half / 50


def _report_with_labels(*labels: str) -> str:
    drafts = [DraftChoice(label, Path(f"{label}.gguf")) for label in labels]
    configs = [BenchConfig("plain", None, OFF)]
    for draft in drafts:
        configs += [
            BenchConfig(f"{draft.label} γ=3", draft, fixed(3)),
            BenchConfig(f"{draft.label} γ=auto", draft, AUTO),
        ]
    plain_rounds = [round_record(i, 0, 0) for i in range(20)]
    runs = [run_record(0, plain_rounds, sequence=0)]
    runs += [run_record(i, seed_rounds(), sequence=i) for i in range(1, len(configs))]
    report = summarize(
        target="target.gguf",
        configs=configs,
        prompts=[BenchPrompt("asked-again", "p", "hello")],
        prompt_tokens=[5],
        runs=runs,
        base=GenerationConfig(max_tokens=20),
        repeats=1,
    )
    return format_table(report)


def test_long_draft_names_keep_their_gamma_in_the_table() -> None:
    table = _report_with_labels("SmolLM2-135M-Instruct.Q4_1+suffix", "SmolLM2-135M-Instruct.Q4_1")
    rows = [line.split("  ")[0] for line in table.splitlines()]
    for label in (
        "SmolLM2-135M-Instruct.Q4_1+suffix γ=3",
        "SmolLM2-135M-Instruct.Q4_1+suffix γ=auto",
        "SmolLM2-135M-Instruct.Q4_1 γ=3",
        "SmolLM2-135M-Instruct.Q4_1 γ=auto",
    ):
        assert sum(1 for row in rows if row.strip() == label) == 1, table


def test_accepted_tokens_are_split_by_what_proposed_them_and_runs_list_the_gamma_asked() -> None:
    # Two hybrid rounds at γ 4: the suffix index drafted 3 then 6 free tokens (past γ).
    hybrid = [
        replace(round_record(0, 5, 4), gamma=4, suffix_drafted=3),
        replace(round_record(1, 8, 7), gamma=4, suffix_drafted=6),
    ]
    plain_rounds = [round_record(i, 0, 0) for i in range(13)]
    draft = DraftChoice("hybrid", Path("d.gguf"))
    report = summarize(
        target="t.gguf",
        configs=[BenchConfig("plain", None, OFF), BenchConfig("hybrid γ=auto", draft, AUTO)],
        prompts=[BenchPrompt("chat", "p", "hello")],
        prompt_tokens=[5],
        runs=[run_record(0, plain_rounds), run_record(1, hybrid, sequence=1)],
        base=GenerationConfig(max_tokens=20),
        repeats=1,
    ).to_json()
    config = report["configs"][0]
    assert (config["accepted"], config["suffix_accepted"], config["model_accepted"]) == (11, 9, 2)
    run = report["runs"][1]
    assert run["gammas"] == [4, 4] and run["drafted"] == [5, 8]
    assert run["suffix_drafted"] == [3, 6]
    assert config["gamma_histogram"] == {4: 2}


def test_the_median_paired_speedup_shows_what_a_stall_did_to_the_aggregate() -> None:
    # Three prompts: twice plain's speed on two, a stall ten times as long on the third. The
    # stall's seconds weigh in the aggregate; the median of the paired ratios stays at 2.
    plain = [
        run_record(0, [round_record(i, 0, 0, draft_s=0.0) for i in range(4)], prompt=p)
        for p in range(3)
    ]
    verify_s = {0: 0.02, 1: 0.02, 2: 0.2}
    spec = [
        run_record(1, [round_record(0, 3, 3, draft_s=0.0, verify_s=verify_s[p])], prompt=p)
        for p in range(3)
    ]
    draft = DraftChoice("d", Path("d.gguf"))
    report = summarize(
        target="t.gguf",
        configs=[BenchConfig("plain", None, OFF), BenchConfig("d γ=3", draft, fixed(3))],
        prompts=[BenchPrompt("chat", name, "x") for name in "abc"],
        prompt_tokens=[3, 3, 3],
        runs=[*plain, *spec],
        base=GenerationConfig(max_tokens=4),
        repeats=1,
    )
    figures = report.configs[0].figures
    assert figures.speedup == pytest.approx(0.5)
    assert figures.speedup_median == pytest.approx(2.0)
    assert report.to_json()["configs"][0]["speedup_median"] == pytest.approx(2.0)
    (row,) = [r for r in csv.DictReader(io.StringIO(to_csv(report))) if r["class"] == "all"][1:]
    assert float(row["speedup_median"]) == pytest.approx(2.0)
    table = format_table(report).splitlines()
    assert table[0].split()[4] == "median"
    # The row of "d γ=3": its label's two words and tok/s, then speedup, range and median.
    assert table[3].split()[3:6] == ["0.50×", "0.20-2.00", "2.00×"]
