"""The OpenAPI 3.1 document served at /openapi.json, built from the pydantic models in openai_schema.py."""
from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from onewell import __version__
from onewell.serve import openai_schema as s
from onewell.serve.embeddings import EmbeddingRequest

REQUESTS = (s.ChatCompletionRequest, s.CompletionRequest, EmbeddingRequest)
RESPONSES = (s.ChatCompletionResponse, s.ChatCompletionChunk, s.CompletionResponse, s.ModelList, s.ErrorResponse,
             s.Health, s.Metrics)


def _ref(model: type) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(model: type, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


ERRORS = {
    "400": _json(s.ErrorResponse, "invalid request (bad JSON, bad parameters, prompt too long for the context)"),
    "401": _json(s.ErrorResponse, "missing or wrong API key (when the server was started with --api-key)"),
    "503": _json(s.ErrorResponse, "every slot busy and the queue full; see the Retry-After header"),
}


def _generation(request: type, response: type, chunk: type, summary: str) -> dict[str, Any]:
    ok = _json(response, "the reply; with stream=true, server-sent events instead")
    ok["content"]["text/event-stream"] = {
        "schema": {"type": "string", "description": f"`data: <{chunk.__name__} JSON>` events, then `data: [DONE]`"}}
    return {"post": {
        "summary": summary,
        "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(request)}}},
        "responses": {"200": ok, **ERRORS},
    }}


def build_openapi() -> dict[str, Any]:
    _, top = models_json_schema([(m, "validation") for m in REQUESTS] + [(m, "serialization") for m in RESPONSES],
                                ref_template="#/components/schemas/{model}")
    return {
        "openapi": "3.1.0",
        "info": {"title": "onewell", "version": __version__,
                 "description": "OpenAI-compatible completions served by onewell on the CPU."},
        "components": {
            "schemas": top.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
        "paths": {
            "/v1/chat/completions": _generation(s.ChatCompletionRequest, s.ChatCompletionResponse,
                                                s.ChatCompletionChunk, "reply to a conversation"),
            "/v1/completions": _generation(s.CompletionRequest, s.CompletionResponse, s.CompletionResponse,
                                           "continue a text prompt"),
            "/v1/embeddings": {"post": {
                "summary": "vectors of texts or token ids (an embedding model only; docs/serving.md)",
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(EmbeddingRequest)}}},
                "responses": {"200": {"description": "{object: list, data: [{object: embedding, index, embedding}], "
                                                     "model, usage}"}, **ERRORS}}},
            "/v1/models": {"get": {"summary": "the model this server runs",
                                   "responses": {"200": _json(s.ModelList, "one model"), "401": ERRORS["401"]}}},
            "/health": {"get": {"summary": "liveness", "security": [{}],
                                "responses": {"200": _json(s.Health, "the server is up")}}},
            "/metrics": {"get": {"summary": "slots, queue, counters",
                                 "responses": {"200": _json(s.Metrics, "current state and totals"),
                                               "401": ERRORS["401"]}}},
        },
    }
