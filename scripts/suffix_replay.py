"""How often the suffix drafter's proposals survive, by match length, on a real model's replies.

Greedy replies do not depend on the draft (every drafted token is checked against the target's
own argmax), so one plain reply per turn replays any drafter exactly: a proposal at position t
keeps the tokens it shares with the reply from t on. The chats are the built-in bench prompts,
each followed by two turns that ask for the answer again (shorter; then exactly, plus one
sentence), so the conversation repeats itself as home users make it; the past chats are the
other prompts' replies.

Printed: per match-length bucket, how many positions had such a match, how often its first token
was kept and the per-token keep rate (kept / (kept + rejections)); then, replaying rounds, tokens
per round and an estimated speed against plain with each round priced 1 + ROW_COST per drafted
token (the demo target's verify cost measured by the bench on a 2-core CPU: c_verify 1.60 at
γ 3, 2.09 at γ 7), for prompt lookup and for the suffix drafter at several minimum match lengths;
last, per bench class of single prompts, the ceiling of any drafter that reads only the chat:
an oracle that, wherever the history's last two tokens occurred before, drafts exactly as far
as the reply goes on as after one of those places, priced the same way, beside the suffix
drafter.

    python scripts/suffix_replay.py [--model GGUF] [--max-tokens 128] [--turns FILE]

--turns keeps the generated chats in FILE (JSON) and reads them from there on the next run.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from app.bench.prompts import builtin_prompts  # noqa: E402
from app.engine.chat_prompt import chat_prompt_ids  # noqa: E402
from app.engine.chat_template import ChatMessage  # noqa: E402
from app.engine.config import SamplingConfig  # noqa: E402
from app.engine.drafters import DraftRequest, PromptLookupDrafter  # noqa: E402
from app.engine.history_corpus import HistoryCorpus  # noqa: E402
from app.engine.suffix_drafter import MATCH_BUCKETS, SuffixDrafter  # noqa: E402
from app.llama.config import ModelConfig  # noqa: E402
from app.llama.model import LlamaModel  # noqa: E402

DEMO_TARGET = Path.home() / ".cache/specchat-test-models/SmolLM2-135M-Instruct.F32.gguf"
FOLLOW_UPS = (
    "Say that again in fewer words.",
    "Repeat your last answer exactly, then add one more sentence at the end.",
)
ROW_COST = 0.16
GAMMA = 8

Turn = tuple[list[int], list[int]]  # prompt ids, greedy reply ids


def greedy_reply(model: LlamaModel, prompt: list[int], max_tokens: int) -> list[int]:
    history, reply = list(prompt), []
    for _ in range(max_tokens):
        token = int(np.argmax(model.feed(history, 1)[0]))
        if model.is_eog(token):
            break
        reply.append(token)
        history.append(token)
    return reply


def chats(model: LlamaModel, max_tokens: int) -> list[list[Turn]]:
    template = model.meta("tokenizer.chat_template")

    def ids(messages: Sequence[ChatMessage]) -> list[int]:
        return chat_prompt_ids(
            model, template, messages, bos_token=model.bos_text, eos_token=model.eos_text
        )

    result = []
    for bench_prompt in builtin_prompts():
        messages: list[ChatMessage] = [{"role": "user", "content": bench_prompt.text}]
        turns: list[Turn] = []
        for follow_up in (None, *FOLLOW_UPS):
            if follow_up is not None:
                messages.append({"role": "user", "content": follow_up})
            prompt = ids(messages)
            reply = greedy_reply(model, prompt, max_tokens)
            turns.append((prompt, reply))
            messages.append({"role": "assistant", "content": model.detokenize(reply)})
        result.append(turns)
        print(f"  {bench_prompt.name}: replies of {[len(r) for _, r in turns]} tokens", flush=True)
    return result


def kept(proposal: Sequence[int], truth: Sequence[int]) -> int:
    n = 0
    while n < len(proposal) and n < len(truth) and proposal[n] == truth[n]:
        n += 1
    return n


def corpus_without(folder: Path, conversations: list[list[Turn]], skip: int) -> HistoryCorpus:
    corpus = HistoryCorpus(folder, f"replay-{skip}")
    for i, turns in enumerate(conversations):
        if i != skip:
            for _, reply in turns:
                corpus.add(reply)
    return corpus


def keep_rates(conversations: list[list[Turn]], folder: Path) -> None:
    # min_survival tiny: every proposal runs to the budget, whatever the learnt rates.
    found: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for i, turns in enumerate(conversations):
        corpus = corpus_without(folder, conversations, i)
        for prompt, reply in turns:
            drafter = SuffixDrafter(corpus, min_match=1, min_survival=1e-9)
            for t in range(len(reply)):
                proposal = drafter.peek(prompt + reply[:t], GAMMA)
                if not proposal.tokens or proposal.source is None:
                    continue
                n = kept(proposal.tokens, reply[t:])
                bucket = max(b for b in MATCH_BUCKETS if b <= proposal.match_length)
                stats = found[(proposal.source, bucket)]
                stats[0] += 1
                stats[1] += n > 0
                stats[2] += n
                stats[3] += n < len(proposal.tokens)
    print("\nsource        match ≥  positions  first kept  keep rate")
    for (source, bucket), (n, first, tokens, misses) in sorted(found.items()):
        rate = tokens / max(tokens + misses, 1)
        print(f"{source:13} {bucket:7}  {n:9}  {first / n:10.2f}  {rate:9.2f}")


Proposer = Callable[[list[int]], Sequence[int]]
Observer = Callable[[int, int], None]


def replay_reply(
    prompt: list[int], reply: list[int], propose: Proposer, observe: Observer | None = None
) -> tuple[int, int, int, float]:
    """One reply drafted round by round: its rounds, drafted and kept tokens, and its cost in
    plain steps (1 + ROW_COST per drafted token a round)."""
    t = rounds = drafted = kept_tokens = 0
    cost = 0.0
    while t < len(reply):
        proposal = propose(prompt + reply[:t])
        n = kept(proposal, reply[t:])
        if observe is not None:
            observe(n, len(proposal))
        rounds += 1
        drafted += len(proposal)
        kept_tokens += n
        cost += 1.0 + ROW_COST * len(proposal)
        t += n + 1
    return rounds, drafted, kept_tokens, cost


def suffix_proposer(drafter: SuffixDrafter) -> Proposer:
    sampling, rng = SamplingConfig(), np.random.default_rng(0)
    return lambda history: drafter.propose(DraftRequest(history, GAMMA, sampling, rng, 0.0)).tokens


def replay_rounds(conversations: list[list[Turn]], folder: Path) -> None:
    print("\ndrafter                         tok/round  drafted/round  est. speed vs plain")
    setups: dict[str, tuple[int, bool] | None] = {"prompt lookup, γ 8": None}
    for min_match in (1, 2, 3, 4):
        setups[f"suffix, conversation, min {min_match}"] = (min_match, False)
        setups[f"suffix, + past chats, min {min_match}"] = (min_match, True)
    for name, setup in setups.items():
        tokens = rounds = drafted = 0
        cost = 0.0
        for i, turns in enumerate(conversations):
            observe: Observer | None = None
            if setup is None:
                lookup = PromptLookupDrafter()
                propose: Proposer = functools.partial(lookup.find, max_tokens=GAMMA)
            else:
                corpus = corpus_without(folder, conversations, i) if setup[1] else None
                drafter = SuffixDrafter(corpus, min_match=setup[0])
                propose, observe = suffix_proposer(drafter), drafter.observe
            for prompt, reply in turns:
                reply_rounds, reply_drafted, _, reply_cost = replay_reply(
                    prompt, reply, propose, observe
                )
                tokens += len(reply)
                rounds += reply_rounds
                drafted += reply_drafted
                cost += reply_cost
        print(f"{name:31} {tokens / rounds:9.2f}  {drafted / rounds:13.2f}  {tokens / cost:19.2f}")


def oracle_run(history: Sequence[int], rest: Sequence[int]) -> int:
    """How far `rest` goes on as the history did after an earlier place of its last 2 tokens."""
    best = 0
    for j in range(2, len(history)):
        if history[j - 2 : j] == history[-2:]:
            best = max(best, kept(history[j:], rest))
    return best


def ceiling(conversations: list[list[Turn]]) -> None:
    print("\nclass               tokens  copy share  oracle est. speed  suffix est. speed")
    by_class: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0, 0.0])
    for bench_prompt, turns in zip(builtin_prompts(), conversations, strict=True):
        if bench_prompt.before or bench_prompt.recall:
            continue  # its turns here are not the bench's: they lack the earlier turns
        prompt, reply = turns[0]

        def oracle(
            history: list[int], prompt: list[int] = prompt, reply: list[int] = reply
        ) -> list[int]:
            rest = reply[len(history) - len(prompt) :]
            return rest[: oracle_run(history, rest)]

        drafter = SuffixDrafter()  # the conversation alone
        _, _, copied, oracle_cost = replay_reply(prompt, reply, oracle)
        *_, suffix_cost = replay_reply(prompt, reply, suffix_proposer(drafter), drafter.observe)
        found = by_class[bench_prompt.prompt_class]
        found[0] += len(reply)
        found[1] += copied
        found[2] += oracle_cost
        found[3] += suffix_cost
    for name, (tokens, share, by_oracle, by_suffix) in by_class.items():
        print(
            f"{name:19} {tokens:7.0f}  {share / tokens:10.2f}  {tokens / by_oracle:17.2f}"
            f"  {tokens / by_suffix:17.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=DEMO_TARGET)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--turns", type=Path, help="JSON file to keep the generated chats in")
    args = parser.parse_args()
    if args.turns is not None and args.turns.exists():
        conversations = [[(p, r) for p, r in turns] for turns in json.loads(args.turns.read_text())]
    else:
        model = LlamaModel(ModelConfig(str(args.model), n_ctx=2048))
        try:
            print(f"greedy replies from {args.model.name}:")
            conversations = chats(model, args.max_tokens)
        finally:
            model.close()
        if args.turns is not None:
            args.turns.write_text(json.dumps(conversations))
    with tempfile.TemporaryDirectory() as folder:
        keep_rates(conversations, Path(folder))
        replay_rounds(conversations, Path(folder))
    ceiling(conversations)


if __name__ == "__main__":
    main()
