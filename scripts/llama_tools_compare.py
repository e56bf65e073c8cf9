"""SpecChat's defaults beside llama.cpp's own programs on the demo models
(scripts/llama-tools-compare builds llama-bench and llama-speculative-simple and runs this).

Two questions, each answered in one interleaved run, repeat by repeat:
- plain decoding: `specchat bench`'s plain rate at SpecChat's default thread policy against
  `llama-bench` tg at its default threads, each from an empty context (SpecChat from one-word
  raw prompts, `EMPTY_CONTEXT_PROMPTS`) and each after the prompts (`llama-bench -d` at their
  mean length): attention over a few hundred tokens costs a 135M-parameter model a few percent
  a step, so only the pairs at one depth compare the programs;
- speculative decoding: `specchat bench` at its defaults (γ auto, the suffix index beside the
  draft model) against `llama-speculative-simple` with the same draft model at llama.cpp's
  defaults (common/common.h), on the same prompts: each rendered through the target's chat
  template, which `llama-speculative-simple` reads as raw text with its control tokens.
Both sides report decode rates (the prompt apart) over the same number of new tokens, greedy.
llama.cpp's programs run at their defaults, flash attention 'auto' (on for the CPU backend),
and again with it off, as SpecChat runs a model held in host memory (app/llama/model.py): the
second pair tells the kernels' share of the difference from the rest.
The report is a JSON of every run, with the commands.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.llama.backend import extra_buffers_safe

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PROMPTS = "builtin:chat,code,summarise,creative"
# Raw text, no chat template: one token of context, as `llama-bench` tg's empty one (what the
# model writes after them does not change what a plain step costs).
EMPTY_CONTEXT_PROMPTS = ("Once", "The", "In", "We")
_DECODED = re.compile(r"decoded\s+(\d+) tokens in\s+([0-9.]+) seconds")
_ACCEPT = re.compile(r"accept\s+=\s+([0-9.]+)%")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llama-tools-compare",
        description="SpecChat's default plain and speculative decoding against llama-bench and "
        "llama-speculative-simple on the demo models, interleaved.",
    )
    parser.add_argument("--bin", type=Path, required=True, help="folder of llama.cpp's binaries")
    add_run_arguments(parser, prompts=DEFAULT_PROMPTS, repeat=2)
    return parser


def add_run_arguments(parser: argparse.ArgumentParser, *, prompts: str, repeat: int) -> None:
    """The flags every comparison with llama.cpp's programs takes: where the report goes, the
    prompts, reply length, repeats and the demo models' folder."""
    parser.add_argument("--json", type=Path, default=Path(f"{parser.prog}.json"))
    parser.add_argument("--prompts", default=prompts)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=repeat)
    parser.add_argument(
        "--models-dir", type=Path, default=None, help="where the demo models are (or are built)"
    )


def rendered_prompts(spec: str, target: Path) -> list[tuple[str, str]]:
    """(user text, the prompt as the target's template renders it) for each single-turn
    prompt of the set; the multi-turn ones need earlier replies and are left out."""
    from app.bench.prompts import load_prompts  # noqa: PLC0415 - needs the project on sys.path
    from app.engine.chat_template import render_chat  # noqa: PLC0415
    from models.gguf.scan import scan_header  # noqa: PLC0415

    template = scan_header(target, target.stat().st_size).scalars.get("tokenizer.chat_template")
    out = []
    for prompt in load_prompts(spec):
        if prompt.before or prompt.recall or not prompt.chat:
            continue
        text = render_chat(
            str(template) if template else None, [{"role": "user", "content": prompt.text}]
        )
        out.append((prompt.text, text))
    return out


def no_repack() -> list[str]:
    """llama.cpp's flag for SpecChat's buffer policy where its extra CPU buffers are off (a CPU
    with AMX, app/llama/backend.py), so both sides run the same kernels."""
    return [] if extra_buffers_safe() else ["--no-repack"]


def llama_bench(binary: Path, target: Path, max_tokens: int, depth: int) -> dict[str, Any]:
    """tg from an empty context and from `depth` tokens of context, at llama-bench's default
    flash attention and with it off."""
    command = [str(binary), "-m", str(target), "-p", "0", "-n", str(max_tokens), "-r", "3"]
    command += ["-d", f"0,{depth}", *([] if extra_buffers_safe() else ["--repack", "0"])]
    rate: dict[tuple[str, int], float] = {}
    for flash_attn in ("default", "0"):
        extra = [] if flash_attn == "default" else ["-fa", flash_attn]
        done = subprocess.run(
            [*command, *extra, "-o", "json"], capture_output=True, text=True, check=True
        )
        for row in json.loads(done.stdout):
            rate[flash_attn, int(row["n_depth"])] = float(row["avg_ts"])
    return {
        "command": command,
        "depth": depth,
        "tokens_per_second": rate["default", 0],
        "tokens_per_second_at_depth": rate["default", depth],
        "flash_attn_off_tokens_per_second": rate["0", 0],
        "flash_attn_off_tokens_per_second_at_depth": rate["0", depth],
    }


def speculative_simple(
    binary: Path,
    target: Path,
    draft: Path,
    prompts: Sequence[tuple[str, str]],
    max_tokens: int,
    *,
    extra: Sequence[str] = (),
) -> dict[str, Any]:
    base = [str(binary), "-m", str(target), "-md", str(draft), "-n", str(max_tokens)]
    base += ["--spec-type", "draft-simple", "--temp", "0", *no_repack(), *extra]
    tokens, seconds, accepts = 0, 0.0, []
    for _, text in prompts:
        done = subprocess.run(
            [*base, "-p", text], capture_output=True, text=True, check=True, cwd=ROOT
        )
        log = done.stdout + done.stderr
        decoded = _DECODED.search(log)
        if decoded is None:
            raise SystemExit(
                "error: llama-speculative-simple printed no decode rate:\n" + log[-800:]
            )
        tokens += int(decoded.group(1))
        seconds += float(decoded.group(2))
        accept = _ACCEPT.search(log)
        if accept:
            accepts.append(float(accept.group(1)) / 100)
    return {
        "command": [*base, "-p", "PROMPT"],
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_second": tokens / seconds,
        "acceptance": statistics.fmean(accepts) if accepts else None,
    }


def specchat_bench(
    target: Path, draft: Path, prompts: Sequence[tuple[str, str]], max_tokens: int, work: Path
) -> dict[str, Any]:
    texts = [{"text": text, "class": "compare"} for text, _ in prompts]
    # γ auto is the default of generate, serve and the window; bench sweeps γ unless told.
    command, report = _bench(target, str(draft), texts, max_tokens, work / "compare")
    spec = report["configs"][0]
    return {
        "command": command,
        "threads": report["settings"]["threads"],
        "plain_tokens_per_second": report["plain"]["tokens_per_second"],
        "spec_tokens_per_second": spec["tokens_per_second"],
        "spec_label": spec["label"],
        "acceptance": spec["acceptance_rate"],
        "overhead_share": spec["overhead_share"],
        "plain_overhead_share": report["plain"]["overhead_share"],
        "identical_to_plain": spec["identical_to_plain"],
        "mean_prompt_tokens": round(
            statistics.fmean(p["prompt_tokens"] for p in report["prompts"])
        ),
    }


def specchat_empty_context(target: Path, max_tokens: int, work: Path) -> dict[str, Any]:
    """SpecChat's plain rate from an empty context. `specchat bench` always runs a speculative
    configuration beside plain; the suffix index alone is the cheapest."""
    texts = [{"text": text, "class": "empty", "chat": False} for text in EMPTY_CONTEXT_PROMPTS]
    command, report = _bench(target, "suffix", texts, max_tokens, work / "empty-context")
    return {
        "command": command,
        "plain_tokens_per_second": report["plain"]["tokens_per_second"],
        "prompt_tokens": [p["prompt_tokens"] for p in report["prompts"]],
    }


def _bench(
    target: Path, draft: str, texts: list[dict[str, Any]], max_tokens: int, stem: Path
) -> tuple[list[str], dict[str, Any]]:
    """`specchat bench` under γ auto, greedy, on the prompts `texts`: its command (without the
    report's path) and its report."""
    prompt_file, out = stem.with_suffix(".prompts.json"), stem.with_suffix(".bench.json")
    prompt_file.write_text(json.dumps(texts), encoding="utf-8")
    command = [sys.executable, "-m", "app.cli", "bench", "--target", str(target)]
    command += ["--draft", draft, "--gamma", "auto", "--prompts", str(prompt_file)]
    command += ["--max-tokens", str(max_tokens), "--temperature", "0", "--quiet"]
    subprocess.run([*command, "--json", str(out)], check=True, cwd=ROOT)
    return command, json.loads(out.read_text(encoding="utf-8"))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    bench_bin, spec_bin = args.bin / "llama-bench", args.bin / "llama-speculative-simple"
    for binary in (bench_bin, spec_bin):
        if not binary.is_file():
            print(f"error: no {binary.name} in {args.bin}", file=sys.stderr)
            return 1
    from models.demo import ensure_demo_models  # noqa: PLC0415 - after the flags are checked

    demo = ensure_demo_models(folder=args.models_dir)
    prompts = rendered_prompts(args.prompts, demo.f32)
    work = Path(tempfile.mkdtemp(prefix="llama-tools-compare-"))
    runs: list[dict[str, Any]] = []
    for repeat in range(args.repeat):
        ours = specchat_bench(demo.f32, demo.q4_1, prompts, args.max_tokens, work)
        depth = ours["mean_prompt_tokens"]
        run = {
            "repeat": repeat,
            "specchat": ours,
            "specchat_empty_context": specchat_empty_context(demo.f32, args.max_tokens, work),
            "llama_bench": llama_bench(bench_bin, demo.f32, args.max_tokens, depth),
            "speculative_simple": speculative_simple(
                spec_bin, demo.f32, demo.q4_1, prompts, args.max_tokens
            ),
            "speculative_simple_flash_attn_off": speculative_simple(
                spec_bin, demo.f32, demo.q4_1, prompts, args.max_tokens, extra=["-fa", "off"]
            ),
        }
        runs.append(run)
        print(summary_line(run), file=sys.stderr)
    report = {"prompts": [text for text, _ in prompts], "runs": runs, "ratios": ratios(runs)}
    args.json.write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report["ratios"], indent=2))
    return 0


def summary_line(run: dict[str, Any]) -> str:
    ours, bench, spec = run["specchat"], run["llama_bench"], run["speculative_simple"]
    spec_off = run["speculative_simple_flash_attn_off"]
    empty = run["specchat_empty_context"]["plain_tokens_per_second"]
    return (
        f"repeat {run['repeat']}: plain from an empty context {empty:.1f} vs llama-bench "
        f"{bench['tokens_per_second']:.1f} tok/s (flash attention off "
        f"{bench['flash_attn_off_tokens_per_second']:.1f}); after the prompts "
        f"{ours['plain_tokens_per_second']:.1f} vs {bench['tokens_per_second_at_depth']:.1f} at "
        f"depth {bench['depth']} (flash attention off "
        f"{bench['flash_attn_off_tokens_per_second_at_depth']:.1f}); speculative "
        f"{ours['spec_tokens_per_second']:.1f} vs llama-speculative-simple "
        f"{spec['tokens_per_second']:.1f} tok/s (flash attention off "
        f"{spec_off['tokens_per_second']:.1f})"
    )


def ratios(runs: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Each side's mean over the repeats, and SpecChat's over llama.cpp's."""

    def mean(side: str, key: str) -> float:
        return statistics.fmean(run[side][key] for run in runs)

    plain = mean("specchat", "plain_tokens_per_second")
    empty = mean("specchat_empty_context", "plain_tokens_per_second")
    bench_off = mean("llama_bench", "flash_attn_off_tokens_per_second")
    spec = mean("specchat", "spec_tokens_per_second")
    bench = mean("llama_bench", "tokens_per_second")
    bench_deep = mean("llama_bench", "tokens_per_second_at_depth")
    simple = mean("speculative_simple", "tokens_per_second")
    bench_deep_off = mean("llama_bench", "flash_attn_off_tokens_per_second_at_depth")
    simple_off = mean("speculative_simple_flash_attn_off", "tokens_per_second")
    return {
        "specchat_plain_empty_context": empty,
        "llama_bench_tg": bench,
        "plain_over_llama_bench_empty_context": empty / bench,
        "llama_bench_tg_flash_attn_off": bench_off,
        "plain_over_llama_bench_empty_context_flash_attn_off": empty / bench_off,
        "specchat_plain": plain,
        # After the prompts against an empty context, as earlier reports paired them (kept so
        # they compare); the other pairs run at one depth.
        "plain_over_llama_bench": plain / bench,
        "llama_bench_tg_at_prompt_depth": bench_deep,
        "plain_over_llama_bench_at_prompt_depth": plain / bench_deep,
        "specchat_speculative": spec,
        "llama_speculative_simple": simple,
        "speculative_over_speculative_simple": spec / simple,
        "llama_bench_tg_at_prompt_depth_flash_attn_off": bench_deep_off,
        "plain_over_llama_bench_at_prompt_depth_flash_attn_off": plain / bench_deep_off,
        "llama_speculative_simple_flash_attn_off": simple_off,
        "speculative_over_speculative_simple_flash_attn_off": spec / simple_off,
    }


if __name__ == "__main__":
    sys.exit(main())
