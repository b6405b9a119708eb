"""`onewell chat MODEL`: an interactive chat in the terminal.

The conversation is kept and sent whole every turn; the model's KV cache still holds the earlier turns,
so only the new one is evaluated. When the history outgrows the context, the oldest turns are dropped
(the system message stays).

Keys: Ctrl-C while a reply streams stops that reply and returns to the prompt; Ctrl-C at the prompt, or
Ctrl-D (EOF), or /exit leaves. /reset forgets the conversation.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, TextIO

from onewell.argtypes import positive_int
from onewell.errors import ContextOverflowError, OnewellError

HELP = "onewell chat: /reset forgets the conversation; Ctrl-C stops a reply; Ctrl-C at the prompt, Ctrl-D or /exit leaves."


def chat_loop(model: Any, *, max_tokens: int = 512, system: str | None = None, sampling: dict | None = None,
              read_line: Callable[[str], str] | None = None, out: TextIO | None = None,
              err: TextIO | None = None) -> int:
    """Runs until the user leaves; returns the exit status (0). `read_line` is input() (looked up at call time,
    so a patched builtins.input is seen) unless a test scripts it."""
    read_line = read_line or input
    out = out or sys.stdout
    err = err or sys.stderr
    sampling = dict(sampling or {})
    model.tokenize_chat([{"role": "user", "content": "hi"}])  # no chat template: fail before the first prompt
    opening = [{"role": "system", "content": system}] if system else []
    history: list[dict[str, str]] = list(opening)
    print(HELP, file=err)
    while True:
        try:
            line = read_line("> ")
        except (EOFError, KeyboardInterrupt):
            print(file=err)
            return 0
        text = line.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            return 0
        if text == "/reset":
            history = list(opening)
            print("(conversation cleared)", file=err)
            continue
        history.append({"role": "user", "content": text})
        try:
            dropped = fit_history(model, history, len(opening), max_tokens)
        except ContextOverflowError as e:
            history.pop()
            print(f"error: {e}", file=err)
            continue
        if dropped:
            print(f"(dropped the {dropped} oldest message(s) to fit the context)", file=err)
        reply = stream_reply(model, history, max_tokens, sampling, out, err)
        history.append({"role": "assistant", "content": reply})


def stream_reply(model: Any, history: list[dict], max_tokens: int, sampling: dict, out: TextIO, err: TextIO) -> str:
    """Prints the reply as it comes; Ctrl-C ends it early. Returns the text shown."""
    parts: list[str] = []
    chunks = model.chat(history, max_tokens=max_tokens, stream=True, **sampling)
    try:
        for chunk in chunks:
            parts.append(chunk)
            out.write(chunk)
            out.flush()
    except KeyboardInterrupt:
        print(" [stopped]", file=err, end="")
    finally:
        chunks.close()  # the generator may be suspended mid-reply; closing keeps the model's cache consistent
    out.write("\n")
    out.flush()
    print(format_stats(model.last_stats), file=err)
    return "".join(parts)


def fit_history(model: Any, history: list[dict], keep: int, max_tokens: int) -> int:
    """Drops the oldest messages after the first `keep` until prompt + max_tokens fits the context.
    Returns how many were dropped; ContextOverflowError if even the last message alone does not fit."""
    dropped = 0
    while True:
        n_prompt = len(model.tokenize_chat(history))
        if n_prompt + max_tokens <= model.n_ctx:
            return dropped
        if len(history) - keep <= 1:
            raise ContextOverflowError(
                f"this message ({n_prompt} tokens with the template) + max_tokens ({max_tokens}) does not fit "
                f"the context of {model.n_ctx} tokens; send something shorter or lower --max-tokens")
        del history[keep]
        dropped += 1


def format_stats(stats: Any) -> str:
    """GenerationStats (or a dict of its fields) as one line."""
    prompt, cached, gen = (int(stats.get(k, 0) or 0) for k in ("prompt_tokens", "cached_tokens", "gen_tokens"))
    prompt_s, gen_s = (float(stats.get(k, 0.0) or 0.0) for k in ("prompt_seconds", "gen_seconds"))

    def rate(n: int, seconds: float) -> str:
        return f"{n / seconds:.1f}" if seconds > 0 else "-"

    return (f"[{prompt} prompt tok ({cached} cached, {rate(prompt - cached, prompt_s)} tok/s for the "
            f"{prompt - cached} new), {gen} gen tok, {rate(gen, gen_s)} tok/s]")


# ----------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="onewell chat", description="Interactive chat in the terminal.")
    p.add_argument("model", help="registry name or path to a .gguf file")
    p.add_argument("-n", "--max-tokens", dest="n", type=positive_int, default=512, help="tokens per reply (512)")
    p.add_argument("--system", help="system message")
    p.add_argument("--ctx-size", "-c", type=positive_int, default=4096, help="context tokens (4096)")
    p.add_argument("--threads", type=positive_int, default=None, help="worker threads of the native backend")
    p.add_argument("--backend", choices=("native", "reference"), default="native")
    g = p.add_argument_group("sampling (unset options take the engine's defaults)")
    g.add_argument("--temp", dest="temperature", type=float)
    g.add_argument("--top-k", type=int)
    g.add_argument("--top-p", type=float)
    g.add_argument("--min-p", type=float)
    g.add_argument("--repeat-penalty", type=float)
    g.add_argument("--seed", type=int)
    return p


def main(argv: list[str] | None = None) -> int:
    import onewell

    args = build_parser().parse_args(argv)
    sampling = {k: getattr(args, k) for k in ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "seed")
                if getattr(args, k) is not None}
    try:
        from onewell.runtime.sampling import SamplingParams

        SamplingParams(**sampling)  # bad values: one clear line now, not a traceback at the first reply
    except ValueError as e:
        raise OnewellError(str(e)) from None
    model = onewell.load(args.model, backend=args.backend, threads=args.threads, n_ctx=args.ctx_size)
    return chat_loop(model, max_tokens=args.n, system=args.system, sampling=sampling)
