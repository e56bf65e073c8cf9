"""The fit planner counts RPC workers' free memory for the target's offloaded layers."""

from __future__ import annotations

import pytest

from models.gguf import GGUFInfo, inspect_gguf
from models.memory import DeviceMemory, SystemMemory, plan_fit
from tests.helpers.model_files import bundled_q4_1

GIB = 1024**3
MIB = 1024**2
HEADROOM = 64 * MIB
NO_GPU = SystemMemory(64 * GIB, 32 * GIB, None)

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def draft() -> GGUFInfo:
    return inspect_gguf(bundled_q4_1())


@pytest.fixture(scope="module")
def target(demo_models: object) -> GGUFInfo:
    return inspect_gguf(demo_models.f32)  # type: ignore[attr-defined]


def test_roomy_workers_take_the_whole_target_and_the_draft_stays_on_the_cpu(
    target: GGUFInfo, draft: GGUFInfo
) -> None:
    plan = plan_fit(
        target,
        draft,
        n_ctx=2048,
        memory=NO_GPU,
        headroom_bytes=HEADROOM,
        remote_free_bytes=8 * GIB,
    )
    assert plan.fits and not plan.warnings
    assert plan.target.gpu_bytes > 400 * MIB  # the offloaded share, held by the workers
    assert plan.draft is not None and plan.draft.gpu_bytes == 0
    assert plan.suggested_draft_n_gpu_layers == 0


def test_short_workers_get_fewer_target_layers_in_words(target: GGUFInfo, draft: GGUFInfo) -> None:
    plan = plan_fit(
        target,
        draft,
        n_ctx=2048,
        memory=NO_GPU,
        headroom_bytes=HEADROOM,
        remote_free_bytes=HEADROOM + 300 * MIB,
    )
    assert not plan.fits
    assert 0 < plan.suggested_n_gpu_layers < 31
    assert "RPC worker memory" in plan.warnings[0]


def test_workers_add_to_a_local_gpu_that_is_too_small_alone(
    target: GGUFInfo, draft: GGUFInfo
) -> None:
    gpu = SystemMemory(64 * GIB, 32 * GIB, (DeviceMemory(0, "Small GPU", GIB, 400 * MIB),))
    alone = plan_fit(target, draft, n_ctx=2048, memory=gpu, headroom_bytes=HEADROOM)
    helped = plan_fit(
        target,
        draft,
        n_ctx=2048,
        memory=gpu,
        headroom_bytes=HEADROOM,
        remote_free_bytes=2 * GIB,
    )
    assert not alone.fits
    assert helped.fits and helped.suggested_n_gpu_layers == -1
