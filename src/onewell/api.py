"""The Python API: `onewell.load(model)` and `Model.generate` / `Model.chat` (or `Model.embed` for an embedding model).

    >>> import onewell
    >>> model = onewell.load("smollm2-135m-instruct")
    >>> print(model.generate("def fibonacci(n):", max_tokens=32, temperature=0))

A Model owns one backend and its KV cache: consecutive calls reuse the longest common prompt prefix (a chat
that grows turn by turn evaluates only the new turn). One generation at a time per Model.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Literal, Sequence

import numpy as np

from onewell.errors import WrongModelKindError
from onewell.gguf import GGUFReader
from onewell.models.base import ModelSpec
from onewell.models.registry import load_spec
from onewell.runtime.backend import Backend, create_backend
from onewell.runtime.generate import GenerationStats, check_fits, generate_tokens
from onewell.runtime.logprobs import TokenLogprobs, token_logprobs
from onewell.runtime.sampling import Sampler, SamplingParams
from onewell.tokenizer import Tokenizer, render_chat, require_chat_template


def load(
    model: str | os.PathLike,
    backend: Literal["native", "reference"] = "native",
    threads: int | None = None,
    n_ctx: int = 4096,
    kv_type: Literal["f32", "f16", "q8_0"] = "f16",
) -> Model:
    """Open a model by registry name (pulled and cached on first use) or .gguf path.

    backend: "native" (the C executor, the default) or
    "reference" (numpy, float32: slow, ~4 bytes of memory per parameter). threads: worker threads of the
    native backend (None = all cores); the reference backend leaves threading to numpy's BLAS.
    n_ctx: tokens of context (prompt + generated) the KV cache holds. kv_type: the KV cache's element type,
    "f16" (the default, as llama.cpp's), "f32" or "q8_0" (34 bytes per 32 values; head size a multiple of 32)."""
    from onewell.runtime.kv_cache import check_kv_type

    from onewell.hub import ensure_model

    if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx <= 0:
        raise ValueError(f"n_ctx must be a positive integer, got {n_ctx!r}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads <= 0):
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    kv_type = check_kv_type(kv_type)
    path = ensure_model(model)
    reader = GGUFReader(path)
    spec = load_spec(reader)
    tokenizer = Tokenizer.from_metadata(reader.metadata)
    if spec.config.is_embedding:   # an encoder: Model.embed, no KV cache, context = the model's (<= 2048)
        from onewell.runtime.embedding import Embedder

        embedder = Embedder(spec, tokenizer, backend=backend, threads=threads)
        return Model(spec, tokenizer, None, path=Path(path), reader=reader, embedder=embedder)
    engine = create_backend(backend, spec, n_ctx=n_ctx, threads=threads, kv_type=check_kv_type(kv_type, spec.config.head_dim))
    return Model(spec, tokenizer, engine, path=Path(path), reader=reader)


class Model:
    def __init__(self, spec: ModelSpec, tokenizer: Tokenizer, backend: Backend | None,
                 path: Path | None = None, reader: GGUFReader | None = None, embedder=None):
        self.spec = spec
        self.embedder = embedder  # runtime/embedding.Embedder of an embedding model (backend is then None)
        self.tokenizer = tokenizer
        self.backend = backend
        self.path = path
        self._reader = reader  # keeps the mapping the quantized weights live in open
        self.last_stats = GenerationStats()
        self.last_logprobs: list[TokenLogprobs] = []  # filled by generate(..., logprobs=k)
        self._cache_ids: list[int] = []  # tokens the backend's KV cache holds, for prefix reuse
        self._active = 0  # id of the generation allowed to use the backend; older streams are stale

    @property
    def n_ctx(self) -> int:
        return self.embedder.n_ctx if self.embedder is not None else self.backend.n_ctx

    @property
    def is_embedding(self) -> bool:
        return self.embedder is not None

    # --- embeddings ----------------------------------------------------------------------------------------

    def embed(self, texts: str | Sequence[str], dimensions: int | None = None) -> np.ndarray:
        """L2-normalized embeddings, (len(texts), n_embd) float32 (one text: one row). Texts are tokenized with
        [CLS] ... [SEP]; nomic-embed wants its task prefixes ("search_query: ", "search_document: ", ...).
        dimensions: keep the first d values and normalize again (Matryoshka). Many texts share forward steps."""
        from onewell.runtime.embedding import truncate_dimensions

        return truncate_dimensions(self._embedder().embed([texts] if isinstance(texts, str) else list(texts)),
                                   dimensions)

    def embed_ids(self, batch: Sequence[Sequence[int]], dimensions: int | None = None) -> np.ndarray:
        """embed() for inputs already tokenized (used as given: no [CLS]/[SEP] added)."""
        from onewell.runtime.embedding import truncate_dimensions

        return truncate_dimensions(self._embedder().embed_ids(batch), dimensions)

    def _embedder(self):
        if self.embedder is None:
            raise WrongModelKindError(f"{self.spec.metadata.get('general.name', self.spec.config.arch)} is a "
                                      f"generative model (arch {self.spec.config.arch!r}); embed() needs an "
                                      f"embedding model such as nomic-embed-text-v1.5")
        return self.embedder

    def _generative(self) -> None:
        if self.embedder is not None:
            raise WrongModelKindError(f"{self.spec.metadata.get('general.name', self.spec.config.arch)} is an "
                                      f"embedding model (arch {self.spec.config.arch!r}): it makes vectors "
                                      f"(Model.embed), not text")

    def __repr__(self) -> str:
        cfg = self.spec.config
        return f"Model({cfg.arch}, {cfg.n_layer} layers, n_ctx={self.n_ctx}, path={str(self.path)!r})"

    # --- text in, text out -------------------------------------------------------------------------------

    def generate(self, prompt: str, max_tokens: int = 128, stream: bool = False, stop: Sequence[str] | None = None,
                 chat: bool = False, json_schema=None, response_format=None, grammar=None,
                 logprobs: int | None = None, **sampling) -> str | Iterator[str]:
        """Continue `prompt` (or, with chat=True, answer it as a user message through the chat template).

        Sampling keywords: temperature (0 = greedy), top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed,
        presence_penalty, frequency_penalty, logit_bias ({token id: bias}).
        Structured output (one of): json_schema (a dict or JSON text), response_format (OpenAI's dict:
        {"type": "json_object"} or {"type": "json_schema", "json_schema": {"schema": ...}}), grammar (Lark or
        GBNF text, or an onewell.structured.Grammar). logprobs=k: `last_logprobs` then holds, per generated
        token, its logprob and the k most likely alternatives."""
        self._generative()
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str, not {type(prompt).__name__}")
        options = dict(json_schema=json_schema, response_format=response_format, grammar=grammar,
                       logprobs=logprobs)
        if chat:
            return self.chat([{"role": "user", "content": prompt}], max_tokens=max_tokens, stream=stream,
                             stop=stop, **options, **sampling)
        ids = self.tokenizer.encode(prompt, add_bos=self.tokenizer.add_bos_token, parse_special=True)
        return self._run(ids, max_tokens, stream, stop, sampling, **options)

    def chat(self, messages: list[dict], max_tokens: int = 128, stream: bool = False,
             stop: Sequence[str] | None = None, json_schema=None, response_format=None, grammar=None,
             logprobs: int | None = None, tools: list[dict] | None = None, **sampling) -> str | Iterator[str]:
        """Reply to a conversation [{"role": "user", "content": ...}, ...] rendered by the model's template.
        `tools` (OpenAI's [{"type": "function", "function": {...}}]) are rendered into the prompt by the
        template; onewell.structured.tool_calls.parse_tool_calls reads the calls out of the reply. Other keywords as generate()."""
        self._generative()
        ids = self.tokenize_chat(messages, tools=tools)
        return self._run(ids, max_tokens, stream, stop, sampling, json_schema=json_schema,
                         response_format=response_format, grammar=grammar, logprobs=logprobs)

    def tokenize_chat(self, messages: list[dict], add_generation_prompt: bool = True,
                      tools: list[dict] | None = None) -> list[int]:
        tok = self.tokenizer
        template = require_chat_template(tok.chat_template, self.spec.metadata.get("general.name", "this model"))
        bos = tok.token_text(tok.bos_id) if tok.bos_id is not None else ""
        eos = tok.token_text(tok.eos_id) if tok.eos_id is not None else ""
        text = render_chat(template, messages, add_generation_prompt=add_generation_prompt,
                           bos_token=bos, eos_token=eos, **({"tools": tools} if tools else {}))
        # Templates that write the BOS text themselves must not get a second one.
        add_bos = tok.add_bos_token and not (bos and text.startswith(bos))
        return tok.encode(text, add_bos=add_bos, parse_special=True)

    # --- the loop ----------------------------------------------------------------------------------------

    def _run(self, ids: list[int], max_tokens: int, stream: bool, stop: Sequence[str] | None,
             sampling: dict, json_schema=None, response_format=None, grammar=None,
             logprobs: int | None = None) -> str | Iterator[str]:
        if isinstance(stop, str):
            stop = [stop]
        sampler = Sampler(SamplingParams(**sampling))  # bad settings fail here, before anything runs
        check_fits(self.n_ctx, len(ids), max_tokens)  # and so does a prompt that cannot fit, even when streaming
        if logprobs is not None and (isinstance(logprobs, bool) or not isinstance(logprobs, int) or logprobs < 0):
            raise ValueError(f"logprobs must be a non-negative integer (alternatives per token) or None, got {logprobs!r}")
        constraint = None
        if json_schema is not None or response_format is not None or grammar is not None:
            from onewell import structured

            chosen = structured.from_options(json_schema, response_format, grammar)
            constraint = chosen.constraint(self.tokenizer) if chosen is not None else None
        self._active += 1
        chunks = self._stream(ids, max_tokens, sampler, list(stop or ()), self._active, constraint, logprobs)
        if stream:
            return chunks
        return "".join(chunks)

    def _stream(self, ids: list[int], max_tokens: int, sampler: Sampler, stop: list[str],
                generation: int, constraint=None, logprobs: int | None = None) -> Iterator[str]:
        stats = GenerationStats()
        self.last_stats = stats
        self.last_logprobs: list[TokenLogprobs] = []
        observe = None
        if logprobs is not None:
            def observe(token, logits):
                self.last_logprobs.append(token_logprobs(self.tokenizer, logits, token, logprobs))
        chunks = generate_tokens(self.backend, self.tokenizer, ids, max_tokens, sampler, stop=stop,
                                 stats=stats, cache_ids=self._cache_ids, constraint=constraint, observe=observe)
        while True:
            # Checked before every step: a stale stream must not append to a cache a newer call now owns.
            if generation != self._active:
                chunks.close()
                raise RuntimeError("this stream was superseded by a newer generate()/chat() call on the same "
                                   "Model; finish (or drop) one stream before starting another")
            try:
                chunk = next(chunks)
            except StopIteration:
                return
            yield chunk
