"""`GET /v1/models/{id}`, which the OpenAI SDK's `client.models.retrieve(id)` calls: the loaded
model's object, the one `/v1/models` lists, or OpenAI's 404 for a model the server lacks."""

from __future__ import annotations

from typing import Any

from app.engine.config import GenerationConfig
from app.server.app import ServerSettings, create_app
from app.server.schemas import Defaults
from tests.helpers.asgi import get_json

SETTINGS = ServerSettings(Defaults(GenerationConfig(), 4), "qwen2.5-0.5b-instruct-q8_0", 512)


class IdleOwner:
    """An engine owner no model route reaches."""

    def health(self) -> dict[str, Any]:
        return {}


def get(path: str) -> tuple[int, Any]:
    app = create_app(IdleOwner(), SETTINGS)  # type: ignore[arg-type]
    return get_json(app, path)


def test_the_loaded_model_is_retrieved_as_the_list_shows_it() -> None:
    status, listed = get("/v1/models")
    assert status == 200
    status, model = get(f"/v1/models/{SETTINGS.model_id}")
    assert status == 200
    assert model == listed["data"][0]
    assert model["id"] == SETTINGS.model_id and model["object"] == "model"


def test_a_model_the_server_lacks_is_openais_404() -> None:
    status, body = get("/v1/models/gpt-4o")
    assert status == 404
    error = body["error"]
    assert error["code"] == "model_not_found"
    assert error["param"] is None  # as OpenAI answers it
    assert error["type"] == "invalid_request_error"
    assert "gpt-4o" in error["message"]
    status, body = get("/v1/models/org/gpt-4o")
    assert (status, body["error"]["code"]) == (404, "model_not_found")
