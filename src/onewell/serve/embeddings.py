"""/v1/embeddings: OpenAI's embeddings endpoint on an embedding model (config.is_embedding).

    {"input": "text" | ["text", ...] | [id, ...] | [[id, ...], ...], "model": ..., "dimensions": d,
     "encoding_format": "float" | "base64", "user": ...}
 -> {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...] | "base64"}],
     "model": ..., "usage": {"prompt_tokens": n, "total_tokens": n}}

Texts are tokenized with [CLS] ... [SEP] (as llama.cpp's server does); token-id inputs are used as given. All
inputs of a request go through one `Model.embed_ids` call, so they share forward steps. `dimensions` keeps the
first d values and normalizes again (Matryoshka); base64 is the little-endian float32 bytes, as OpenAI's
client decodes them. An embedding server has no generation slots: `EmbeddingScheduler` stands where the
generation scheduler would (metrics, queue bound) and runs one request's forward at a time on a worker thread.
"""
from __future__ import annotations

import asyncio
import base64
import threading
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from onewell.serve.scheduler import QueueFullError

MAX_INPUTS = 2048   # OpenAI's limit of inputs per request


class EmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="allow", str_max_length=1 << 24)   # unknown fields (user, ...) are ignored

    input: str | list[str] | list[int] | list[list[int]] = Field(
        description="a string, a list of strings, token ids, or a list of token-id lists")
    model: str | None = None
    dimensions: int | None = Field(None, ge=1, description="keep the first d values, normalized again")
    encoding_format: Literal["float", "base64"] = "float"

    @field_validator("input")
    @classmethod
    def _non_empty(cls, value):
        if isinstance(value, list) and not value:
            raise ValueError(f"input must hold 1 to {MAX_INPUTS} items, got 0")
        # a list of ints is one input (its length is bounded by the context); other lists are inputs
        if isinstance(value, list) and not isinstance(value[0], int) and len(value) > MAX_INPUTS:
            raise ValueError(f"input must hold 1 to {MAX_INPUTS} items, got {len(value)}")
        if isinstance(value, list) and value and isinstance(value[0], list) and any(not ids for ids in value):
            raise ValueError("a token-id input is empty")
        return value

    def batches(self) -> tuple[list[str] | None, list[list[int]] | None]:
        """(texts, None) or (None, token-id lists)."""
        if isinstance(self.input, str):
            return [self.input], None
        if isinstance(self.input[0], str):
            return list(self.input), None
        if isinstance(self.input[0], int):
            return None, [list(self.input)]
        return None, [list(ids) for ids in self.input]


def encode_vector(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":
        return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return [float(v) for v in vector]


class EmbeddingScheduler:
    """Stands in for the generation scheduler on an embedding model: bounds the requests waiting (queue) and
    runs their forwards one after another on a worker thread (the executor runs one step at a time)."""

    slots: list = []

    def __init__(self, model: Any, queue_capacity: int):
        self.model = model
        self.n_ctx = model.n_ctx
        self.queue_capacity = queue_capacity
        self._lock = threading.Lock()
        self.waiting = 0
        self.active = 0
        self.counters = {"embedding_requests": 0, "embedding_inputs": 0, "embedding_tokens": 0}

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def abort_all_threadsafe(self) -> None:
        pass   # a forward in progress finishes in well under a second per step

    def check_room(self, extra_waiting: int = 0) -> None:
        if self.waiting + extra_waiting > self.queue_capacity:
            raise QueueFullError(f"{self.waiting} embedding requests are waiting (queue capacity "
                                 f"{self.queue_capacity}); retry later")

    def metrics(self) -> dict[str, int]:
        return {"slots": 0, "active_slots": self.active, "queue_length": self.waiting,
                "queue_capacity": self.queue_capacity, **self.counters}

    async def embed(self, texts: list[str] | None, ids: list[list[int]] | None,
                    dimensions: int | None) -> tuple[np.ndarray, int]:
        """(vectors, prompt tokens). ValueError / ContextOverflowError for bad inputs."""
        self.check_room(extra_waiting=1)
        self.waiting += 1
        try:
            return await asyncio.to_thread(self._run, texts, ids, dimensions)
        finally:
            self.waiting -= 1

    def _run(self, texts, ids, dimensions) -> tuple[np.ndarray, int]:
        embedder = self.model.embedder
        batch = ids if ids is not None else [embedder.tokenize(t) for t in texts]
        with self._lock:
            self.active = 1
            try:
                vectors = self.model.embed_ids(batch, dimensions=dimensions)
            finally:
                self.active = 0
        n_tokens = sum(len(b) for b in batch)
        self.counters["embedding_requests"] += 1
        self.counters["embedding_inputs"] += len(batch)
        self.counters["embedding_tokens"] += n_tokens
        return vectors, n_tokens
