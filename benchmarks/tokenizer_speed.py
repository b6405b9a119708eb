"""Load and encode times of every vocabulary in tests/data/vocab (best of N runs, quiet machine please).

    .venv/bin/python benchmarks/tokenizer_speed.py [--repeat 5]

Prints per vocabulary: GGUF metadata parse, Tokenizer.from_metadata, encode of 10 KB of mixed text, decode.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from onewell.gguf import GGUFReader
from onewell.tokenizer import Tokenizer

VOCAB = Path(__file__).resolve().parent.parent / "tests" / "data" / "vocab"


def best(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sample = (VOCAB / "ggml-vocab-llama-bpe.gguf.inp").read_text(encoding="utf-8").replace("__ggml_vocab_test__", "")
    text = (sample * (10240 // len(sample) + 1))[:10240]
    print(f"{'vocabulary':<12} {'tokens':>7} {'parse ms':>9} {'build ms':>9} {'encode 10KB ms':>15} {'decode ms':>10}")
    for path in sorted(VOCAB.glob("ggml-vocab-*.gguf")):
        def parse():
            with GGUFReader(path) as reader:
                return reader.metadata
        t_parse, metadata = best(parse, args.repeat)
        t_build, tok = best(lambda: Tokenizer.from_metadata(metadata), args.repeat)
        t_encode, ids = best(lambda: tok.encode(text), args.repeat)
        t_decode, _ = best(lambda: tok.decode(ids), args.repeat)
        name = path.name.removeprefix("ggml-vocab-").removesuffix(".gguf")
        print(f"{name:<12} {tok.n_vocab:>7} {t_parse * 1e3:>9.0f} {t_build * 1e3:>9.0f} {t_encode * 1e3:>15.1f} "
              f"{t_decode * 1e3:>10.1f}")


if __name__ == "__main__":
    main()
