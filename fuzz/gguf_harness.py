"""One fuzz input through everything a model file reaches when onewell loads and runs it.

    outcome = run_one(data, scratch_path)

Stages: GGUFReader (validation of header, metadata, tensor table) -> load_spec (architecture, hyperparameters,
tensor shapes) -> Tokenizer.from_metadata (vocabulary, merges, special ids) -> encode/decode a sample and
render the chat template -> for small models, a NativeBackend and two forward steps in C.

The contract under test: every input ends either as a working model ("valid") or in an exception derived
from onewell.errors.OnewellError, whose class name is the outcome. Anything else (another exception, a
wrong result from the C core, a crash, a hang, a runaway allocation) propagates to the fuzzer as a finding.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from onewell.errors import OnewellError
from onewell.gguf import GGUFReader
from onewell.models.registry import load_spec
from onewell.tokenizer import Tokenizer, render_chat

# Native forward only for models this small: bounds time and memory per input whatever the file claims.
MAX_NATIVE_WEIGHT_BYTES = 4 << 20
MAX_NATIVE_LAYERS = 4
MAX_NATIVE_VOCAB_X_EMBD = 1 << 22
NATIVE_N_CTX = 16
SAMPLE_TEXT = "Hello world, 12 apples <|im_end|> \u00fcber \U0001f600"
SAMPLE_CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there!"}]


class WrongResult(AssertionError):
    """The pipeline accepted the file but then produced something impossible (a finding, like a crash)."""


VALID_RAN = "valid"                       # loaded, tokenized, and ran two native forward steps
VALID_TOO_LARGE = "valid (no native step)"  # loaded and tokenized; too big for a native step per input


def run_one(data: bytes, scratch: Path) -> str:
    """Load `data` as a model file (written to `scratch`); returns one of the VALID_* outcomes or the
    OnewellError class name."""
    scratch.write_bytes(data)
    try:
        return load_and_run(scratch)
    except OnewellError as e:
        return type(e).__name__


def load_and_run(path: Path) -> str:
    reader = GGUFReader(path)
    try:
        spec = load_spec(reader)
        tokenizer = Tokenizer.from_metadata(reader.metadata)
        ids = exercise_tokenizer(tokenizer)
        if not small_enough(spec):
            return VALID_TOO_LARGE
        run_native(spec, ids or [0])
        return VALID_RAN
    finally:
        reader.close()


def exercise_tokenizer(tokenizer: Tokenizer) -> list[int]:
    ids = tokenizer.encode(SAMPLE_TEXT, add_bos=tokenizer.add_bos_token, parse_special=True)
    for i in ids:
        if not 0 <= i < tokenizer.n_vocab:
            raise WrongResult(f"encode produced id {i} outside the vocabulary of {tokenizer.n_vocab}")
    tokenizer.decode(ids)
    tokenizer.decode(ids, skip_special=True)
    if tokenizer.chat_template:
        render_chat(tokenizer.chat_template, SAMPLE_CHAT)
    return ids


def small_enough(spec) -> bool:
    cfg = spec.config
    return (spec.bytes_per_token() <= MAX_NATIVE_WEIGHT_BYTES and cfg.n_layer <= MAX_NATIVE_LAYERS
            and cfg.n_vocab * cfg.n_embd <= MAX_NATIVE_VOCAB_X_EMBD)


def run_native(spec, ids: list[int]) -> None:
    from onewell.runtime.native import NativeBackend

    n_vocab = spec.config.n_vocab
    backend = NativeBackend(spec, n_ctx=NATIVE_N_CTX, threads=1, max_batch=4)
    prompt = [i % n_vocab for i in ids[: NATIVE_N_CTX - 2]]
    logits = backend.forward(prompt)
    if logits.shape != (n_vocab,):
        raise WrongResult(f"logits of shape {logits.shape}, expected ({n_vocab},)")
    token = backend.forward_argmax([int(np.argmax(logits)) % n_vocab])
    if not 0 <= token < n_vocab:
        raise WrongResult(f"argmax {token} outside the vocabulary of {n_vocab}")
    if backend.n_past != len(prompt) + 1:
        raise WrongResult(f"n_past {backend.n_past} after {len(prompt) + 1} tokens")
