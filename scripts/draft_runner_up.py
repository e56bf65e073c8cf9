"""What a draft model's runner-up tokens could add as token-tree siblings, before building them.

A draft-model token tree puts the draft's second choice beside its first where it doubts, as one
more verify row. Greedy, that row yields a token only where the target rejects the first choice
and takes the second. This counts exactly that, with no engine in between: the target writes
its greedy reply to each built-in prompt, then each draft reads the same text in one pass, and
at every reply position we compare the draft's first and second choices with the target's
token, grouped by how sure the draft was (its first choice's softmax probability q1).

A sibling at every position with q1 below a threshold costs one row each; it gains one token
wherever the first choice was wrong and the second right. Rows are nearly free on a GPU up to a
batch of 8 or so, and cost about a tenth of a plain step each on a 2-core CPU
(docs/benchmarks.md, Flash attention).

    python scripts/draft_runner_up.py [--draft PATH ...] [--classes chat,code,...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from app.bench.prompts import builtin_prompts  # noqa: E402
from app.engine.chat_prompt import chat_prompt_ids  # noqa: E402
from app.llama.config import ModelConfig  # noqa: E402
from app.llama.model import LlamaModel  # noqa: E402
from models.demo import ensure_demo_models  # noqa: E402

THRESHOLDS = (0.3, 0.5, 0.7, 0.9, 1.01)


def _load(path: Path, threads: int) -> LlamaModel:
    return LlamaModel(
        ModelConfig(
            path=str(path), n_ctx=4096, n_threads=threads, n_threads_batch=threads, n_gpu_layers=0
        )
    )


def target_replies(
    target: LlamaModel, texts: list[str], n_tokens: int
) -> list[tuple[int, list[int]]]:
    """(prompt length, prompt + greedy reply) for each text, the reply cut at its end token."""
    template = target.meta("tokenizer.chat_template")
    out = []
    for text in texts:
        prompt = chat_prompt_ids(
            target,
            template,
            [{"role": "user", "content": text}],
            bos_token=target.bos_text,
            eos_token=target.eos_text,
        )
        history = list(prompt)
        target.reset()
        for _ in range(n_tokens):
            token = int(np.argmax(target.feed(history, 1)[0]))
            history.append(token)
            if target.is_eog(token):
                break
        out.append((len(prompt), history))
    return out


def runner_up_counts(draft: LlamaModel, replies: list[tuple[int, list[int]]]) -> dict[str, object]:
    """Per q1 threshold: positions below it, first choices wrong there, second choices right."""
    q1s, first_right, second_right = [], [], []
    for n_prompt, history in replies:
        draft.reset()
        n_reply = len(history) - n_prompt
        rows = draft.feed(history[:-1], n_reply)[:, : draft.n_vocab]
        for row, token in zip(rows, history[n_prompt:], strict=True):
            second, first = np.argpartition(row, -2)[-2:]
            if row[second] > row[first]:
                first, second = second, first
            shifted = row.astype(np.float64) - float(row[first])
            q1s.append(1.0 / float(np.exp(shifted).sum()))
            first_right.append(int(first) == token)
            second_right.append(int(second) == token)
    q1, right1, right2 = np.array(q1s), np.array(first_right), np.array(second_right)
    by_threshold = []
    for limit in THRESHOLDS:
        doubtful = q1 < limit
        by_threshold.append(
            {
                "q1_below": limit,
                "positions": int(doubtful.sum()),
                "first_wrong": int((doubtful & ~right1).sum()),
                "second_right": int((doubtful & right2).sum()),
            }
        )
    return {"positions": len(q1), "agreement": float(right1.mean()), "by_q1": by_threshold}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=Path, help="default: the demo target")
    parser.add_argument("--draft", type=Path, action="append", help="default: the demo drafts")
    parser.add_argument("--classes", default="chat,code,summarise,vietnamese,creative,polish")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    demo = ensure_demo_models() if args.target is None or args.draft is None else None
    target_path = args.target or demo.target  # type: ignore[union-attr]
    drafts = args.draft or [demo.q4_1, demo.q8_0, demo.q4_0]  # type: ignore[union-attr]
    # Single-turn prompts: earlier turns would need the target's answers to them first.
    prompts = [p for p in builtin_prompts(tuple(args.classes.split(","))) if not p.before]
    target = _load(target_path, args.threads)
    replies = target_replies(target, [p.text for p in prompts], args.max_tokens)
    target.close()
    report: dict[str, object] = {"target": target_path.name, "prompts": len(prompts)}
    for path in drafts:
        draft = _load(path, args.threads)
        counts = runner_up_counts(draft, replies)
        draft.close()
        report[path.name] = counts
        print(f"{path.name}: {counts['positions']} positions, agreement {counts['agreement']:.1%}")
        for row in counts["by_q1"]:  # type: ignore[attr-defined]
            print(
                f"  q1 < {row['q1_below']:.2f}: {row['positions']:4d} positions, first choice "
                f"wrong at {row['first_wrong']:3d}, second choice right at {row['second_right']:3d}"
            )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
