"""What Compare drafts runs: this chat's target, settings and γ, against every fitting draft,
on the window's engine thread and its loaded models."""

from __future__ import annotations

import threading
from pathlib import Path

from app.bench import plan as bench_plan
from app.bench import session as bench_session
from app.bench.run import ProgressFn
from app.bench.session import PartialFn
from app.bench.summary import BenchReport
from app.engine.control import GenerationControl
from app.engine.isolated import AnyRuntime
from app.engine.runtime import Runtime
from app.errors import Cancelled, InvalidSettingError
from app.llama.config import ModelConfig
from ui.settings import Settings
from ui.window.generation_settings import generation_config
from ui.workers.catalog import Catalog
from ui.workers.engine_host import EngineHost
from ui.workers.requests import LoadedState

# How often the waiting dialog thread looks at its Stop flag.
WAIT_STEP_S = 0.2
# Compare swaps drafts inside one in-process Runtime; the child process behind models on RPC
# workers does not offer that.
NOT_ON_WORKERS = (
    "Compare is not available on remote workers yet: clear Remote workers in Settings to "
    "compare drafts on this machine."
)


def compare_drafts(catalog: Catalog | None) -> list[bench_plan.DraftChoice]:
    """Every installed draft the catalog finds compatible with the target and smaller."""
    if catalog is None or catalog.target is None:
        return []
    target_size = catalog.target.size_bytes
    usable = [d for d in catalog.drafts if d.compatible and d.size_bytes < target_size]
    names = [Path(d.path).name for d in usable]
    return [
        # The bench needs distinct labels; same-named files in two folders get the folder.
        bench_plan.DraftChoice(
            name if names.count(name) == 1 else f"{Path(d.path).parent.name}/{name}",
            Path(d.path),
        )
        for d, name in zip(usable, names, strict=True)
    ]


def compare_bench(
    loaded: LoadedState | None, catalog: Catalog | None, settings: Settings, host: EngineHost
) -> bench_session.BenchCallable | None:
    """The comparison for the Compare dialog, on the window's own loaded models; None without
    a target or a draft.

    It runs on the engine thread (bench_on_runtime): the target and the drafts the chat holds
    are used as they are, every other draft is loaded alone and freed after its turn, so no
    second copy of any model is made. The dialog's thread only waits for the answer.
    """
    drafts = compare_drafts(catalog)
    if loaded is None or loaded.target is None or not drafts:
        return None
    target = loaded.target
    config = generation_config(settings)
    gamma = config.gamma
    draft_template = loaded.draft.config or ModelConfig(
        "",
        n_ctx=target.n_ctx,
        n_gpu_layers=settings.get_int("models/draft_gpu_layers"),
        n_threads=target.n_threads,
    )

    def run(
        text: str,
        progress: ProgressFn,
        control: GenerationControl,
        partial: PartialFn | None = None,
    ) -> BenchReport:
        outcome: list[BenchReport | BaseException] = []
        done = threading.Event()
        abandoned = threading.Event()

        def task(runtime: AnyRuntime) -> None:
            try:
                if abandoned.is_set():
                    return  # stopped while it waited behind a reply: nothing to measure
                if not isinstance(runtime, Runtime):
                    raise InvalidSettingError(NOT_ON_WORKERS)
                bench = bench_session.prompt_bench_on(
                    runtime,
                    drafts=drafts,
                    gammas=[gamma],
                    base=config,
                    draft_template=draft_template,
                )
                outcome.append(bench(text, progress, control, partial))
            except BaseException as exc:  # handed to the dialog, which says it in words
                outcome.append(exc)
            finally:
                done.set()

        host.request_task(task)
        while not done.wait(WAIT_STEP_S):
            if control.stop_requested and not outcome:
                abandoned.set()
        if not outcome:
            raise Cancelled("the comparison was stopped before it started")
        result = outcome[0]
        if isinstance(result, BaseException):
            raise result
        return result

    return run
