"""How far a prompt's logits computed in one batch are from the same tokens decoded one at a time, for onewell and
for llama.cpp, on the same text and chunks.

No engine promises bit-identical logits between the two: batched matmuls may run other kernels and sum in another
order (onewell's AVX2 Q8_0 float GEMM, perf-log entry 25; llama.cpp's batched kernels). This measures the gap as
llama-perplexity's KL-divergence mode does: the text tokenized once, cut into chunks of CTX tokens, and for each
chunk the distributions at positions CTX/2 .. CTX-2 compared, KL(batched || one at a time), plus how often the two
argmaxes agree. llama.cpp: `llama-perplexity -b CTX -ub CTX --kl-divergence-base F` (each chunk one batch), then
`-b 1 -ub 1 --kl-divergence` (one token per decode call); its base log-probs are stored as 16-bit codes, so its
KL has a small floor, measured by comparing the batched run with itself. onewell: `forward(chunk,
all_logits=True)` against `forward([t])` per token, on the kernel path given (the float GEMM knob as set).

    python benchmarks/batch_vs_token_logits.py qwen2.5-coder-0.5b-instruct:q8_0 --isa avx2 \
        --llama-perplexity "$(benchmarks/llamacpp_build.sh --isa avx2 llama-perplexity)"
"""
from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from onewell._native import _core
from onewell.gguf import GGUFReader
from onewell.hub import ensure_model
from onewell.models.registry import load_spec
from onewell.runtime.logprobs import log_softmax
from onewell.runtime.native import NativeBackend
from onewell.tokenizer import Tokenizer

DEFAULT_TEXT = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def onewell_gap(model_path: str, text: str, ctx: int, chunks: int, isa: str | None, threads: int) -> dict:
    reader = GGUFReader(model_path)
    tokens = Tokenizer.from_metadata(reader.metadata).encode(text)
    spec = load_spec(reader)
    if len(tokens) < ctx * chunks:
        raise SystemExit(f"the text has {len(tokens)} tokens, fewer than {chunks} chunks of {ctx}")
    backend = NativeBackend(spec, n_ctx=ctx, threads=threads, max_batch=ctx, isa=isa)
    first = ctx // 2
    kl, same = [], []
    for c in range(chunks):
        chunk = tokens[c * ctx:(c + 1) * ctx]
        backend.reset()
        batched = np.array(backend.forward(chunk, all_logits=True), copy=True)[first:ctx - 1]
        backend.reset()
        alone = np.stack([np.array(backend.forward([t]), copy=True) for t in chunk])[first:ctx - 1]
        p, q = (np.stack([log_softmax(row) for row in logits]) for logits in (batched, alone))
        kl.extend((np.exp(p) * (p - q)).sum(axis=-1))
        same.extend(batched.argmax(-1) == alone.argmax(-1))
    return summary(np.array(kl), np.array(same), backend.isa)


def summary(kl: np.ndarray, same: np.ndarray, label: str) -> dict:
    return {"engine": label, "positions": int(kl.size), "mean_kld": float(kl.mean()), "max_kld": float(kl.max()),
            "p99_kld": float(np.percentile(kl, 99)), "same_top_pct": float(100 * same.mean())}


def llamacpp_gap(binary: str, model_path: str, text_file: str, ctx: int, chunks: int, threads: int) -> list[dict]:
    """[the batched run against itself (the floor of its 16-bit base), one token per call against batched]"""
    common = [binary, "-m", model_path, "-f", text_file, "-c", str(ctx), "--chunks", str(chunks), "-t", str(threads)]
    with tempfile.TemporaryDirectory() as tmp:
        base = str(Path(tmp) / "base.kld")
        _run(common + ["-b", str(ctx), "-ub", str(ctx), "--kl-divergence-base", base])
        out = []
        for label, batch in (("llama.cpp batched vs itself", ctx), ("llama.cpp", 1)):
            log = _run(common + ["-b", str(batch), "-ub", str(batch), "--kl-divergence-base", base, "--kl-divergence"])
            out.append(_parse_kld(log, label))
    return out


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout + proc.stderr


def _parse_kld(log: str, label: str) -> dict:
    def number(pattern: str) -> float:
        m = re.search(pattern, log)
        if not m:
            raise SystemExit(f"no {pattern!r} in llama-perplexity's output:\n{log[-3000:]}")
        return float(m.group(1))
    return {"engine": label, "positions": None, "mean_kld": number(r"Mean\s+KLD:\s+(-?[\d.e+-]+)"),
            "max_kld": number(r"Maximum KLD:\s+(-?[\d.e+-]+)"), "p99_kld": number(r"99\.0%\s+KLD:\s+(-?[\d.e+-]+)"),
            "same_top_pct": number(r"Same top p:\s+([\d.]+)")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--text", type=Path, default=DEFAULT_TEXT)
    ap.add_argument("--ctx", type=int, default=128, help="tokens per chunk (one batch)")
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--isa", help="onewell's kernel path (default: this CPU's)")
    ap.add_argument("--float-gemm", type=int, choices=(0, 1), help="_core.float_gemm for onewell (default: the CPU's)")
    ap.add_argument("--llama-perplexity", help="llama-perplexity to measure llama.cpp's gap too")
    args = ap.parse_args()
    path = str(ensure_model(args.model))
    if args.float_gemm is not None:
        _core.float_gemm(args.float_gemm)
    rows = [onewell_gap(path, args.text.read_text(), args.ctx, args.chunks, args.isa, args.threads)]
    rows[0]["engine"] = f"onewell {rows[0]['engine']}" + ("" if args.float_gemm is None
                                                          else f" (float_gemm {args.float_gemm})")
    if args.llama_perplexity:
        rows += llamacpp_gap(args.llama_perplexity, path, str(args.text), args.ctx, args.chunks, args.threads)
    print(f"{args.model}, {args.text.name}, {args.chunks} chunks of {args.ctx} tokens, positions {args.ctx // 2}.."
          f"{args.ctx - 2} of each: KL(batched || one token at a time)")
    print("| engine | mean KLD | 99% KLD | max KLD | same top-1 % |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['engine']} | {r['mean_kld']:.6f} | {r['p99_kld']:.6f} | {r['max_kld']:.6f} | "
              f"{r['same_top_pct']:.2f} |")


if __name__ == "__main__":
    main()
