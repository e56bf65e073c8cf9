"""The hostile-file corpus against the header reader and the child-process load check."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.errors import ModelLoadError
from models.gguf import inspect_gguf
from models.probe import CHECKS_FILE, ProbeVerdict, ensure_loadable, probe_file
from tests.helpers.hostile_gguf import Case, build_corpus
from tests.helpers.model_files import bundled_q4_1


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    cases = build_corpus(bundled_q4_1(), tmp_path_factory.mktemp("hostile"))
    return {case.name: case for case in cases}


def test_every_hostile_header_is_refused_with_its_reason(corpus: dict[str, Case]) -> None:
    refused = [case for case in corpus.values() if case.refuse is not None]
    assert len(refused) > 35
    for case in refused:
        with pytest.raises(ModelLoadError) as caught:
            inspect_gguf(case.path)
        assert case.refuse.lower() in caught.value.reason.lower(), case.name
        assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("tokenizer-none", "tokenizer model 'none'"),
        ("tokenizer-bogus", "tokenizer model 'bogus'"),
        ("tokenizer-missing", "tokenizer model 'missing'"),
        ("tokens-empty", "vocabulary is empty"),
        ("architecture-unknown", "no layer count"),
    ],
)
def test_files_llama_cannot_use_are_listed_but_not_models(
    corpus: dict[str, Case], name: str, problem: str
) -> None:
    info = inspect_gguf(corpus[name].path)
    assert not info.is_model
    assert info.problem is not None and problem in info.problem
    assert info.to_dict()["problem"] == info.problem
    with pytest.raises(ModelLoadError, match="cannot load model"):
        ensure_loadable(corpus[name].path)


def test_a_sound_header_is_a_model(corpus: dict[str, Case]) -> None:
    info = inspect_gguf(corpus["no-tensors-real-header"].path)
    assert info.is_model and info.problem is None and info.n_layers == 30


@pytest.mark.model
def test_a_file_that_crashes_llama_is_caught_by_the_child_and_remembered(
    corpus: dict[str, Case], tmp_path: Path
) -> None:
    crasher = corpus["duplicate-token-crashes-llama"].path
    assert inspect_gguf(crasher).is_model  # no header rule catches it: only a load does
    verdict = probe_file(crasher)
    assert not verdict.ok and verdict.lasting
    assert "crashed" in verdict.reason and "SIGABRT" in verdict.reason

    with pytest.raises(ModelLoadError, match="crashed"):
        ensure_loadable(crasher)
    checks = Path(os.environ["SPECCHAT_DATA_DIR"]) / CHECKS_FILE
    assert "crashed" in checks.read_text()
    # The second time the remembered verdict answers: no child process is started.
    with pytest.raises(ModelLoadError, match="found by an earlier check"):
        ensure_loadable(crasher)


@pytest.mark.model
def test_a_good_model_is_checked_once_then_answered_from_the_cache(
    demo_models: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    import models.probe

    path = demo_models.q4_0  # type: ignore[attr-defined]
    ensure_loadable(path)
    data_dir = Path(os.environ["SPECCHAT_DATA_DIR"])
    assert '"ok": true' in (data_dir / CHECKS_FILE).read_text()

    def no_second_probe(_path: Path, **_kw: object) -> ProbeVerdict:
        raise AssertionError("the cached verdict should have answered")

    monkeypatch.setattr(models.probe, "probe_file", no_second_probe)
    ensure_loadable(path)


def test_a_fifo_is_refused_before_anything_opens_it(corpus: dict[str, Case]) -> None:
    from app.llama.facts import precheck_model_file

    with pytest.raises(ModelLoadError, match="not a regular file"):
        precheck_model_file(corpus["fifo"].path)
    with pytest.raises(ModelLoadError, match="not a regular file"):
        ensure_loadable(corpus["fifo"].path)


@pytest.mark.model
def test_a_check_that_cannot_finish_is_not_remembered(
    demo_models: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    import models.probe

    path = demo_models.q4_0  # type: ignore[attr-defined]
    verdict = probe_file(path, timeout_s=0.05)
    assert not verdict.ok and not verdict.lasting and "did not finish" in verdict.reason

    monkeypatch.setattr(models.probe, "probe_file", lambda _p: verdict)
    with pytest.raises(ModelLoadError, match="did not finish"):
        ensure_loadable(path)
    assert not (Path(os.environ["SPECCHAT_DATA_DIR"]) / CHECKS_FILE).exists()
    monkeypatch.undo()
    ensure_loadable(path)  # the next try checks again, and this time it finishes


def test_the_verdict_file_keeps_only_the_newest_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import models.probe

    monkeypatch.setattr(models.probe, "_KEPT_CHECKS", 3)
    for i in range(5):
        models.probe._save_check(f"/models/m{i}.gguf|1|2|3", i % 2 == 0, f"reason {i}")
    models.probe._save_check("/models/m2.gguf|1|2|3", True, "checked again")
    data = json.loads((Path(os.environ["SPECCHAT_DATA_DIR"]) / CHECKS_FILE).read_text())
    assert list(data) == ["/models/m3.gguf|1|2|3", "/models/m4.gguf|1|2|3", "/models/m2.gguf|1|2|3"]
    assert data["/models/m2.gguf|1|2|3"] == {"ok": True, "reason": "checked again"}
