"""Prompt sets for `specchat bench`: the built-in classes, or the user's own file.

Acceptance depends on the kind of text (code, other languages and creative sampling lower it;
summaries that repeat their source raise it), so the built-in set has one class per kind and
every figure is broken down by class. Many of SpecChat's users write Vietnamese and Polish,
hence those two classes. All texts were written for this project.

A prompt file is either JSON (a list of strings, or of objects with "text" and optional
"class", "name", "chat", and "before" and "recall", lists of earlier user turns as
BenchPrompt describes) or plain text with prompts separated by lines holding only `---`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.config import MAX_PROMPT_FILE_BYTES
from app.errors import InvalidSettingError
from app.text_files import read_text_file

BUILTIN = "builtin"
FILE_CLASS = "file"


@dataclass(frozen=True, slots=True)
class BenchPrompt:
    prompt_class: str
    name: str
    text: str
    # True wraps the text as one user message in the target's chat template (what the window
    # sends); False feeds it as raw text, for base models or prompts that carry their own format.
    chat: bool = True
    # Earlier user turns of the same conversation: each is answered by the target (greedy,
    # plain decoding, untimed) before the timed turn, whose prompt then holds them all.
    before: tuple[str, ...] = ()
    # User turns of an earlier conversation, answered the same way and kept in the past-chats
    # index only: the timed prompt is a new conversation.
    recall: tuple[str, ...] = ()


_PASSAGE = """\
The town of Velmora sits where two slow rivers meet, and for most of its history the rivers \
decided everything: where the market stood, which streets flooded in spring, and who grew rich. \
In the eighteenth century the town's merchants dug a canal that joined the rivers a mile north \
of the old confluence, so that barges no longer had to wait for the spring current to carry \
them past the shallows. Trade doubled within a generation. Warehouses rose along the canal, and \
the old market square, now a mile from the water, slowly emptied.

The canal also changed the floods. Water that once spread across the meadows south of town now \
ran straight through the new channel, and in wet years it overtopped the canal's banks in the \
middle of the warehouse district. The merchants built higher walls; the walls pushed the water \
further downstream, onto the farms of families who had never profited from the canal at all. \
For forty years the town council argued about who should pay for the damage. The farmers \
petitioned, the merchants delayed, and the council commissioned three reports, each of which \
recommended a spillway that nobody funded.

The matter was settled by a flood in 1871 that broke the northern wall and filled the \
warehouses to the height of a man. The merchants, now facing losses of their own, agreed to a \
tax on every barge that used the canal. The money paid for a spillway that returned the spring \
water to the southern meadows, as the rivers had done before the canal existed. The meadows \
became pasture again, the farms recovered, and the barge tax, never repealed, still pays for \
the upkeep of the spillway today. Historians of the town like to say that Velmora learned to \
share its rivers only after the rivers had taught it what it cost not to.
"""

_LOG = """\
2024-03-02 09:14:07 INFO  scheduler: job 4411 queued (backup-nightly)
2024-03-02 09:14:09 INFO  worker-2: job 4411 started
2024-03-02 09:31:40 WARN  worker-2: job 4411 disk usage at 91% on /srv/backup
2024-03-02 09:48:12 ERROR worker-2: job 4411 failed: no space left on device
2024-03-02 09:48:12 INFO  scheduler: job 4411 will retry in 30 minutes (attempt 2 of 3)
2024-03-02 10:18:15 INFO  worker-1: job 4411 started
2024-03-02 10:20:02 INFO  cleanup: removed 212 expired snapshots from /srv/backup (48 GB freed)
2024-03-02 10:55:47 INFO  worker-1: job 4411 finished in 37m32s
"""

_CODE = """\
def load_scores(path):
    scores = {}
    with open(path) as handle:
        for line in handle:
            name, value = line.strip().split(",")
            scores[name] = int(value)
    return scores


def best_player(scores):
    best = None
    for name, value in scores.items():
        if best is None or value > scores[best]:
            best = name
    return best
"""

_TYPOS = """\
Dear neighbours, the anual street party will take place on Saturday the fourteenth, \
starting at three in the afternoon. Please bring a dish to share if you can, and remember \
that the road will be closed to cars betwen two and nine. Children are wellcome to decorate \
their bikes for the parade, which leaves from the bakery at four. If it rains, we will meet \
in the school hall insted. Thank you to everyone who helped organise the tables and the \
music this year; we could not do it whithout you.
"""

_BUILTIN: tuple[BenchPrompt, ...] = (
    BenchPrompt(
        "chat",
        "sky",
        "Why is the sky blue during the day but red and orange at sunset? "
        "Explain it to a curious twelve-year-old.",
    ),
    BenchPrompt(
        "chat",
        "sleep",
        "I keep waking up tired even after eight hours of sleep. "
        "What are some common reasons, and what could I try first?",
    ),
    BenchPrompt(
        "chat",
        "trip",
        "I have a free weekend and about two hundred euros. "
        "Suggest a simple plan for a relaxing short trip by train.",
    ),
    BenchPrompt(
        "code",
        "dedupe",
        "Write a Python function that removes duplicate items from a list while keeping "
        "the original order, with a docstring and two example calls.",
    ),
    BenchPrompt(
        "code",
        "sql",
        "Write an SQL query that returns, for each customer, the number of orders and the "
        "total amount spent in 2023, from tables customers(id, name) and "
        "orders(id, customer_id, amount, created_at). Explain each clause briefly.",
    ),
    BenchPrompt(
        "summarise",
        "velmora",
        f"Summarise the following passage in one paragraph.\n\n{_PASSAGE}",
    ),
    BenchPrompt(
        "summarise",
        "log",
        f"Summarise what happened to job 4411 in this log, in plain words.\n\n{_LOG}",
    ),
    BenchPrompt(
        "vietnamese",
        "tea",
        "Hãy giải thích ngắn gọn cách pha một ấm trà xanh ngon, "
        "và vì sao không nên dùng nước đang sôi.",
    ),
    BenchPrompt(
        "vietnamese",
        "study",
        "Tôi là sinh viên năm nhất và hay bị mất tập trung khi học ở nhà. "
        "Bạn có lời khuyên nào không?",
    ),
    BenchPrompt(
        "creative",
        "lighthouse",
        "Write a short story about a lighthouse keeper who finds a message in a bottle "
        "that seems to be addressed to her.",
    ),
    BenchPrompt(
        "creative",
        "autumn",
        "Write a poem of three short stanzas about the first cold morning of autumn.",
    ),
    BenchPrompt(
        "polish",
        "bread",
        "Wyjaśnij krótko, jak upiec prosty chleb na zakwasie w domu "
        "i na co uważać za pierwszym razem.",
    ),
    BenchPrompt(
        "polish",
        "cycling",
        "Planuję dojeżdżać do pracy rowerem przez cały rok. Jak przygotować się do jazdy zimą?",
    ),
    # Copy-heavy: the reply repeats much of the prompt, as edits, fixes and quotes do.
    BenchPrompt(
        "copy",
        "rename",
        "Return this Python code unchanged except that the function best_player is renamed "
        f"to top_scorer everywhere.\n\n```python\n{_CODE}```",
    ),
    BenchPrompt(
        "copy",
        "spelling",
        "Fix the spelling mistakes in this notice and return the whole corrected text, "
        f"nothing else.\n\n{_TYPOS}",
    ),
    BenchPrompt(
        "copy",
        "quote",
        "Quote the second paragraph of this passage word for word, then say in one sentence "
        f"what problem it describes.\n\n{_PASSAGE}",
    ),
    # Multi-turn: a revision of the previous reply, and a question asked again, in other
    # words, in a new conversation.
    BenchPrompt(
        "revision",
        "shorter",
        "Now write the same explanation again, but shorter and simpler.",
        before=("Explain how a refrigerator keeps food cold.",),
    ),
    BenchPrompt(
        "revision",
        "formal",
        "Rewrite your answer in a more formal tone, keeping every step.",
        before=("How do I change a flat tyre on a bicycle?",),
    ),
    BenchPrompt(
        "asked-again",
        "fridge",
        "How does a fridge keep food cold?",
        recall=("Explain how a refrigerator keeps food cold.",),
    ),
    BenchPrompt(
        "asked-again",
        "tyre",
        "What are the steps to fix a flat bicycle tyre?",
        recall=("How do I change a flat tyre on a bicycle?",),
    ),
    # The same question word for word in a new conversation: a user asking again tomorrow, or
    # a client retrying a request (what llama-server's shared n-gram pool is made for).
    BenchPrompt(
        "repeated",
        "fridge again",
        "Explain how a refrigerator keeps food cold.",
        recall=("Explain how a refrigerator keeps food cold.",),
    ),
    BenchPrompt(
        "repeated",
        "tyre again",
        "How do I change a flat tyre on a bicycle?",
        recall=("How do I change a flat tyre on a bicycle?",),
    ),
)

BUILTIN_CLASSES: tuple[str, ...] = tuple(dict.fromkeys(p.prompt_class for p in _BUILTIN))


def builtin_prompts(classes: tuple[str, ...] | None = None) -> list[BenchPrompt]:
    """The built-in prompts, optionally only some classes, in the built-in order."""
    if classes is None:
        return list(_BUILTIN)
    unknown = [c for c in classes if c not in BUILTIN_CLASSES]
    if unknown:
        raise InvalidSettingError(
            f"unknown prompt class {', '.join(unknown)}; built-in classes are "
            f"{', '.join(BUILTIN_CLASSES)}"
        )
    return [p for p in _BUILTIN if p.prompt_class in classes]


def is_builtin(spec: str) -> bool:
    """Whether `--prompts` names built-in classes (`builtin`, `builtin:CLASS,...`), not a file."""
    return spec == BUILTIN or spec.startswith(BUILTIN + ":")


def load_prompts(spec: str) -> list[BenchPrompt]:
    """Resolve `--prompts`: `builtin`, `builtin:CLASS[,CLASS...]`, or a file path."""
    if spec == BUILTIN:
        return builtin_prompts()
    if spec.startswith(BUILTIN + ":"):
        wanted = tuple(c.strip() for c in spec.split(":", 1)[1].split(",") if c.strip())
        if not wanted:
            raise InvalidSettingError("--prompts builtin: needs at least one class after the colon")
        return builtin_prompts(wanted)
    return prompts_from_file(Path(spec))


def prompts_from_file(path: Path) -> list[BenchPrompt]:
    raw = read_text_file(path, name=f"prompt file {path}", limit=MAX_PROMPT_FILE_BYTES)
    if path.suffix.lower() == ".json":
        prompts = _from_json(path, raw)
    else:
        texts = [chunk.strip() for chunk in _split_on_rules(raw)]
        prompts = [
            BenchPrompt(FILE_CLASS, f"{path.stem}-{i + 1}", text)
            for i, text in enumerate(t for t in texts if t)
        ]
    if not prompts:
        raise InvalidSettingError(f"prompt file {path} holds no prompts")
    return prompts


def _split_on_rules(raw: str) -> list[str]:
    chunks: list[list[str]] = [[]]
    for line in raw.splitlines():
        if line.strip() == "---":
            chunks.append([])
        else:
            chunks[-1].append(line)
    return ["\n".join(lines) for lines in chunks]


def _from_json(path: Path, raw: str) -> list[BenchPrompt]:
    try:
        data: Any = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidSettingError(f"prompt file {path} is not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise InvalidSettingError(f"prompt file {path} must hold a JSON list of prompts")
    prompts: list[BenchPrompt] = []
    for i, item in enumerate(data):
        default_name = f"{path.stem}-{i + 1}"
        text = item.get("text") if isinstance(item, dict) else item
        if not isinstance(text, str):
            raise InvalidSettingError(
                f"prompt file {path}: item {i + 1} must be a string or an object with a "
                '"text" string'
            )
        if not text.strip():
            # As `generate --prompt ""` is: a reply to nothing measures nothing.
            raise InvalidSettingError(f"prompt file {path}: item {i + 1} is an empty prompt")
        if isinstance(item, str):
            prompts.append(BenchPrompt(FILE_CLASS, default_name, item))
            continue
        chat = bool(item.get("chat", True))
        before, recall = (_turns(path, i, item, key, chat) for key in ("before", "recall"))
        prompts.append(
            BenchPrompt(
                str(item.get("class", FILE_CLASS)),
                str(item.get("name", default_name)),
                text,
                chat,
                before,
                recall,
            )
        )
    return prompts


def _turns(path: Path, i: int, item: dict[str, Any], key: str, chat: bool) -> tuple[str, ...]:
    """An item's earlier user turns (`before`: this conversation's; `recall`: an earlier one's)."""
    turns = item.get(key, [])
    if not isinstance(turns, list) or not all(isinstance(t, str) for t in turns):
        raise InvalidSettingError(
            f'prompt file {path}: item {i + 1}: "{key}" must be a list of strings'
        )
    if turns and not chat:
        raise InvalidSettingError(
            f'prompt file {path}: item {i + 1}: "{key}" needs a chat prompt ("chat": true)'
        )
    return tuple(turns)
