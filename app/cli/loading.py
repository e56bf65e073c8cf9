"""Loading the models a command's flags name: in this process, or in a child process when
RPC workers hold layers (llama.cpp aborts its process when a worker fails)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli.args import DRAFT_SUFFIX, chat_template_file, resolve_model_path
from app.cli.rpc_options import draft_endpoints, target_endpoints, uses_rpc
from app.engine.isolated import AFTER_LOSS, IsolatedRuntime
from app.engine.runtime import Runtime
from app.engine.session import EngineSession
from app.llama import rpc
from app.llama.config import ModelConfig
from app.llama.facts import ModelFacts


def load_runtime(
    args: argparse.Namespace,
    draft: str | None,
    facts: list[ModelFacts] | None = None,
    *,
    history_dir: Path | None = None,
    after_loss: str | None = None,
) -> EngineSession:
    """Load the models; with RPC workers, in a child process that may die (app/engine/isolated).

    `facts`, when given, receives the loaded models' facts (target first). `history_dir` holds
    the past-chats index the suffix drafter reads and every reply joins (in this process only).
    `after_loss`: what a worker's loss tells the user to do (IsolatedRuntime).
    """
    from models.compat import check_draft_file  # noqa: PLC0415 - only when generating

    if uses_rpc(args):
        rpc.require_rpc()  # a build without RPC says how to rebuild before any file is read
    joined = args.suffix == "on"
    runtime: EngineSession = (
        IsolatedRuntime(vet_draft=check_draft_file, after_loss=after_loss or AFTER_LOSS)
        if uses_rpc(args)
        else Runtime(
            vet_draft=check_draft_file,
            suffix_joins_models=joined,
            history_dir=history_dir,
            keep_history=False,
        )
    )
    loaded = facts if facts is not None else []
    try:
        load_models(runtime, args, draft, loaded)
        note = loaded[0].context_note()
        if note is not None:
            print(f"note: {note}", file=sys.stderr)
    except BaseException:
        runtime.close()
        raise
    return runtime


def load_models(
    runtime: EngineSession,
    args: argparse.Namespace,
    draft: str | None,
    loaded: list[ModelFacts] | None = None,
) -> None:
    """Load the flags' target and draft into `runtime`: at start, and again after an RPC
    worker took the models down with it (`serve`). `loaded` receives their facts."""
    facts = loaded if loaded is not None else []
    facts.append(runtime.load_target(target_config(args)))
    if draft == DRAFT_SUFFIX:
        runtime.use_suffix_index()
    elif draft is not None:
        facts.append(
            runtime.load_draft(draft_config(args, resolve_model_path(draft, role="draft")))
        )


def target_config(args: argparse.Namespace) -> ModelConfig:
    """The target's load settings from the model flags (its template read and tried first)."""
    return ModelConfig(
        resolve_model_path(args.target, role="target"),
        n_ctx=args.n_ctx,
        n_gpu_layers=args.n_gpu_layers,
        n_threads=args.threads,
        rpc_servers=target_endpoints(args),
        chat_template=chat_template_file(args),
        flash_attn=args.flash_attn,
        prompt_cache_mib=args.prompt_cache,
    )


def draft_config(args: argparse.Namespace, path: str) -> ModelConfig:
    """A draft's load settings from the model flags."""
    return ModelConfig(
        path,
        n_ctx=args.n_ctx,
        n_gpu_layers=args.draft_n_gpu_layers,
        n_threads=args.threads,
        rpc_servers=draft_endpoints(args),
        flash_attn=args.flash_attn,
    )


def placement_json(facts: list[ModelFacts]) -> dict[str, list[dict[str, object]]]:
    """Where each model's weights went, by llama.cpp's buffer names (RPC0[host:port], CPU...)."""
    roles = ("target", "draft")
    return {
        role: [{"buffer": name, "bytes": size} for name, size in f.placement]
        for role, f in zip(roles, facts, strict=False)
    }
