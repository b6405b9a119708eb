"""Coverage-guided fuzz target (atheris / libFuzzer) for loading GGUF model files. Start it through
fuzz/run_fuzz.py, which builds the seed corpus and sets the bounds; by hand:

    python fuzz/gguf_target.py CORPUS_DIR SEED_DIR -runs=100000 -timeout=2 -rss_limit_mb=2048

Every onewell module is instrumented for coverage (Python code; the C core is exercised but not
instrumented). Inputs are mutated half by libFuzzer, half by fuzz/mutate.py's GGUF-aware mutations.
An exception other than an OnewellError is a finding: atheris prints it and libFuzzer saves the input.

Environment: ONEWELL_FUZZ_STATS (a JSON file the outcome counts are written to, every few seconds and at
the last input), ONEWELL_FUZZ_RUNS (the input count at which to write the final stats), ONEWELL_FUZZ_AS_MB
(address-space cap of this process, MiB; 0 = none).
"""
from __future__ import annotations

import json
import os
import random
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

with atheris.instrument_imports(include=["onewell", "fuzz.gguf_harness"]):
    from fuzz.gguf_harness import run_one  # first import of onewell: every module of it is instrumented

from fuzz.mutate import mutate  # noqa: E402  (after the block: the mutator's branches are not coverage)

STATS_PATH = os.environ.get("ONEWELL_FUZZ_STATS")
FINAL_RUN = int(os.environ.get("ONEWELL_FUZZ_RUNS", "0"))
STATS_EVERY_SECONDS = 5.0


class _State:
    scratch = Path(tempfile.mkdtemp(prefix="onewell-fuzz-")) / "input.gguf"
    outcomes: Counter = Counter()
    runs = 0
    slowest = 0.0
    started = time.monotonic()
    written = 0.0
    partners: list[bytes] = []


def write_stats() -> None:
    if not STATS_PATH:
        return
    stats = {"inputs": _State.runs, "outcomes": dict(_State.outcomes.most_common()),
             "slowest_input_seconds": round(_State.slowest, 4),
             "elapsed_seconds": round(time.monotonic() - _State.started, 1),
             "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}
    tmp = STATS_PATH + ".tmp"
    with open(tmp, "w") as f:
        json.dump(stats, f, indent=1)
    os.replace(tmp, STATS_PATH)
    _State.written = time.monotonic()


def test_one_input(data: bytes) -> None:
    started = time.perf_counter()
    try:
        outcome = run_one(data, _State.scratch)  # anything but an OnewellError propagates: a finding
    except BaseException as e:
        _State.runs += 1
        _State.outcomes[f"FINDING {type(e).__name__}"] += 1
        write_stats()  # the fuzzer stops here: keep the counts up to this input
        raise
    _State.slowest = max(_State.slowest, time.perf_counter() - started)
    _State.outcomes[outcome] += 1
    _State.runs += 1
    if _State.runs == FINAL_RUN or time.monotonic() - _State.written > STATS_EVERY_SECONDS:
        write_stats()


def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    if rng.random() < 0.5:
        return atheris.Mutate(data, max_size)
    return mutate(data, rng, _State.partners, max_size)


def load_partners(argv: list[str]) -> None:
    """Seed files (from the corpus directories on the command line) serve as splice partners."""
    for arg in argv[1:]:
        if not arg.startswith("-") and os.path.isdir(arg):
            for p in sorted(Path(arg).glob("seed_*"))[:16]:
                _State.partners.append(p.read_bytes())


def main() -> None:
    cap_mib = int(os.environ.get("ONEWELL_FUZZ_AS_MB", "0"))
    if cap_mib:
        # A runaway allocation becomes a MemoryError (a finding) instead of swapping the machine.
        resource.setrlimit(resource.RLIMIT_AS, (cap_mib << 20, cap_mib << 20))
    load_partners(sys.argv)
    atheris.Setup(sys.argv, test_one_input, custom_mutator=custom_mutator)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
