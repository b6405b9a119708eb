"""Long run of the bindings fuzz (fuzz/bindings_harness.py): random calls of every `_core` function that takes
sizes, with extreme integers and buffer lengths. Under the sanitizer build:

    bash scripts/sanitize.sh tests/test_bindings_sizes.py          # the in-suite part, sanitized
    .venv/bin/python fuzz/run_bindings_fuzz.py --calls 100000 [--seed 1]

Prints a histogram of outcomes per function; exit status 1 if any call raised something else than
ValueError, TypeError or OverflowError (a crash ends the process: the sanitizer's report says where).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.bindings_harness import CALLS, call, random_ints  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    names = sorted(CALLS)
    outcomes: dict[str, dict[str, int]] = {name: {} for name in names}
    findings = []
    started = time.monotonic()
    for i in range(args.calls):
        name = names[i % len(names)]
        ints = random_ints(rng, CALLS[name][0])
        try:
            result = call(name, ints)
        except Exception as e:  # anything but the allowed exceptions is a finding
            result = f"FINDING {type(e).__name__}"
            findings.append({"function": name, "ints": ints, "error": repr(e)})
        outcomes[name][result] = outcomes[name].get(result, 0) + 1
    print(json.dumps({"calls": args.calls, "seconds": round(time.monotonic() - started, 1),
                      "findings": findings[:20], "outcomes": outcomes}, indent=1))
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
