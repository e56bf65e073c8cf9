"""Time the demo target's passes with llama.cpp's flash attention on and off, by context depth
and rows per pass: the evidence behind `--flash-attn auto` keeping it off for a model held in
host memory (app/llama/facts.py, `held_on_host`).

A plain step is one row; a verification is γ + 1 rows. Both settings are loaded side by side and
timed alternately, depth by depth, so load on the machine falls on both; each figure is the
median over the repeats of a mean over a few passes, each pass rolled back before the next.

    python scripts/flash_attention_depths.py [--depths 133,400,1000,2000] [--rows 1,4,8,17]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from app.llama.config import FlashAttention, ModelConfig  # noqa: E402
from app.llama.model import LlamaModel  # noqa: E402
from models.demo import ensure_demo_models  # noqa: E402

SETTINGS: tuple[FlashAttention, ...] = ("off", "on")
# Token ids any vocabulary holds; what the text says does not change what a pass costs.
FILLER_FIRST_ID = 1000


def _int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def time_passes(model: LlamaModel, depth: int, rows: int, passes: int) -> float:
    """Mean milliseconds of a pass of `rows` new tokens over `depth` cached ones."""
    history = [FILLER_FIRST_ID + i % 3000 for i in range(depth)]
    model.reset()
    model.feed(history, 1)
    proposed = history + [FILLER_FIRST_ID + 3000 + i for i in range(rows)]
    started = time.perf_counter()
    for _ in range(passes):
        model.feed(proposed, rows)
        model.truncate(depth)
    return (time.perf_counter() - started) / passes * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="GGUF to time (default: the demo target)")
    parser.add_argument("--depths", type=_int_list, default=[133, 400, 1000, 2000])
    parser.add_argument("--rows", type=_int_list, default=[1, 4, 8, 17])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--passes", type=int, default=12, help="passes per timing")
    parser.add_argument("--json", type=Path, help="write every timing here")
    args = parser.parse_args()
    path = args.model or ensure_demo_models().target
    models = {
        setting: LlamaModel(
            ModelConfig(
                path=str(path),
                n_ctx=args.n_ctx,
                n_threads=args.threads,
                n_threads_batch=args.threads,
                flash_attn=setting,
                prompt_cache_mib=0,
            )
        )
        for setting in SETTINGS
    }
    timings: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        for depth in args.depths:
            for rows in args.rows:
                for setting, model in models.items():
                    ms = time_passes(model, depth, rows, args.passes)
                    timings.setdefault(f"{setting} {depth} {rows}", []).append(ms)
    for model in models.values():
        model.close()
    table = []
    print(f"{path.name}, {args.threads} threads, n_ctx {args.n_ctx}: ms a pass")
    print("depth  rows      off       on   on/off")
    for depth in args.depths:
        for rows in args.rows:
            off = statistics.median(timings[f"off {depth} {rows}"])
            on = statistics.median(timings[f"on {depth} {rows}"])
            table.append({"depth": depth, "rows": rows, "off_ms": off, "on_ms": on})
            print(f"{depth:5d} {rows:5d} {off:8.2f} {on:8.2f} {on / off:8.2f}")
    if args.json:
        report = {"model": path.name, "settings": vars(args) | {"model": str(path)}}
        report |= {"table": table, "timings": timings}
        args.json.write_text(json.dumps(report, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
