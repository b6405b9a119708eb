"""Where a prefill step's time goes: the native backend's per-op timers over pp forwards of N random tokens.

`onewell bench` profiles generated tokens (decode); this does the same for a prompt (chunks of max_batch = 128
tokens), after one untimed forward:
    python benchmarks/prefill_profile.py MODEL [THREADS] [N]     (defaults: 1 thread, 128 tokens)
"""
import sys
from pathlib import Path

import numpy as np

from onewell.bench.runner import split_profile
from onewell.gguf import GGUFReader
from onewell.hub import ensure_model
from onewell.models.registry import load_spec
from onewell.runtime.backend import create_backend

model = sys.argv[1]
t = int(sys.argv[2]) if len(sys.argv) > 2 else 1
n = int(sys.argv[3]) if len(sys.argv) > 3 else 128
spec = load_spec(GGUFReader(Path(ensure_model(model, progress=False))))
be = create_backend("native", spec, n_ctx=n + 16, threads=t)
ids = np.random.default_rng(0).integers(0, spec.config.n_vocab, n)
be.reset(); be.forward(ids)
be.profile = True; be.profile_stats(reset=True)
reps = 3
for _ in range(reps):
    be.reset(); be.forward(ids)
p = split_profile(be.profile_stats(reset=True))
tot = sum(p["ops"].values())
print(f"{model} pp{n} t={t}: {tot/reps/1e6:.1f} ms per forward ({n*reps*1e9/tot:.1f} tok/s timed)")
for op, ns in sorted(p["ops"].items(), key=lambda kv: -kv[1]):
    print(f"  {op:22s} {ns/reps/1e6:8.2f} ms {100*ns/tot:5.1f}%")
