"""Decode speed with and without a JSON Schema constraint, interleaved in one process (plain, schema, plain, ...).

Both variants generate exactly -n tokens from the same prompt with the same sampler: end-of-generation tokens
are banned by logit_bias in both, and the schema (one long string) cannot complete before -n tokens. tg is
gen_tokens / gen_seconds from Model.last_stats (decode steps plus sampling plus, with the schema, the mask).
Prints the median tok/s of each variant, the median of the per-rep ratios schema/plain (target >= 0.90), and
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
    plain, schema, ratios = [], [], []
    for rep in range(args.reps):
        a = run(model, args.n_gen, rep, ban, None)
        b = run(model, args.n_gen, rep, ban, SCHEMA)
        plain.append(a)
        schema.append(b)
        ratios.append(b / a)
    us = mask_microseconds(model, args.n_gen)
    print(f"{args.model}, {args.threads} thread(s), tg{args.n_gen}, {args.reps} interleaved reps")
    print(f"  plain   {statistics.median(plain):7.2f} tok/s  ({min(plain):.1f}-{max(plain):.1f})")
    print(f"  schema  {statistics.median(schema):7.2f} tok/s  ({min(schema):.1f}-{max(schema):.1f})")
    print(f"  median ratio schema/plain {statistics.median(ratios):.3f} (target >= 0.90)")
    print(f"  grammar mask + apply: {us:.0f} us/token (llguidance {structured.engine.llguidance().__version__})")


if __name__ == "__main__":
    main()
