"""What Compare drafts runs: this chat's target, settings and γ, against every fitting draft,
on the window's engine thread and its loaded models."""

from __future__ import annotations

from pathlib import Path

from app.bench import plan as bench_plan
from app.bench import session as bench_session
from app.bench.summary import BenchReport
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.model_host import LoadedState
from app.engine.runtime import Runtime
from app.engine.session import EngineSession
from app.errors import InvalidSettingError
from app.llama.config import ModelConfig
from models.demo import DemoModels
from ui.file_labels import telling_folders
from ui.settings import Settings
from ui.window.generation_settings import generation_config
from ui.workers.catalog import Catalog
from ui.workers.compare_run import CompareListener, CompareRun, CompareSource
from ui.workers.engine_host import EngineHost

# Compare swaps drafts inside one in-process Runtime; the child process behind models on RPC
# workers does not offer that.
NOT_ON_WORKERS = (
    "Compare is not available on remote workers yet: clear Remote workers in Settings to "
    "compare drafts on this machine."
)


def compare_drafts(
    catalog: Catalog | None, *, with_history: bool = True
) -> list[bench_plan.DraftChoice]:
    """Every installed draft the catalog finds compatible with the target and smaller, drafting
    with the suffix index (the hybrid) as the chat's draft does when `with_history`."""
    if catalog is None or catalog.target is None:
        return []
    target_size = catalog.target.size_bytes
    usable = [d for d in catalog.drafts if d.compatible and d.size_bytes < target_size]
    names = [Path(d.path).name for d in usable]
    folders = telling_folders(names, [d.path for d in usable])
    return [
        # The bench needs distinct labels; same-named files in two folders get the folders.
        bench_plan.DraftChoice(
            name if where is None else f"{where}/{name}", Path(d.path), suffix=with_history
        )
        for d, name, where in zip(usable, names, folders, strict=True)
    ]


def compare_bench(
    loaded: LoadedState[DemoModels] | None,
    catalog: Catalog | None,
    settings: Settings,
    host: EngineHost,
) -> CompareSource | None:
    """The comparison for the Compare dialog, on the window's own loaded models; None without
    a target or a draft."""
    drafts = compare_drafts(catalog, with_history=settings.get_bool("models/draft_with_history"))
    if loaded is None or loaded.target is None or not drafts:
        return None
    target = loaded.target
    draft_template = loaded.draft.config or ModelConfig(
        "",
        n_ctx=target.n_ctx,
        n_gpu_layers=settings.get_int("models/draft_gpu_layers"),
        n_threads=target.n_threads,
    )
    return EngineCompare(host, drafts, generation_config(settings), draft_template)


class EngineCompare:
    """A CompareSource on the engine thread (bench_on_runtime): the target and the drafts the
    chat holds are used as they are, every other draft is loaded alone and freed after its
    turn, so no second copy of any model is made. It queues behind what the engine thread is
    doing, like a chat reply, and its events reach the dialog as a reply's do."""

    def __init__(
        self,
        host: EngineHost,
        drafts: list[bench_plan.DraftChoice],
        config: GenerationConfig,
        draft_template: ModelConfig,
    ) -> None:
        self._host = host
        self._drafts = drafts
        self._config = config
        self._draft_template = draft_template

    def start(self, text: str, control: GenerationControl, listener: CompareListener) -> CompareRun:
        run = CompareRun(control)

        def task(runtime: EngineSession) -> None:
            def bench() -> BenchReport:
                if not isinstance(runtime, Runtime):
                    raise InvalidSettingError(NOT_ON_WORKERS)
                measure = bench_session.prompt_bench_on(
                    runtime,
                    drafts=self._drafts,
                    gammas=[self._config.gamma],
                    base=self._config,
                    draft_template=self._draft_template,
                )
                return measure(text, listener.progress, control, listener.partial)

            run.deliver(bench, listener)

        self._host.request_task(task)
        return run
