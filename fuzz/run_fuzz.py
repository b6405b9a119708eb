"""The long GGUF fuzz run: builds the seed corpus, runs the atheris target (fuzz/gguf_target.py) at the
lowest CPU priority with bounds on inputs, time, memory and time per input, and reports the outcomes.

    .venv/bin/python fuzz/run_fuzz.py --runs 100000 --max-seconds 1800
    .venv/bin/python fuzz/run_fuzz.py --runs 300000 --keep-crashes   # crashing inputs go to the test data

Bounds: -timeout=2 (an input running longer than 2 s is a hang: a finding), -rss_limit_mb (libFuzzer
kills the run past it: a finding), an address-space cap of the fuzz process (a runaway allocation fails as
MemoryError: a finding), -max_total_time. The working corpus persists in --workdir between runs.

Prints a JSON summary (inputs, outcomes per exception type, slowest input, findings) and exits 1 on any
finding. Needs `pip install atheris` (a wheel for CPython 3.8-3.11 on x86-64 Linux).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
REGRESSIONS = REPO / "tests" / "data" / "fuzz_regressions"
FINDING_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Fuzz onewell's GGUF loading path with atheris.")
    p.add_argument("--runs", type=int, default=100_000, help="inputs to run (100000)")
    p.add_argument("--max-seconds", type=int, default=3600, help="stop after this long (3600)")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/onewell-fuzz"), help="corpus, findings, stats")
    p.add_argument("--input-timeout", type=int, default=2, help="seconds per input before it counts as a hang (2)")
    p.add_argument("--rss-mb", type=int, default=2048, help="libFuzzer's RSS limit (2048)")
    p.add_argument("--as-mb", type=int, default=4096, help="address-space cap of the fuzz process (4096; 0 = none)")
    p.add_argument("--max-len", type=int, default=128 << 10, help="largest input (131072 bytes)")
    p.add_argument("--seed", type=int, default=0, help="libFuzzer's random seed (0: time-based)")
    p.add_argument("--keep-crashes", action="store_true", help=f"copy findings into {REGRESSIONS}")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.nice(19)  # the machine is shared: fuzzing gets only idle CPU
    sys.path.insert(0, str(REPO))
    from fuzz.seeds import write_corpus

    seeds, corpus, findings = args.workdir / "seeds", args.workdir / "corpus", args.workdir / "findings"
    for d in (corpus, findings):
        d.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(seeds, ignore_errors=True)
    write_corpus(seeds)
    stats_path = args.workdir / "stats.json"
    stats_path.unlink(missing_ok=True)
    before = set(findings.iterdir())

    cmd = [sys.executable, str(HERE / "gguf_target.py"), str(corpus), str(seeds),
           f"-runs={args.runs}", f"-timeout={args.input_timeout}", f"-rss_limit_mb={args.rss_mb}",
           f"-max_total_time={args.max_seconds}", f"-max_len={args.max_len}", f"-seed={args.seed}",
           f"-artifact_prefix={findings}/", "-print_final_stats=1"]
    env = {**os.environ, "ONEWELL_FUZZ_STATS": str(stats_path), "ONEWELL_FUZZ_RUNS": str(args.runs),
           "ONEWELL_FUZZ_AS_MB": str(args.as_mb), "PYTHONPATH": str(REPO)}
    log_path = args.workdir / "libfuzzer.log"
    started = time.monotonic()
    with open(log_path, "w") as log:
        try:
            rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                timeout=args.max_seconds + 120).returncode
        except subprocess.TimeoutExpired:
            rc = -1
    elapsed = time.monotonic() - started

    new = sorted(p for p in set(findings.iterdir()) - before if p.name.startswith(FINDING_PREFIXES))
    stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
    summary = {
        "runs_requested": args.runs,
        "inputs": stats.get("inputs", 0),
        "outcomes": stats.get("outcomes", {}),
        "slowest_input_seconds": stats.get("slowest_input_seconds"),
        "max_rss_mib": stats.get("max_rss_mib"),
        "seconds": round(elapsed, 1),
        "libfuzzer_exit": rc,
        "findings": [str(p) for p in new],
        "corpus_files": len(list(corpus.iterdir())),
        "log": str(log_path),
    }
    if args.keep_crashes:
        REGRESSIONS.mkdir(parents=True, exist_ok=True)
        for p in new:
            shutil.copy(p, REGRESSIONS / f"{p.name}.gguf")
    (args.workdir / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    if new or rc != 0:
        print(f"run_fuzz: findings or a failed run; the end of the log ({log_path}):", file=sys.stderr)
        print("".join(log_path.read_text(errors="replace").splitlines(keepends=True)[-40:]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
