"""`specchat bench`: the schedule, the arithmetic of its figures, and real runs on the demo models.

Timings are never asserted (the machine is shared and noisy); structure, order, acceptance and
output identity are.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.bench.chart import save_plot
from app.bench.figures import RunRecord, figures_for
from app.bench.plan import (
    BenchConfig,
    BenchSettings,
    DraftChoice,
    interleaved_schedule,
    parse_gammas,
    plan_configs,
)
from app.bench.prompts import BUILTIN_CLASSES, BenchPrompt, builtin_prompts, load_prompts
from app.bench.session import run_benchmark
from app.bench.summary import BenchReport, summarize
from app.bench.table import format_table, to_csv
from app.cli.main import main
from app.engine.config import GenerationConfig, SamplingConfig
from app.engine.gamma import AUTO, OFF, fixed
from app.errors import InvalidSettingError
from app.llama.config import ModelConfig
from app.metrics.cost_model import expected_tokens
from app.metrics.measured import conditional_acceptance
from app.metrics.rounds import RoundRecord
from models.prune import useless_draft
from tests.helpers.bench_data import round_record, run_record

# One llama.cpp thread per model: the suite shares two cores with other work, and llama.cpp's
# spinning thread pool slows down many times over when it has more threads than free cores.
THREADS = 1
# A bench run of the command line small enough for a test.
QUICK_RUN = ("--n-ctx", "512", "--threads", str(THREADS), "--no-warmup", "--quiet")
ROOT = Path(__file__).resolve().parents[3]

# -- pure parts -------------------------------------------------------------------------------


def test_parse_gammas_accepts_lists_and_auto() -> None:
    assert parse_gammas("4") == [fixed(4)]
    assert parse_gammas("auto") == [AUTO]
    assert parse_gammas("2, 4,auto,4") == [fixed(2), fixed(4), AUTO]
    # off is the plain column every benchmark runs anyway
    assert parse_gammas("off,3,0") == [fixed(3)]


@pytest.mark.parametrize("text", ["off", "17", "x", "", "2,,-1"])
def test_parse_gammas_refuses_bad_values(text: str) -> None:
    with pytest.raises(InvalidSettingError):
        parse_gammas(text)


def test_plan_puts_plain_first_then_every_draft_at_every_gamma() -> None:
    drafts = [DraftChoice("a", Path("a.gguf")), DraftChoice("b", None)]
    configs = plan_configs(drafts, [fixed(2), AUTO])
    assert [c.label for c in configs] == ["plain", "a γ=2", "a γ=auto", "b γ=2", "b γ=auto"]
    assert configs[0].is_plain and configs[0].gamma == OFF
    assert configs[4].draft is not None and configs[4].draft.is_lookup


def test_schedule_interleaves_every_config_within_each_block() -> None:
    order = interleaved_schedule(n_configs=2, n_prompts=2, repeats=2)
    # A B A B: plain and the configuration alternate, prompt by prompt, repeat by repeat.
    assert order == [
        (0, 0, 0),
        (1, 0, 0),
        (0, 1, 0),
        (1, 1, 0),
        (0, 0, 1),
        (1, 0, 1),
        (0, 1, 1),
        (1, 1, 1),
    ]
    three = interleaved_schedule(n_configs=3, n_prompts=1, repeats=2)
    assert [c for c, _, _ in three] == [0, 1, 2, 0, 1, 2]


def test_builtin_prompts_cover_every_class() -> None:
    assert set(BUILTIN_CLASSES) == {
        *("chat", "code", "summarise", "vietnamese", "creative", "polish"),
        *("copy", "revision", "asked-again", "repeated"),
    }
    prompts = builtin_prompts()
    # Multi-turn prompts name the turns answered before them: in the same conversation for a
    # revision, in an earlier one (the past chats) for a question asked again.
    assert all(p.before and not p.recall for p in prompts if p.prompt_class == "revision")
    assert all(p.recall and not p.before for p in prompts if p.prompt_class == "asked-again")
    # Asked again word for word: the earlier conversation's question is the timed one.
    assert all(
        p.recall == (p.text,) and not p.before for p in prompts if p.prompt_class == "repeated"
    )
    assert all(p.text.strip() for p in prompts)
    assert len({p.name for p in prompts}) == len(prompts)
    summary = next(p for p in prompts if p.prompt_class == "summarise")
    assert len(summary.text.split()) > 250  # "summarise a long passage"
    assert [p.prompt_class for p in load_prompts("builtin:chat")] == ["chat"] * 3


def test_prompt_files_json_and_text(tmp_path: Path) -> None:
    as_json = tmp_path / "p.json"
    as_json.write_text(
        json.dumps(["hello", {"text": "bonjour", "class": "french", "chat": False}]),
        encoding="utf-8",
    )
    loaded = load_prompts(str(as_json))
    assert [(p.prompt_class, p.text, p.chat) for p in loaded] == [
        ("file", "hello", True),
        ("french", "bonjour", False),
    ]
    as_text = tmp_path / "p.txt"
    as_text.write_text("first\nprompt\n---\n\n---\nsecond\n", encoding="utf-8")
    assert [p.text for p in load_prompts(str(as_text))] == ["first\nprompt", "second"]


def test_a_prompt_file_carries_earlier_turns_of_a_dialogue(tmp_path: Path) -> None:
    path = tmp_path / "dialogues.json"
    revise = {"text": "Now shorter.", "class": "revision", "before": ["Describe a tide."]}
    again = {"text": "What is a tide?", "recall": ["What is a tide?"]}
    path.write_text(json.dumps([revise, again]), encoding="utf-8")

    loaded = load_prompts(str(path))

    assert [(p.before, p.recall) for p in loaded] == [
        (("Describe a tide.",), ()),
        ((), ("What is a tide?",)),
    ]


def test_the_revision_dialogues_in_the_docs_load_as_dialogues() -> None:
    dialogues = load_prompts(str(ROOT / "docs" / "prompts" / "revision-dialogues.json"))
    assert len(dialogues) == 8
    assert all(p.prompt_class == "revision" and len(p.before) == 1 for p in dialogues)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist"),
        ("{}", "JSON list"),
        ("[1]", "item 1"),
        ("---\n", "no prompts"),
        ('[{"text": "x", "before": "not a list"}]', '"before" must be a list of strings'),
        ('[{"text": "x", "recall": ["y"], "chat": false}]', '"recall" needs a chat prompt'),
    ],
)
def test_prompt_file_errors_are_one_line(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / ("p.json" if content and content.startswith(("{", "[")) else "p.txt")
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidSettingError, match=message):
        load_prompts(str(path))
    with pytest.raises(InvalidSettingError, match="unknown prompt class"):
        load_prompts("builtin:chat,klingon")


def _round(index: int, drafted: int, accepted: int, draft_s: float, verify_s: float) -> RoundRecord:
    return round_record(index, drafted, accepted, draft_s=draft_s, verify_s=verify_s)


def _run(config: int, rounds: list[RoundRecord], tokens: tuple[int, ...], **kw: Any) -> RunRecord:
    fields = {"prompt_class": "chat", "prompt_tokens": 10, "ttft_s": 0.05, **kw}
    return run_record(config, rounds, tokens, **fields)


def _seed_table_runs() -> tuple[RunRecord, RunRecord]:
    """A worked round table as measured runs: acceptance string 111111001110101111 at γ = 4,
    a draft step a tenth of a plain step, a verification pass as dear as one plain step."""
    step = 0.01
    spec_rounds = [_round(i, 4, a, 4 * 0.1 * step, step) for i, a in enumerate([4, 2, 0, 3, 1, 4])]
    plain_rounds = [_round(i, 0, 0, 0.0, step) for i in range(20)]
    tokens = tuple(range(20))
    return _run(0, plain_rounds, tokens), _run(1, spec_rounds, tokens)


def test_figures_reproduce_the_seed_round_table() -> None:
    plain, spec = _seed_table_runs()
    f = figures_for([spec], [plain], greedy=True)
    assert f.rounds == 6 and f.generated_tokens == 20
    assert f.tokens_per_round == pytest.approx(20 / 6)
    assert f.c_draft == pytest.approx(0.10)
    assert f.c_verify == pytest.approx(1.00)
    # 20 tokens for a cost of 8.40 plain steps: 2.38x measured.
    assert f.speedup == pytest.approx(20 / 8.4)
    assert f.speedup == pytest.approx(2.38, abs=0.005)
    # Per-position α makes E equal the measured tokens per round, so the prediction is exact.
    assert f.predicted_speedup == pytest.approx(20 / 8.4)
    # Seed's α: 14 accepted of 18 judged flags; the independent-positions formula from it.
    assert f.alpha == pytest.approx(14 / 18)
    assert f.predicted_speedup_iid == pytest.approx(expected_tokens(14 / 18, 4) / 1.4)
    assert f.acceptance_rate == pytest.approx(14 / 24)  # accepted / drafted, the metrics' rate
    assert f.identical_to_plain is True
    assert f.per_position_acceptance == pytest.approx([5 / 6, 4 / 6, 3 / 6, 2 / 6])


def test_the_prediction_takes_acceptance_among_rounds_of_the_same_length() -> None:
    """γ auto's confidence stop ends a draft where it turns unsure: here its short rounds end
    in a refusal and its long ones are kept whole. From the acceptance among the rounds of each
    length, E is what each round made, so with costs as timed the prediction is the measured
    speedup; pooled over lengths, the long rounds would carry the short ones' refusals (E 4.5
    for the 7 tokens they made) and the prediction would read 2.50× for 3.21×."""
    step = 0.01
    short = [_round(i, 2, 1, 2 * 0.1 * step, step) for i in range(6)]
    long = [_round(6 + i, 6, 6, 6 * 0.1 * step, step) for i in range(6)]
    spec_rounds = [*short, *long]
    tokens = tuple(range(sum(r.emitted for r in spec_rounds)))
    plain_rounds = [_round(i, 0, 0, 0.0, step) for i in range(len(tokens))]
    f = figures_for([_run(1, spec_rounds, tokens)], [_run(0, plain_rounds, tokens)], greedy=True)
    assert f.speedup == pytest.approx(54 / 16.8)
    assert f.predicted_speedup == pytest.approx(f.speedup)


def test_conditional_acceptance_counts_only_judged_positions() -> None:
    rounds = [_round(0, 4, 0, 0, 0), _round(1, 4, 4, 0, 0), _round(2, 4, 2, 0, 0)]
    # Position 1 judged 3x (kept 2); position 2 judged 2x (kept 2); position 3 judged 2x (kept
    # 1: the third round was rejected there); position 4 judged once, kept.
    assert conditional_acceptance(rounds) == pytest.approx([2 / 3, 1.0, 0.5, 1.0])


def test_identity_and_speedup_are_paired_by_prompt_and_repeat() -> None:
    plain_a = _run(0, [_round(i, 0, 0, 0, 0.01) for i in range(4)], (1, 2, 3, 4), prompt=0)
    plain_b = _run(0, [_round(i, 0, 0, 0, 0.02) for i in range(4)], (5, 6, 7, 8), prompt=1)
    same = _run(1, [_round(0, 3, 3, 0.003, 0.01)], (1, 2, 3, 4), prompt=0)
    differs = _run(1, [_round(0, 3, 3, 0.003, 0.01)], (5, 6, 7, 9), prompt=1)
    f = figures_for([same, differs], [plain_a, plain_b], greedy=True)
    assert f.identical_to_plain is False and f.mismatched_runs == 1
    assert f.speedup_min is not None and f.speedup_max is not None
    assert f.speedup_min < f.speedup_max  # prompt 1's plain run was twice as slow
    assert figures_for([same], [plain_a], greedy=False).identical_to_plain is None


def test_summarize_builds_the_issue_json_shape() -> None:
    plain, spec = _seed_table_runs()
    draft = DraftChoice("d", Path("d.gguf"))
    configs = [BenchConfig("plain", None, OFF), BenchConfig("d γ=4", draft, fixed(4))]
    prompts = [BenchPrompt("chat", "x", "hi")]
    report = summarize(
        target="t.gguf",
        configs=configs,
        prompts=prompts,
        prompt_tokens=[10],
        runs=[plain, spec],
        base=GenerationConfig(max_tokens=20),
        repeats=1,
    )
    data = report.to_json()
    assert set(data) >= {"plain", "configs", "settings", "prompts", "runs", "drafts"}
    config = data["configs"][0]
    for key in (
        "label",
        "draft",
        "gamma",
        "tokens_per_second",
        "speedup",
        "acceptance_rate",
        "tokens_per_round",
        "per_position_acceptance",
        "ttft_s",
        "c_draft",
        "c_verify",
        "predicted_speedup",
        "identical_to_plain",
        "peak_rss_bytes",
        "model_memory_bytes",
        "by_class",
    ):
        assert key in config, key
    assert config["by_class"]["chat"]["speedup"] == pytest.approx(config["speedup"])
    json.dumps(data)  # everything in it is JSON-ready
    rows = list(csv.DictReader(io.StringIO(to_csv(report))))
    assert [(r["label"], r["class"]) for r in rows] == [
        ("plain", "all"),
        ("plain", "chat"),
        ("d γ=4", "all"),
        ("d γ=4", "chat"),
    ]


# -- real runs on the demo models -------------------------------------------------------------


@pytest.fixture(scope="module")
def pruned_draft(demo_models: Any) -> Path:
    # Cached beside the other derived demo files; tests/integration/models/test_prune.py builds
    # it afresh.
    return useless_draft(demo_models.q4_1, Path(demo_models.f32).parent)


@pytest.fixture(scope="module")
def greedy_report(demo_models: Any, pruned_draft: Path) -> Iterator[BenchReport]:
    prompts = [BenchPrompt("chat", "short", "Name three colours."), *load_prompts("builtin:code")]
    yield run_benchmark(
        ModelConfig(str(demo_models.f32), n_ctx=1024, n_threads=THREADS),
        BenchSettings(
            drafts=[DraftChoice("q4_1", demo_models.q4_1), DraftChoice("pruned", pruned_draft)],
            gammas=[fixed(3), AUTO],
            prompts=prompts[:2],
            base=GenerationConfig(max_tokens=12, gamma=fixed(4)),
            repeats=2,
            draft_template=ModelConfig(str(demo_models.q4_1), n_ctx=1024, n_threads=THREADS),
        ),
    )


def test_real_runs_follow_the_interleaved_order(greedy_report: BenchReport) -> None:
    labels = ["plain", "q4_1 γ=3", "q4_1 γ=auto", "pruned γ=3", "pruned γ=auto"]
    expected = [
        (labels[c], p, r) for c, p, r in interleaved_schedule(len(labels), n_prompts=2, repeats=2)
    ]
    names = [p["name"] for p in greedy_report.prompts]
    got = [(run["config"], names.index(run["prompt"]), run["repeat"]) for run in greedy_report.runs]
    assert got == expected
    assert [run["sequence"] for run in greedy_report.runs] == list(range(len(expected)))


def test_greedy_output_is_identical_to_plain_in_every_configuration(
    greedy_report: BenchReport,
) -> None:
    plain = greedy_report.plain
    assert plain.figures.identical_to_plain is None  # compared with itself it says nothing
    assert all(f.identical_to_plain is None for f in plain.by_class.values())
    for config in greedy_report.configs:
        assert config.figures.identical_to_plain is True, config.label
        for name, figures in config.by_class.items():
            assert figures.identical_to_plain is True, (config.label, name)


def test_acceptance_tells_the_good_draft_from_the_useless_one(greedy_report: BenchReport) -> None:
    good = greedy_report.config("q4_1 γ=3").figures
    useless = greedy_report.config("pruned γ=3").figures
    assert good.acceptance_rate is not None and good.acceptance_rate > 0.6
    assert useless.acceptance_rate is not None and useless.acceptance_rate < 0.05
    assert useless.tokens_per_round == pytest.approx(1.0, abs=0.05)
    assert useless.drafted > 0


def test_each_run_lists_the_draft_length_and_the_kept_tokens_of_every_round(
    greedy_report: BenchReport,
) -> None:
    data = greedy_report.to_json()
    histograms: dict[str, Counter[int]] = {}
    for run in data["runs"]:
        gammas, drafted, accepted = run["gammas"], run["drafted"], run["accepted"]
        assert len(gammas) == len(drafted) == len(accepted) > 0, run["config"]
        assert all(0 <= a <= d for d, a in zip(drafted, accepted, strict=True)), run["config"]
        assert all(s <= d for s, d in zip(run["suffix_drafted"], drafted, strict=True))
        # The prompt's pass draws the first token; a round emits its kept tokens plus one from
        # the target; only the last round can be cut short by the token budget.
        emitted = 1 + sum(a + 1 for a in accepted)
        assert emitted - (drafted[-1] + 1) < run["generated_tokens"] <= emitted, run["config"]
        if run["config"] == "plain":
            assert set(gammas) == {0} and set(accepted) == {0}
        histograms.setdefault(run["config"], Counter()).update(gammas)
    # The runs' γ are what each configuration's histogram counts.
    for config in data["configs"]:
        assert histograms[config["label"]] == Counter(config["gamma_histogram"])
        assert config["suffix_accepted"] + config["model_accepted"] == config["accepted"]


def test_report_figures_are_complete(greedy_report: BenchReport, tmp_path: Path) -> None:
    data = greedy_report.to_json()
    assert data["plain"]["generated_tokens"] > 0
    assert set(data["classes"]) == {"chat", "code"}
    for config in greedy_report.configs:
        f = config.figures
        assert f.runs == 4
        assert f.tokens_per_second is not None and f.tokens_per_second > 0
        assert f.speedup is not None and f.speedup > 0
        if f.drafted:
            assert f.c_draft is not None and f.c_verify is not None
            assert f.predicted_speedup is not None and f.predicted_speedup > 0
        else:
            # Only γ auto may keep a draft model it measured as useless out of every round (the
            # hybrid learnt it at γ 3); its figures then price no draft.
            assert config.gamma.is_auto and config.label.startswith("pruned")
            assert f.c_draft is None
        assert f.ttft_s is not None
        assert config.model_memory_bytes > greedy_report.plain.model_memory_bytes
        assert config.peak_rss_bytes is not None and config.peak_rss_bytes > 0
        assert set(config.by_class) == {"chat", "code"}
        if config.gamma == 3:
            assert f.mean_gamma is not None and f.mean_gamma <= 3
    assert {d.draft for d in greedy_report.drafts} == {"q4_1", "pruned"}
    plot = tmp_path / "speedup.png"
    save_plot(greedy_report, plot)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sampled_runs_do_not_claim_identity(demo_models: Any) -> None:
    report = run_benchmark(
        ModelConfig(str(demo_models.f32), n_ctx=512, n_threads=THREADS),
        BenchSettings(
            drafts=[DraftChoice("q4_1", demo_models.q4_1)],
            gammas=[fixed(2)],
            prompts=[BenchPrompt("chat", "short", "Say hello.")],
            base=GenerationConfig(max_tokens=6, sampling=SamplingConfig(temperature=0.8, seed=7)),
            draft_template=ModelConfig(str(demo_models.q4_1), n_ctx=512, n_threads=THREADS),
            warmup=False,
        ),
    )
    assert report.configs[0].figures.identical_to_plain is None
    assert report.settings["greedy"] is False


# -- the command line -------------------------------------------------------------------------


def test_cli_writes_json_csv_and_plot(
    demo_models: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Name a fruit.", encoding="utf-8")
    out = {ext: tmp_path / f"bench.{ext}" for ext in ("json", "csv", "png")}
    code = main(
        [
            "bench",
            "--target",
            str(demo_models.f32),
            "--draft",
            str(demo_models.q4_1),
            "--draft",
            "ngram",
            "--gamma",
            "2,auto",
            "--prompts",
            str(prompts),
            "--max-tokens",
            "6",
            *QUICK_RUN,
            "--json",
            str(out["json"]),
            "--csv",
            str(out["csv"]),
            "--plot",
            str(out["png"]),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "plain" in printed and "γ=auto" in printed
    data = json.loads(out["json"].read_text(encoding="utf-8"))
    assert [c["label"] for c in data["configs"]] == [
        "SmolLM2-135M-Instruct.Q4_1 γ=2",
        "SmolLM2-135M-Instruct.Q4_1 γ=auto",
        "suffix γ=2",
        "suffix γ=auto",
    ]
    assert all(c["identical_to_plain"] is True for c in data["configs"])
    assert out["csv"].read_text(encoding="utf-8").startswith("label,draft,gamma,class")
    assert out["png"].stat().st_size > 0


def test_cli_writes_the_report_to_stdout_for_a_dash(
    demo_models: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `--json -` wrote a file named "-"; a pipe to jq read the table.
    monkeypatch.chdir(tmp_path)
    code = main(
        [
            "bench",
            "--target",
            str(demo_models.f32),
            "--draft",
            "suffix",
            "--gamma",
            "auto",
            "--prompts",
            "builtin:chat",
            "--max-tokens",
            "4",
            *QUICK_RUN,
            "--json",
            "-",
        ]
    )
    assert code == 0
    printed = capsys.readouterr()
    report = json.loads(printed.out)
    assert [c["label"] for c in report["configs"]] == ["suffix γ=auto"]
    assert printed.err.startswith("configuration") and "suffix γ=auto" in printed.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["--json", "-", "--csv", "-"], 2, "--csv - is the same file as --json"),
        (["--gamma", "0"], 2, "--gamma needs at least one draft length or 'auto'"),
        (["--repeat", "0"], 2, "--repeat must be in 1..1000, got 0"),
        # Refused before the run's schedule, built whole, fills the memory.
        (["--repeat", "99999999999"], 2, "--repeat must be in 1..1000, got 99999999999"),
        (["--prompts", "builtin:klingon"], 2, "unknown prompt class klingon; built-in classes"),
        (["--json", "/no/such/folder/x.json"], 2, "folder /no/such/folder does not exist"),
    ],
)
def test_cli_user_errors_are_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    status: int,
    message: str,
) -> None:
    # All of these are refused before any model loads, so the model paths need not exist.
    base = ["bench", "--target", str(tmp_path / "t.gguf"), "--draft", str(tmp_path / "d.gguf")]
    try:
        code = main([*base, *args])
    except SystemExit as exited:  # argparse's own refusal of a flag value
        code = int(str(exited.code))
    assert code == status
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err
    assert "\n" not in err and "Traceback" not in err


def test_cli_missing_model_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--target", str(tmp_path / "t.gguf"), "--draft", "ngram"])
    assert code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot load model") and "no such file" in err


def test_table_warns_when_one_prompts_repeats_ran_on_a_noisy_machine() -> None:
    """Plain decoding five times slower in one repeat than in the other, the speculative runs
    alike: the same prompt's paired speedups differ 5-fold, which is the machine's load."""
    plain_fast = _run(0, [_round(i, 0, 0, 0, 0.01) for i in range(4)], (1, 2, 3, 4))
    plain_slow = _run(0, [_round(i, 0, 0, 0, 0.05) for i in range(4)], (1, 2, 3, 4), repeat=1)
    spec = [
        _run(1, [_round(0, 3, 3, 0.003, 0.01)], (1, 2, 3, 4), repeat=r, sequence=r) for r in (0, 1)
    ]
    draft = DraftChoice("d", Path("d.gguf"))
    report = summarize(
        target="t.gguf",
        configs=[BenchConfig("plain", None, OFF), BenchConfig("d γ=3", draft, fixed(3))],
        prompts=[BenchPrompt("chat", "a", "x")],
        prompt_tokens=[3],
        runs=[plain_fast, plain_slow, *spec],
        base=GenerationConfig(max_tokens=4),
        repeats=2,
    )
    assert report.configs[0].figures.speedup_repeat_spread == pytest.approx(5.0)
    assert "warning: paired speedups of 1 configuration(s) varied" in format_table(report)


def test_table_does_not_call_a_spread_between_prompts_noise() -> None:
    """One prompt drafts five times as fast as another, in both repeats alike: that is the
    workload (a question asked again against a new one), not a busy machine."""
    plain = [
        _run(0, [_round(i, 0, 0, 0, 0.01) for i in range(4)], (1, 2, 3, 4), prompt=p, repeat=r)
        for p in (0, 1)
        for r in (0, 1)
    ]
    verify_s = {0: 0.04, 1: 0.008}  # 4 tokens in one round: 1x and 5x plain
    spec = [
        _run(1, [_round(0, 3, 3, 0.0, verify_s[p])], (1, 2, 3, 4), prompt=p, repeat=r)
        for p in (0, 1)
        for r in (0, 1)
    ]
    draft = DraftChoice("d", Path("d.gguf"))
    report = summarize(
        target="t.gguf",
        configs=[BenchConfig("plain", None, OFF), BenchConfig("d γ=3", draft, fixed(3))],
        prompts=[BenchPrompt("chat", "a", "x"), BenchPrompt("copy", "b", "y")],
        prompt_tokens=[3, 3],
        runs=[*plain, *spec],
        base=GenerationConfig(max_tokens=4),
        repeats=2,
    )
    figures = report.configs[0].figures
    assert figures.speedup_max / figures.speedup_min == pytest.approx(5.0)
    assert figures.speedup_repeat_spread == pytest.approx(1.0)
    assert "warning" not in format_table(report)
