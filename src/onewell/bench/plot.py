"""`--plot FILE.png`: the bench report as one picture someone who has not read the seed article can follow.

Panels: generation tok/s vs threads (with the bandwidth ceiling, perfect scaling and the Amdahl curve, each
point labelled with its bandwidth utilization), prompt processing tok/s vs threads, and where the time of one
generated token goes, by op. Drawn from the report JSON only (matplotlib, Agg: no display needed).
"""
from __future__ import annotations

import os
import textwrap

COLORS = {"onewell": "#1f6fb4", "llama.cpp": "#d95f02"}
CEILING_COLOR = "#2a9d3a"
IDLE_COLOR = "#8c8c8c"


def _cells(report: dict, engine: str, test: str) -> list[dict]:
    return sorted((r for r in report["results"] if r["engine"] == engine and r["test"] == test),
                  key=lambda r: r["threads"])


def _fit(report: dict, engine: str, test: str) -> dict | None:
    for s in report["scaling"]:
        if s["engine"] == engine and s["test"] == test and s["status"] != "refused" and 0 <= s["p"] <= 1:
            return s
    return None


def _speed_panel(ax, report: dict, kind: str) -> None:
    tests = list(dict.fromkeys(r["test"] for r in report["results"] if r["kind"] == kind))
    threads = sorted({r["threads"] for r in report["results"]})
    x_fit_max = max(max(threads) * 2, 2)
    data, guides = [], []  # legend: measurements first, then the lines that explain them
    y_top = 0.0  # the axis fits the measurements, ceilings and fits; perfect scaling may run off the top
    for test in tests:
        style = "-" if test == tests[0] else "--"
        for engine in ("onewell", "llama.cpp"):
            cells = _cells(report, engine, test)
            if not cells:
                continue
            xs = [c["threads"] for c in cells]
            med = [c["tok_s"]["median"] for c in cells]
            err = [[m - c["tok_s"]["min"] for m, c in zip(med, cells)],
                   [c["tok_s"]["max"] - m for m, c in zip(med, cells)]]
            data.append(ax.errorbar(xs, med, yerr=err, fmt="o" + style, color=COLORS[engine], capsize=4, lw=2,
                                    label=f"{engine} {test} (median; bars: min-max)"))
            y_top = max(y_top, *(c["tok_s"]["max"] for c in cells))
            if engine == "onewell" and kind == "tg":
                for c in cells:
                    if c["utilization"] is not None:
                        ax.annotate(f"{100 * c['utilization']:.0f}% of\nbandwidth",
                                    (c["threads"], c["tok_s"]["median"]), textcoords="offset points",
                                    xytext=(6, -28), fontsize=8, color=COLORS[engine])
            base = next((c for c in cells if c["threads"] == 1), None)
            if base is not None and engine == "onewell" and len(cells) > 1:
                ends = [1, max(xs)]
                guides += ax.plot(ends, [base["tok_s"]["median"] * n for n in ends], ":", color="gray", lw=1.2,
                                  label="perfect scaling (n threads = n x 1-thread speed)")
            fit = _fit(report, engine, test)
            if fit is not None:
                xs_fit = [1 + i * (x_fit_max - 1) / 80 for i in range(81)]
                ys_fit = [cells[0]["n_tokens"] / (fit["t1_s"] * ((1 - fit["p"]) + fit["p"] / n)) for n in xs_fit]
                y_top = max(y_top, max(ys_fit))
                guides += ax.plot(xs_fit, ys_fit, "-.", color=COLORS[engine], alpha=0.55, lw=1.2,
                                  label=f"{engine} Amdahl fit, p = {fit['p']:.2f}"
                                  + (" (2 points: exact, untested)" if fit["status"] == "underdetermined" else ""))
        if kind == "tg":
            ceiling = [c for c in _cells(report, "onewell", test) if c["ceiling_tok_s"] is not None]
            if ceiling:
                y_top = max(y_top, *(c["ceiling_tok_s"] for c in ceiling))
                guides += ax.plot([c["threads"] for c in ceiling], [c["ceiling_tok_s"] for c in ceiling], "s--",
                                  color=CEILING_COLOR, lw=2, label="bandwidth ceiling: max tok/s if every weight "
                                                                   "byte\ncame at the read bandwidth measured here")
    ax.set_xscale("log", base=2)
    ticks = sorted(set(threads) | ({x_fit_max} if _any_fit(report, kind) else set()))
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlim(min(ticks) / 1.3, max(ticks) * 1.3)
    ax.set_ylim(0, y_top * 1.15)
    ax.set_xlabel("threads")
    ax.set_ylabel("tokens per second (higher is better)")
    ax.set_title({"tg": "Generation (tg): one token at a time, memory-bound",
                  "pp": "Prompt processing (pp): all tokens at once, compute-bound"}[kind], fontsize=11)
    ax.grid(True, alpha=0.3)
    # below the axes: inside, it would hide the ceiling or the fastest points whatever the corner
    ax.legend(handles=data + guides, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13))


def _any_fit(report: dict, kind: str) -> bool:
    tests = {(r["engine"], r["test"]) for r in report["results"] if r["kind"] == kind}
    return any(_fit(report, engine, test) is not None for engine, test in tests)


def _profile_panel(ax, report: dict) -> None:
    prof = report["profile"]
    ops = prof["ops"][:12][::-1]  # largest on top
    colors = [IDLE_COLOR if o["op"] == "idle" else COLORS["onewell"] for o in ops]
    ax.barh([o["op"] for o in ops], [o["ms_per_token"] for o in ops], color=colors)
    for i, o in enumerate(ops):
        ax.text(o["ms_per_token"], i, f" {100 * o['share']:.0f}%", va="center", fontsize=8)
    ax.set_xlabel("milliseconds per generated token")
    ax.set_title(f"Where one generated token's time goes ({prof['threads']} thread(s)):\n"
                 f"{prof['timed_ms_per_token']:.2f} ms in timed ops of {prof['wall_ms_per_token']:.2f} ms per token",
                 fontsize=11)
    if any(o["op"] == "idle" for o in ops):
        ax.text(0.98, 0.02, "idle: threads done with their share,\nwaiting at a barrier for the slowest",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=8, color=IDLE_COLOR)
    ax.margins(x=0.15)
    ax.grid(True, axis="x", alpha=0.3)


def write_plot(report: dict, path: str | os.PathLike) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: works without a display and never opens a window
    import matplotlib.pyplot as plt

    kinds = [k for k in ("tg", "pp") if any(r["kind"] == k for r in report["results"])]
    panels = len(kinds) + (report["profile"] is not None)
    fig, axes = plt.subplots(1, panels, figsize=(6.4 * panels, 7.4), squeeze=False, layout="constrained")
    axes = list(axes[0])
    for ax, kind in zip(axes, kinds):
        _speed_panel(ax, report, kind)
    if report["profile"] is not None:
        _profile_panel(axes[-1], report)
    m, model = report["machine"], report["model"]
    noisy = sum(r["noisy"] for r in report["results"])
    fig.suptitle(f"{os.path.basename(model['path'])}: {model['weight_bytes_per_token'] / 1e6:.0f} MB of weights "
                 f"read per generated token\n{m['cpu_model']}, {m['physical_cores']} cores, ISA {m['isa']}, "
                 f"backend {report['settings']['backend']}, {report['settings']['reps']} repetitions"
                 + (f"; {noisy} of {len(report['results'])} results noisy (repetitions disagree by over 10%)"
                    if noisy else ""), fontsize=12)
    note = ("Generating a token reads every weight once, so its speed is capped by memory bandwidth (green): "
            "more threads help only until the shared memory bus is full. The % labels are how much of that "
            "bandwidth onewell achieves. Amdahl fit: p = the fraction of the work that more threads speed up.")
    fig.supxlabel("\n".join(textwrap.wrap(note, 60 * panels)), fontsize=9)
    fig.savefig(path, dpi=110)
    plt.close(fig)
