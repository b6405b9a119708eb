"""Decode speed with and without a JSON Schema constraint, interleaved in one process (plain, schema, thread, ...).

Variants: plain (no constraint); schema (the mask computed inline before each draw); thread (the same, but
the next mask is computed on a helper thread while the native step runs: Constraint.background).

Both variants generate exactly -n tokens from the same prompt with the same sampler: end-of-generation tokens
are banned by logit_bias in both, and the schema (one long string) cannot complete before -n tokens. tg is
gen_tokens / gen_seconds from Model.last_stats (decode steps plus sampling plus, with the schema, the mask).
Prints the median tok/s of each variant, the median of the per-rep ratios to plain (target >= 0.90), and
the grammar engine's own time per token measured apart.

    python benchmarks/structured_overhead.py [MODEL] --threads 2 --reps 9 -n 64
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import onewell
from onewell import structured
from onewell.structured.constraint import Constraint

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["title", "story"],
          "properties": {"title": {"type": "string", "maxLength": 40},
                         "story": {"type": "string", "minLength": 4000}}}
PROMPT = "Write a long story about a lighthouse keeper, as JSON with a title and the story."


def run(model, n: int, seed: int, ban: dict[int, float], schema: dict | None) -> float:
    model.generate(PROMPT, chat=True, max_tokens=n, temperature=0.7, seed=seed, logit_bias=ban, json_schema=schema)
    stats = model.last_stats
    assert stats.gen_tokens == n, f"generated {stats.gen_tokens} of {n} tokens: the comparison would be unfair"
    return stats.gen_tokens / stats.gen_seconds


def mask_microseconds(model, n: int) -> float:
    """Grammar engine + mask application per token, without the model: replays a valid JSON text."""
    tok = model.tokenizer
    text = '{"title": "The Keeper", "story": "' + "The lamp turned slowly over the grey sea. " * 40
    ids = tok.encode(text, parse_special=False)[:n]
    constraint = structured.json_schema(SCHEMA).constraint(tok)
    logits = np.zeros(tok.n_vocab, dtype=np.float32)
    t0 = time.perf_counter()
    for t in ids:
        constraint.mask(logits)
        constraint.accept(t)
    return (time.perf_counter() - t0) / len(ids) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    args = ap.parse_args()
    model = onewell.load(args.model, threads=args.threads, n_ctx=1024)
    ban = {t: -100.0 for t in model.tokenizer.eog_ids}
    run(model, 8, 0, ban, SCHEMA)  # builds the vocabulary table once; warms caches
    variants = {"plain": (None, False), "schema": (SCHEMA, False), "thread": (SCHEMA, True)}
    speeds: dict[str, list[float]] = {name: [] for name in variants}
    for rep in range(args.reps):
        for name, (schema, background) in variants.items():
            Constraint.background_default = background
            speeds[name].append(run(model, args.n_gen, rep, ban, schema))
    Constraint.background_default = True   # back to the library's default
    us = mask_microseconds(model, args.n_gen)
    print(f"{args.model}, {args.threads} thread(s), tg{args.n_gen}, {args.reps} interleaved reps")
    for name, s in speeds.items():
        ratio = statistics.median(b / a for a, b in zip(speeds["plain"], s))
        print(f"  {name:7} {statistics.median(s):7.2f} tok/s  ({min(s):.1f}-{max(s):.1f})  "
              f"median ratio to plain {ratio:.3f}" + ("" if name == "plain" else "  (target >= 0.90)"))
    print(f"  grammar mask + apply: {us:.0f} us/token (llguidance {structured.engine.llguidance().__version__})")


if __name__ == "__main__":
    main()
