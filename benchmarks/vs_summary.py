"""One table from many `onewell bench --vs llama.cpp=... --json` files: per model, kernel path, test and thread
count, both engines' tok/s and the median of the interleaved pair ratios (onewell / llama.cpp), checked against
targets if given.

    python benchmarks/vs_summary.py bench-results/new-cpu-*/ \
        --target tg32=1.3/avx2 --target pp128=1.3@qwen/avx2 --target tg32@d4096=1.3:2

A target is TEST=RATIO, optionally @MODEL (a substring of the model's file name), :THREADS and /PATH (onewell's
kernel path: avx2, avx2-vnni, avx512, generic); a row it covers passes when its median pair ratio reaches RATIO. Exit status 1 when a covered row falls short, so a script can
tell; 0 otherwise (also when no target is given). `--targets FILE` reads more, one per line (`#` starts a
comment): e.g. benchmarks/targets/, the ratios docs/perf-log.md last recorded on a machine, as floors.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Target:
    test: str
    ratio: float
    model: str | None = None
    threads: int | None = None
    path: str | None = None

    @classmethod
    def parse(cls, text: str) -> "Target":
        m = re.fullmatch(r"([\w.@]+?)=([\d.]+)(?:@([^:/]+))?(?::(\d+))?(?:/([\w-]+))?", text)
        if not m:
            raise argparse.ArgumentTypeError(f"target {text!r}: expected TEST=RATIO[@MODEL][:THREADS][/PATH]")
        return cls(m.group(1), float(m.group(2)), m.group(3), int(m.group(4)) if m.group(4) else None, m.group(5))

    def covers(self, row: dict) -> bool:
        return (row["test"] == self.test and (self.model is None or self.model.lower() in row["model"].lower())
                and (self.threads is None or self.threads == row["threads"])
                and (self.path is None or self.path == row["path"]))


def rows_of(path: Path) -> list[dict]:
    report = json.loads(path.read_text())
    m, s = report["machine"], report["settings"]
    path_name = m.get("kernel_path") or "?"
    binary = (report.get("llamacpp") or {}).get("binary") or ""
    out = []
    for c in report["comparison"]:
        pairs = c["pair_ratios"]
        out.append({"model": Path(report["model"]["path"]).name, "path": path_name,
                    "llama": Path(binary).parent.parent.name if binary else "?", "kv": s.get("kv_type", "?"),
                    "test": c["test"], "threads": c["threads"], "onewell": c["onewell_tok_s"],
                    "llamacpp": c["llamacpp_tok_s"], "median_pair": statistics.median(pairs) if pairs else c["ratio"],
                    "pair_min": min(pairs, default=c["ratio"]), "pair_max": max(pairs, default=c["ratio"]),
                    "cpu": m.get("cpu_model", "?"), "file": str(path)})
    return out


def collect(paths: list[Path]) -> list[dict]:
    files = []
    for p in paths:
        files += sorted(p.rglob("*.json")) if p.is_dir() else [p]
    rows = []
    for f in files:
        try:
            rows += rows_of(f)
        except (KeyError, ValueError, TypeError) as e:   # not a bench report (or an older schema): say so, go on
            print(f"vs_summary: skipping {f}: {type(e).__name__}: {e}", file=sys.stderr)
    return rows


def table(rows: list[dict], targets: list[Target]) -> tuple[str, int]:
    lines = ["| model | path | llama.cpp build | KV | test | threads | onewell tok/s | llama.cpp tok/s "
             "| median pair ratio [min-max] | target |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    short = 0
    for r in sorted(rows, key=lambda r: (r["model"], r["path"], r["kv"], r["test"], r["threads"])):
        covering = [t for t in targets if t.covers(r)]
        verdict = ""
        if covering:
            need = max(t.ratio for t in covering)
            ok = r["median_pair"] >= need
            short += not ok
            verdict = f"{'met' if ok else '**short**'} ({need:g})"
        lines.append(f"| {r['model']} | {r['path']} | {r['llama']} | {r['kv']} | {r['test']} | {r['threads']} "
                     f"| {r['onewell']:.1f} | {r['llamacpp']:.1f} | **{r['median_pair']:.2f}** "
                     f"[{r['pair_min']:.2f}-{r['pair_max']:.2f}] | {verdict} |")
    return "\n".join(lines), short


def targets_in(path: Path) -> list[Target]:
    """The targets of a file: one per line, blank lines and `#` comments skipped; a bad line names its number"""
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if text:
            try:
                out.append(Target.parse(text))
            except argparse.ArgumentTypeError as e:
                raise SystemExit(f"vs_summary: {path}:{n}: {e}") from None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path, help="bench JSON files or folders of them")
    ap.add_argument("--target", action="append", type=Target.parse, default=[])
    ap.add_argument("--targets", action="append", type=Path, default=[], metavar="FILE",
                    help="a file of targets, one per line (# comments)")
    args = ap.parse_args(argv)
    for f in args.targets:
        args.target += targets_in(f)
    rows = collect(args.paths)
    if not rows:
        print("vs_summary: no comparisons found (bench JSON from runs with --vs llama.cpp=...)", file=sys.stderr)
        return 2
    cpus = sorted({r["cpu"] for r in rows})
    text, short = table(rows, args.target)
    print(f"CPU: {', '.join(cpus)}\n\n{text}")
    if args.target:
        print(f"\n{short} row(s) short of their target" if short else "\nevery targeted row met its target")
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
