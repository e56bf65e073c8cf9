"""Measure the chat-history suffix index: build time, memory and file size of a past-chats corpus,
the bound it keeps, and the suffix drafter's lookup time per round.

Replies are this repository's own prose, Markdown and Python (what chat replies are made of),
tokenized by a real GGUF's tokenizer and cut into pieces of 200-300 tokens. Timings on a busy
machine are noisy; memory is measured with tracemalloc (allocated bytes, over-allocation
included) in a separate build, since tracing slows allocation.

    python scripts/suffix_figures.py [--model GGUF] [--replies 1000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from app.engine.config import SamplingConfig  # noqa: E402
from app.engine.corpus_files import vocabulary_fingerprint  # noqa: E402
from app.engine.drafters import DraftRequest  # noqa: E402
from app.engine.history_corpus import HistoryCorpus  # noqa: E402
from app.engine.suffix_drafter import SuffixDrafter  # noqa: E402
from app.engine.suffix_index import SuffixIndex  # noqa: E402
from app.engine.suffix_journal import journal_path  # noqa: E402
from app.llama.config import ModelConfig  # noqa: E402
from app.llama.model import LlamaModel  # noqa: E402

DEMO_MODEL = Path.home() / ".cache/specchat-test-models/SmolLM2-135M-Instruct.Q4_1.pruned-9-28.gguf"


def repository_tokens(tokenize: Callable[[str], list[int]]) -> list[int]:
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for package in ("app", "ui", "models"):
        files += sorted((REPO / package).rglob("*.py"))
    tokens: list[int] = []
    for path in files:
        tokens += tokenize(path.read_text(encoding="utf-8", errors="replace"))
    return tokens


def cut_replies(tokens: Sequence[int], n: int, rng: random.Random) -> list[list[int]]:
    replies: list[list[int]] = []
    at = 0
    while len(replies) < n and at < len(tokens):
        size = rng.randint(200, 300)
        replies.append(list(tokens[at : at + size]))
        at += size
    return replies


def measure_corpus(replies: list[list[int]], fingerprint: str, folder: Path) -> HistoryCorpus:
    n_tokens = sum(len(r) for r in replies)
    print(f"## Corpus: {len(replies)} replies, {n_tokens} tokens")
    corpus = HistoryCorpus(folder, fingerprint, max_tokens=max(300_000, n_tokens))
    start = time.perf_counter()
    for reply in replies:
        corpus.add(reply)
    added = time.perf_counter() - start
    print(f"add one reply at a time: {added:.2f} s ({added / n_tokens * 1e6:.1f} µs/token)")
    start = time.perf_counter()
    corpus.save()
    saved = time.perf_counter() - start
    size = corpus.path.stat().st_size
    print(f"save: {saved * 1e3:.0f} ms, file {size / 1e6:.1f} MB ({size / n_tokens:.1f} B/token)")
    corpus.add(replies[-1][::-1])  # one more reply: it goes to the journal
    start = time.perf_counter()
    corpus.save()
    journal = journal_path(corpus.path).stat().st_size
    print(f"save one more reply: {(time.perf_counter() - start) * 1e3:.1f} ms, {journal} B")
    start = time.perf_counter()
    reopened = HistoryCorpus(folder, fingerprint, max_tokens=corpus.max_tokens)
    print(f"open (read and check the file): {(time.perf_counter() - start) * 1e3:.0f} ms")
    assert reopened.documents == corpus.documents
    start = time.perf_counter()
    reopened.rebuild(replies)
    print(f"rebuild from the chats (file missing or damaged): {time.perf_counter() - start:.2f} s")
    index = corpus.index
    print(
        f"states/token {index.states / n_tokens:.2f}, edges/token {index.edges / n_tokens:.2f}, "
        f"hub states {len(index._hubs)} ({len(index._hubs) / index.states:.2%})"
    )
    tracemalloc.start()
    traced = SuffixIndex()
    for reply in replies:
        traced.add_document(reply)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"memory (tracemalloc): {held / 1e6:.1f} MB, {held / n_tokens:.1f} B/token; "
        f"nbytes() says {traced.nbytes() / n_tokens:.1f} B/token"
    )
    return corpus


def measure_bound(replies: list[list[int]], fingerprint: str, folder: Path, bound: int) -> None:
    print(f"\n## Bound: {len(replies)} replies into a corpus of at most {bound} tokens")
    corpus = HistoryCorpus(folder, fingerprint + "-bound", max_tokens=bound)
    most, drops, slowest = 0, 0, 0.0
    for reply in replies:
        before = corpus.documents
        start = time.perf_counter()
        corpus.add(reply)
        slowest = max(slowest, time.perf_counter() - start)
        drops += corpus.documents < before
        most = max(most, corpus.tokens, corpus.index.tokens)
    print(
        f"most tokens held {most} (bound {bound}); {drops} drops of the oldest; slowest add "
        f"(a drop and rebuild) {slowest:.2f} s; index now {corpus.index.nbytes() / 1e6:.1f} MB"
    )


def time_rounds(
    drafter: SuffixDrafter, prompt: list[int], reply: list[int], rng: random.Random
) -> list[float]:
    """Seconds of each propose() while a reply grows by 1-6 tokens a round."""
    history = list(prompt)
    drafter.prefill(history)
    seconds, at = [], 0
    sampling, draw = SamplingConfig(), np.random.default_rng(0)
    while at < len(reply):
        start = time.perf_counter()
        drafter.propose(DraftRequest(history, 8, sampling, draw, 0.0))
        seconds.append(time.perf_counter() - start)
        step = rng.randint(1, 6)
        history += reply[at : at + step]
        at += step
    return seconds


def measure_lookup(corpus: HistoryCorpus, held_out: list[int], rng: random.Random) -> None:
    print("\n## propose() per round (µs): median / p90 / max")
    edited = [t if rng.random() > 0.05 else rng.randrange(1000) for t in held_out[:300]]
    cases = {
        "conversation of 600 tokens, no past chats": (None, held_out[:300], edited),
        "conversation of 600 tokens, with the corpus": (corpus, held_out[:300], edited),
        "conversation of 8,300 tokens, with the corpus": (
            corpus,
            held_out[300:8300] + held_out[:300],
            edited,
        ),
        "a reply unlike anything seen, with the corpus": (
            corpus,
            held_out[:300],
            [rng.randrange(40_000) for _ in range(300)],
        ),
    }
    for name, (source, prompt, reply) in cases.items():
        times = sorted(
            t * 1e6
            for _ in range(3)
            for t in time_rounds(SuffixDrafter(source), prompt, reply, rng)
        )
        p90 = times[int(0.9 * len(times))]
        print(f"{name}: {statistics.median(times):.0f} / {p90:.0f} / {times[-1]:.0f}")


def measure_degenerate() -> None:
    print("\n## Repetitive documents (build time)")
    for name, document in {
        "one token x 2,000": [5] * 2000,
        "a 5-token loop x 400": [1, 2, 3, 4, 5] * 400,
    }.items():
        start = time.perf_counter()
        SuffixIndex().add_document(document)
        print(f"{name}: {(time.perf_counter() - start) * 1e3:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", type=Path, default=DEMO_MODEL, help="GGUF whose tokenizer to use"
    )
    parser.add_argument("--replies", type=int, default=1000)
    args = parser.parse_args()
    rng = random.Random(0)
    model = LlamaModel(ModelConfig(str(args.model), n_ctx=256))
    try:
        fingerprint = vocabulary_fingerprint(model)
        tokens = repository_tokens(lambda text: model.tokenize(text, add_special=False))
    finally:
        model.close()
    print(f"{len(tokens)} tokens of repository text, vocabulary {fingerprint}\n")
    held_out, rest = tokens[-9000:], tokens[:-9000]
    replies = cut_replies(rest, args.replies, rng)
    with tempfile.TemporaryDirectory() as folder:
        corpus = measure_corpus(replies, fingerprint, Path(folder))
        # Three edited copies of every reply (5 % of tokens changed): ~750k tokens, past the bound.
        edited = [
            [t if rng.random() > 0.05 else rng.randrange(1000) for t in reply]
            for _ in range(3)
            for reply in replies
        ]
        measure_bound(edited, fingerprint, Path(folder), 300_000)
        measure_lookup(corpus, held_out, rng)
    measure_degenerate()


if __name__ == "__main__":
    main()
