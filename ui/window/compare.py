"""What Compare drafts runs: this chat's target, settings and γ, against every fitting draft."""

from __future__ import annotations

from pathlib import Path

from app.bench import plan as bench_plan
from app.bench import session as bench_session
from app.engine.config import ModelConfig
from models.compat import check_draft_file
from ui.settings import Settings
from ui.window.generation_settings import generation_config
from ui.workers.catalog import Catalog
from ui.workers.engine import LoadedState


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
    loaded: LoadedState | None, catalog: Catalog | None, settings: Settings
) -> bench_session.BenchCallable | None:
    """The comparison for the Compare dialog; None without a target or a draft."""
    drafts = compare_drafts(catalog)
    if loaded is None or loaded.target is None or not drafts:
        return None
    target = loaded.target
    config = generation_config(settings)
    gamma: bench_plan.GammaSetting = bench_plan.AUTO if config.adaptive else config.gamma
    draft_template = loaded.draft.config or ModelConfig(
        "",
        n_ctx=target.n_ctx,
        n_gpu_layers=settings.get_int("models/draft_gpu_layers"),
        n_threads=target.n_threads,
    )
    # prompt_bench loads its own copies of the models on the dialog's thread: the window's
    # engine thread and its models are never touched.
    return bench_session.prompt_bench(
        target=target,
        drafts=drafts,
        gammas=[gamma],
        base=config,
        draft_template=draft_template,
        vet_draft=check_draft_file,
    )
