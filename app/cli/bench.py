"""The `specchat bench` sub-command: flags, model resolution, output files.

`specchat bench --target PATH --draft PATH [--draft PATH ...] [--gamma G[,G...]]
[--prompts builtin|builtin:CLASS,...|FILE] [--max-tokens N] [--repeat R] [--temperature T]
[--json OUT] [--csv OUT] [--plot OUT.png]`

`specchat bench --server [LABEL=]URL [--server ...] [--baseline LABEL] [--prompts ...]
[--max-tokens N] [--repeat R] [--timeout SECONDS] [--json OUT]` benches running
OpenAI-compatible servers instead (app/bench/remote.py); the servers load their own models, so
--target and --draft go away.

Besides a path, `--draft` takes `demo` (the Q4_1 demo draft), `demo-pruned` (the demo's useless
draft: Q4_1 with layers 9-28 removed, built on first use) and `suffix` (the suffix index, no draft
model; `ngram` is another name for it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from collections.abc import Callable
from typing import Any

from app.bench.chart import save_plot
from app.bench.openai_stream import READ_TIMEOUT_S
from app.bench.plan import BenchSettings, parse_gammas
from app.bench.prompts import BUILTIN, BUILTIN_CLASSES, load_prompts
from app.bench.remote import RemoteBench
from app.bench.remote_table import format_remote_table
from app.bench.session import run_benchmark
from app.bench.summary import BenchReport
from app.bench.table import format_table, to_csv
from app.cli.args import (
    DEMO,
    DRAFT_NONE,
    DRAFT_SUFFIX,
    add_model_arguments,
    add_sampling_arguments,
    draft_value,
    generation_from_args,
    output_file,
    sampling_from_args,
    user_file,
)
from app.cli.bench_checks import (
    DEMO_PRUNED,
    check_bench_args,
    local_defaults,
)
from app.cli.bench_drafts import (
    draft_choice,
    suffix_modes,
    tree_modes,
    unique_labels,
    with_suffix_modes,
    with_tree_modes,
)
from app.cli.contained import keep_for_parent, parent_keeps_results, run_contained
from app.cli.loading import draft_config, target_config
from app.cli.output import STANDARD_OUTPUT, OutputError, write_output_file, write_stdout
from app.cli.rpc_options import add_rpc_arguments, uses_rpc
from app.cli.signals import Interrupted, stop_on_signals
from app.durable import replace_file
from app.engine.control import GenerationControl
from app.engine.gamma import AUTO, GAMMA_HELP, GammaSetting
from app.errors import Cancelled, InvalidSettingError, user_message
from models.compat import check_draft_file

DEFAULT_GAMMAS = "2,4,6,auto"
# Long enough for γ auto to settle and for per-token times to dominate the first round's noise,
# short enough that the default run (6 classes, 5 configurations) stays within minutes on a CPU.
DEFAULT_MAX_TOKENS = 128


def _gammas(value: str) -> list[GammaSetting]:
    try:
        return parse_gammas(value)
    except InvalidSettingError as exc:
        raise argparse.ArgumentTypeError(user_message(exc)) from None


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = commands.add_parser(
        "bench",
        help="compare plain decoding with drafts and draft lengths on the same prompts",
        description="Runs plain decoding and every (draft, γ) configuration on the same "
        "prompts, interleaved, each run from cold caches, and reports tokens/s, speedup over "
        "plain, acceptance, costs, the cost model's prediction and whether greedy output "
        "matched plain decoding. With --server, benches running servers instead.",
    )
    add_model_arguments(bench, target_required=False)  # not with --server
    bench.add_argument(
        "--draft",
        action="append",
        type=_bench_draft,
        metavar="PATH",
        help=f"draft GGUF file; repeat to compare drafts. '{DEMO}' = the Q4_1 demo draft, "
        f"'{DEMO_PRUNED}' = the demo draft with layers 9-28 removed (useless on purpose), "
        f"'{DRAFT_SUFFIX}' = the prompt's own text, no draft model ('ngram' is another name)",
    )
    _add_compared_arguments(bench)
    bench.add_argument(
        "--prompts",
        default=BUILTIN,
        metavar="builtin|builtin:CLASS,...|FILE",
        help=f"'{BUILTIN}' (classes {', '.join(BUILTIN_CLASSES)}), "
        f"'{BUILTIN}:CLASS[,CLASS]' for some of them, or a file: JSON list, or text with "
        "prompts separated by '---' lines",
    )
    bench.add_argument("--repeat", type=int, default=1, help="times to run every prompt")
    add_sampling_arguments(bench)
    bench.set_defaults(max_tokens=DEFAULT_MAX_TOKENS)
    bench.add_argument(
        "--json",
        type=output_file,
        metavar="OUT",
        help="write the full report as JSON (- for stdout; the table then goes to stderr)",
    )
    bench.add_argument(
        "--csv",
        type=output_file,
        metavar="OUT",
        help="write one row per config/class (- for stdout)",
    )
    bench.add_argument(
        "--plot",
        type=user_file,
        metavar="OUT.png",
        help="save the speedup chart; the extension picks the format (png, svg, pdf, ...)",
    )
    bench.add_argument(
        "--no-warmup", action="store_true", help="skip the untimed warm-up run of each model"
    )
    bench.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_rpc_arguments(bench)
    _add_server_arguments(bench)
    bench.set_defaults(
        handler=run_bench, check=check_bench_args, local_defaults=local_defaults(bench)
    )


def _bench_draft(value: str) -> str:
    if value == DRAFT_NONE:
        # `generate --draft none` decodes plain; here plain is the column every bench has.
        raise argparse.ArgumentTypeError(
            f"--draft {DRAFT_NONE}: plain decoding is always measured; name a draft to compare "
            "with it"
        )
    return value if value == DEMO_PRUNED else draft_value(value)


def _add_compared_arguments(bench: argparse.ArgumentParser) -> None:
    # The settings compared side by side: each flag takes a comma-separated list, and its
    # default is written as a user would type it, then parsed like one.
    compared: tuple[tuple[str, Callable[[str], list[Any]], str, str, str], ...] = (
        (
            "--gamma",
            _gammas,
            DEFAULT_GAMMAS,
            "G[,G...]",
            # GAMMA_HELP names the one-γ commands' default, which is not bench's.
            "γ settings to compare, comma-separated, each "
            + GAMMA_HELP.replace(" (the default)", ""),
        ),
        (
            "--suffix",
            suffix_modes,
            "on",
            "on|off|on,off",
            "whether each draft model drafts together with the suffix index; 'on,off' runs "
            "both, side by side",
        ),
        (
            "--trees",
            tree_modes,
            "auto",
            "auto|on|off[,...]",
            "whether the suffix index alone drafts token trees: 'auto' where γ auto measured "
            "that they pay; 'on,off' runs both, side by side",
        ),
    )
    for flag, parse, default, metavar, text in compared:
        bench.add_argument(
            flag,
            type=parse,
            default=parse(default),
            metavar=metavar,
            help=f"{text} (default {default})",  # as typed, not the parsed list's repr
        )


def _add_server_arguments(bench: argparse.ArgumentParser) -> None:
    bench.add_argument(
        "--server",
        action="append",
        metavar="[LABEL=]URL",
        help="bench a running OpenAI-compatible server (llama-server, `specchat serve`, ...) "
        "instead of loading models; repeat to compare servers, interleaved prompt by prompt",
    )
    bench.add_argument(
        "--baseline",
        metavar="LABEL",
        help="with --server: the server the others are compared with (default: the first)",
    )
    bench.add_argument(
        "--api-key",
        metavar="KEY",
        help="with --server: sent to every server as 'Authorization: Bearer KEY'",
    )
    bench.add_argument(
        "--timeout",
        type=_seconds,
        metavar="SECONDS",
        help="with --server: how long a server may send nothing, to connect or mid-reply, "
        "before its request fails and the runs before it are reported "
        f"(default {READ_TIMEOUT_S:g})",
    )


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_TIMEOUT_S:  # also refuses nan
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, got {value!r}"
        )
    return seconds


# A week: past it a socket's timeout overflows the platform's time_t on some systems.
MAX_TIMEOUT_S = 7 * 24 * 3600.0


NOTHING_WRITTEN = "no run had completed, so nothing is reported or written"


def _progress(done: int, total: int, message: str) -> None:
    print(f"[{done}/{total}] {message}", file=sys.stderr, flush=True)


def run_bench(args: argparse.Namespace) -> int:
    if args.server:
        return bench_servers(args)
    if uses_rpc(args):
        # llama.cpp aborts its process when a worker fails; keep that away from this one, and
        # the runs finished before a worker was lost with it.
        return run_contained(measure_and_report, args, salvage=lambda r: _salvage(args, r))
    return measure_and_report(args)


def _salvage(args: argparse.Namespace, report: BenchReport) -> str:
    """Write what a benchmark whose process died had finished, as a stopped one writes it."""
    if not report.runs:
        return NOTHING_WRITTEN
    _write_files(args, report)
    _write_table(args, format_table(report))
    return f"the {len(report.runs)} runs completed before it are reported"


def measure_and_report(args: argparse.Namespace) -> int:
    base = generation_from_args(args, AUTO)  # γ auto starts where `generate --gamma auto` does
    prompts = load_prompts(args.prompts)
    choices = unique_labels([draft_choice(d) for d in args.draft])
    drafts = with_tree_modes(with_suffix_modes(choices, args.suffix), args.trees)
    target = target_config(args)
    draft_template = draft_config(args, target.path)  # each draft's own path replaces it
    settings = BenchSettings(
        drafts=drafts,
        gammas=args.gamma,
        prompts=prompts,
        base=base,
        repeats=args.repeat,
        draft_template=draft_template,
        warmup=not args.no_warmup,
    )
    control = GenerationControl()
    # The first SIGINT/SIGTERM stops the run in progress at its next round and keeps the runs
    # completed before it, as `generate` keeps a stopped reply; a second ends at once.
    with stop_on_signals(control) as caught:
        try:
            report = run_benchmark(
                target,
                settings,
                progress=None if args.quiet else _progress,
                control=control,
                vet_draft=check_draft_file,
                keep_partial=True,
                checkpoint=keep_for_parent if parent_keeps_results() else None,
            )
        except Cancelled:
            if not caught.signum:
                raise
            raise Interrupted(caught.signum) from None  # stopped before anything was timed
        if caught.signum and not report.runs:
            # Nothing was timed: an empty report must not replace the files of an earlier run.
            print(f"error: interrupted; {NOTHING_WRITTEN}", file=sys.stderr)
            return 128 + caught.signum
        # The files first: a reader of stdout that went away (`| less`, quit early) must not
        # cost the report the user asked to have written.
        _write_files(args, report)
        _write_table(args, format_table(report))
    if caught.signum:
        print(
            f"error: interrupted; the {len(report.runs)} runs completed before it are reported",
            file=sys.stderr,
        )
        return 128 + caught.signum
    # The others were measured and written; a script still learns that one draft was not.
    failed = {c.draft: c.error for c in report.configs if c.error is not None}
    for draft, error in failed.items():
        print(f"error: {draft}: not measured: {error}", file=sys.stderr)
    return 1 if failed else 0


def _write_files(args: argparse.Namespace, report: BenchReport) -> None:
    if args.json is not None:
        write_output_file(args.json, _json_text(report.to_json()), "--json")
    if args.csv is not None:
        write_output_file(args.csv, to_csv(report), "--csv")
    if args.plot is not None:
        # Written under a temporary name first (replace_file), so the format is named here.
        chart_format = args.plot.suffix.lower().removeprefix(".")
        try:
            replace_file(args.plot, lambda path: save_plot(report, path, chart_format))
        except OSError as exc:
            raise OutputError(f"--plot: cannot write {args.plot}: {exc.strerror or exc}") from None


def _write_table(args: argparse.Namespace, table: str) -> None:
    """The table on stdout, or on stderr when a report went to stdout (`--json -`), so a
    pipe reads nothing but the report."""
    if STANDARD_OUTPUT in (args.json, args.csv):
        print(table, file=sys.stderr)
    else:
        write_stdout(table + "\n")


def _json_text(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def bench_servers(args: argparse.Namespace) -> int:
    bench = RemoteBench(
        args.endpoints,
        load_prompts(args.prompts),
        max_tokens=args.max_tokens,
        sampling=sampling_from_args(args),
        repeats=args.repeat,
        baseline=args.baseline,
        timeout=READ_TIMEOUT_S if args.timeout is None else args.timeout,
    )
    control = GenerationControl()
    # The first signal lets the request in progress finish; a second abandons it (Interrupted
    # from inside the read). Either way the runs completed before it are reported.
    note = "stopping after the request under way (a second signal ends at once)"
    with stop_on_signals(control, note) as caught:
        with contextlib.suppress(Interrupted):
            bench.run(
                warmup=not args.no_warmup,
                progress=None if args.quiet else _progress,
                control=control,
            )
        report = bench.report(interrupted=bool(caught.signum))
        if caught.signum and not (report.runs or report.uncounted):
            print(f"error: interrupted; {NOTHING_WRITTEN}", file=sys.stderr)
            return 128 + caught.signum
        if args.json is not None:  # before the table: see measure_and_report
            write_output_file(args.json, _json_text(report.to_json()), "--json")
        _write_table(args, format_remote_table(report))
    kept = f"the {len(report.runs) + len(report.uncounted)} runs completed before it are reported"
    if caught.signum:
        print(f"error: interrupted; {kept}", file=sys.stderr)
        return 128 + caught.signum
    if report.failure is not None:
        print(f"error: {report.failure.message}; {kept}", file=sys.stderr)
        return 1
    return 0
