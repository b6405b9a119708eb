"""Architecture registry: `general.architecture` names the module that turns a GGUF file into a ModelSpec.

Adding an architecture = one file with `ARCHITECTURE` and `build_spec(reader)`, plus one line here.
"""
from __future__ import annotations

from typing import Any, Callable

from onewell.errors import GGUFError, UnsupportedError
from onewell.models import gemma3, llama, nomic_bert, phi3, qwen2, qwen3
from onewell.models.base import ModelSpec

ARCHITECTURES: dict[str, Callable[[Any], ModelSpec]] = {
    qwen2.ARCHITECTURE: qwen2.build_spec,
    llama.ARCHITECTURE: llama.build_spec,
    gemma3.ARCHITECTURE: gemma3.build_spec,
    qwen3.ARCHITECTURE: qwen3.build_spec,
    phi3.ARCHITECTURE: phi3.build_spec,
    nomic_bert.ARCHITECTURE: nomic_bert.build_spec,   # an encoder: embeddings, not text
}


def supported_architectures() -> list[str]:
    return sorted(ARCHITECTURES)


def load_spec(reader: Any) -> ModelSpec:
    """The ModelSpec of an open GGUFReader; UnsupportedError for architectures not in the registry."""
    where = f"{reader.path}" if hasattr(reader, "path") else "GGUF file"
    arch = reader.metadata.get("general.architecture")
    if arch is None:
        raise GGUFError(f"{where}: metadata key 'general.architecture' is missing")
    if not isinstance(arch, str):
        raise GGUFError(f"{where}: 'general.architecture' must be a string, got {arch!r}")
    build = ARCHITECTURES.get(arch)
    if build is None:
        raise UnsupportedError(f"{where}: architecture {arch!r} is not supported; "
                               f"supported: {', '.join(supported_architectures())}")
    return build(reader)
