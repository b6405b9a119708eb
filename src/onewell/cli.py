"""`onewell` command line: one subcommand per job, each a small function below.

Engine parts are imported inside the subcommand that needs them, so `onewell pull` or `onewell info`
start fast and never load numpy kernels or the server stack they do not use.
Errors meant for users (`OnewellError`) print one line and exit 1; Ctrl-C exits 130 without a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from onewell import __version__
from onewell.argtypes import positive_int
from onewell.errors import OnewellError

CONVERT_TYPES = ("q8_0", "q4_0", "q6_k", "q4_k_m", "f16", "bf16")   # onewell.quant.convert.TARGETS
SAMPLING_OPTIONS = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "seed")


class FeatureMissingError(OnewellError):
    """A subcommand whose implementing module is not part of this build (yet)."""


def _engine(module: str, attr: str, command: str) -> Any:
    """Import `module.attr` for `command`, turning a missing module into a clear user-facing error."""
    try:
        return getattr(importlib.import_module(module), attr)
    except ModuleNotFoundError as e:
        if e.name and (module == e.name or module.startswith(e.name + ".")):
            raise FeatureMissingError(f"`onewell {command}` needs {module}, which this build of onewell "
                                      f"does not include yet") from None
        if e.name and e.name.split(".")[0] in ("starlette", "uvicorn"):
            raise FeatureMissingError(f"`onewell {command}` needs {e.name}: pip install 'onewell[serve]'") from None
        if e.name and e.name.split(".")[0] == "matplotlib":
            raise FeatureMissingError(f"`onewell {command}` needs matplotlib: pip install 'onewell[bench]'") from None
        raise


# -- argument types: reject bad values at parse time with argparse's usual message --------------------------



def _nonnegative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def _bounded_float(low: float, high: float | None, low_open: bool = False) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        too_low = value <= low if low_open else value < low
        if value != value or too_low or (high is not None and value > high):  # value != value: NaN
            bound = f"{'(' if low_open else '['}{low}, {high if high is not None else 'inf'}{']' if high else ')'}"
            raise argparse.ArgumentTypeError(f"must be in {bound}, got {text}")
        return value

    return parse


def _add_engine_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=positive_int, default=None, help="worker threads (default: physical cores)")
    p.add_argument("--backend", choices=("native", "reference"), default="native",
                   help="native C core (default) or the numpy reference used as the test oracle")
    p.add_argument("--kv-type", choices=("f32", "f16", "q8_0"), default="f16",
                   help="KV cache element type: f16 (default, 2 bytes per value), f32 (4), q8_0 (34 bytes per 32)")


def _add_sampling_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sampling (unset options take the engine's defaults)")
    g.add_argument("--temp", dest="temperature", type=_bounded_float(0.0, None), help="temperature; 0 = greedy")
    g.add_argument("--top-k", type=_nonnegative_int, help="keep the K most likely tokens (0 = off)")
    g.add_argument("--top-p", type=_bounded_float(0.0, 1.0, low_open=True), help="nucleus sampling mass")
    g.add_argument("--min-p", type=_bounded_float(0.0, 1.0), help="drop tokens below MIN_P x the top probability")
    g.add_argument("--repeat-penalty", type=_bounded_float(0.0, None, low_open=True),
                   help="divide logits of recent tokens by this (1 = off)")
    g.add_argument("--seed", type=_nonnegative_int, help="random seed, for repeatable sampling")


def _sampling_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in SAMPLING_OPTIONS if getattr(args, k) is not None}


def _format_stats(stats: dict[str, Any]) -> str:
    def rate(tokens: int, seconds: float) -> str:
        return f"{tokens / seconds:.1f}" if seconds > 0 else "-"

    p, g = int(stats.get("prompt_tokens", 0)), int(stats.get("gen_tokens", 0))
    return (f"[{p} prompt tok, {g} gen tok, {rate(p, float(stats.get('prompt_seconds', 0)))} tok/s prompt, "
            f"{rate(g, float(stats.get('gen_seconds', 0)))} tok/s gen]")


# -- subcommands -------------------------------------------------------------------------------------------

def cmd_pull(args: argparse.Namespace) -> int:
    from onewell.hub import ensure_model

    print(ensure_model(args.name, progress=not args.quiet))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from onewell.hub import default_hub

    hub = default_hub()
    rows = hub.list()
    width = max(len(name) for name, _, _ in rows)
    print(f"{'NAME':<{width}}  CACHED  DESCRIPTION")
    for name, description, cached in rows:
        print(f"{name:<{width}}  {'yes' if cached else '-':<6}  {description}")
    print(f"\ncache: {hub.models_dir}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    load = _engine("onewell.api", "load", "run")
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    constraint = _constraint_options(args)  # a bad schema fails before the model loads
    model = load(args.model, backend=args.backend, threads=args.threads, kv_type=args.kv_type)
    for chunk in model.generate(prompt, max_tokens=args.n, stream=True, chat=args.chat, **constraint,
                                **_sampling_kwargs(args)):
        sys.stdout.write(chunk)
        sys.stdout.flush()
    sys.stdout.write("\n")
    sys.stdout.flush()
    print(_format_stats(model.last_stats), file=sys.stderr)
    return 0


def _constraint_options(args: argparse.Namespace) -> dict[str, Any]:
    """--json-schema FILE / --grammar FILE as generate() keywords, checked now (GrammarError names the problem)."""
    if args.json_schema is None and args.grammar is None:
        return {}
    from onewell import structured

    path = args.json_schema or args.grammar
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise structured.GrammarError(f"cannot read {path}: {e}") from None
    if args.json_schema is not None:
        try:
            return {"grammar": structured.json_schema(text)}
        except structured.GrammarError as e:
            raise structured.GrammarError(f"{path}: {e}") from None
    try:
        return {"grammar": structured.any_grammar(text)}
    except structured.GrammarError as e:
        raise structured.GrammarError(f"{path}: {e}") from None


def cmd_embed(args: argparse.Namespace) -> int:
    import json

    load = _engine("onewell.api", "load", "embed")
    texts = [sys.stdin.read() if t == "-" else t for t in args.texts]
    model = load(args.model, backend=args.backend, threads=args.threads)
    for row in model.embed(texts, dimensions=args.dimensions):
        print(json.dumps([round(float(v), 7) for v in row]))
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    """Terminal chat with history; Ctrl-C stops the current reply, Ctrl-D (or /exit) leaves."""
    load = _engine("onewell.api", "load", "chat")
    chat_loop = _engine("onewell.chat_cli", "chat_loop", "chat")
    model = load(args.model, backend=args.backend, threads=args.threads, kv_type=args.kv_type)
    return chat_loop(model, max_tokens=args.n, system=args.system, sampling=_sampling_kwargs(args))


def _forward(module: str, command: str) -> Callable[[list[str]], int]:
    """Subcommands whose options belong to their own module: `main(argv)` there parses the rest."""

    def run(argv: list[str]) -> int:
        return int(_engine(module, "main", command)(argv) or 0)

    run.__name__ = f"cmd_{command}"
    return run


# Handed their argument list untouched (argparse would reject options it does not know).
FORWARDED: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "serve": (_forward("onewell.serve.app", "serve"), "OpenAI-compatible HTTP server"),
    "bench": (_forward("onewell.bench.bench", "bench"), "tok/s, GB/s and bandwidth utilization per thread count"),
    "bandwidth": (_forward("onewell.bench.bandwidth", "bandwidth"), "measure the machine's memory read bandwidth"),
}


def cmd_quantize(args: argparse.Namespace) -> int:
    from onewell.hub import ensure_model

    src = ensure_model(args.input)
    dst = Path(args.output)
    if dst.exists() and dst.resolve() == src.resolve():
        raise OnewellError(f"output {dst} is the input file; choose another path")
    if dst.parent and not dst.parent.is_dir():
        raise OnewellError(f"output folder {dst.parent} does not exist")
    convert_file = _engine("onewell.quant.convert", "convert_file", "quantize")
    convert_file(src, dst, args.type)
    print(dst)
    return 0


def describe_model(path: Path) -> list[tuple[str, str]]:
    """(label, value) lines about a GGUF file: what `onewell info` prints."""
    from onewell.gguf.constants import FILE_TYPE
    from onewell.gguf.reader import GGUFReader

    with GGUFReader(path) as reader:
        meta = reader.metadata
        file_types = {v: k.upper() for k, v in FILE_TYPE.items()}
        ftype = meta.get("general.file_type")
        type_counts = Counter(t.ggml_type.name for t in reader.tensors.values())
        lines = [
            ("file", f"{path} ({path.stat().st_size / 1e6:.1f} MB, GGUF v{reader.version})"),
            ("name", str(meta.get("general.name", "-"))),
            ("architecture", str(meta.get("general.architecture", "-"))),
            ("file type", file_types.get(ftype, str(ftype)) if ftype is not None else "-"),
            ("tensors", f"{len(reader.tensors)}: "
             + ", ".join(f"{n} {name}" for name, n in sorted(type_counts.items(), key=lambda kv: -kv[1]))),
            ("tokenizer", f"{meta.get('tokenizer.ggml.model', '-')} (pre: {meta.get('tokenizer.ggml.pre', '-')})"),
        ]
        template = meta.get("tokenizer.chat_template")
        lines.append(("chat template", f"yes ({len(template)} chars)" if isinstance(template, str) else "no"))
        load_spec = _engine("onewell.models.registry", "load_spec", "info")
        spec = load_spec(reader)  # unsupported architectures raise here, after the file-level facts
        c = spec.config
        lines += [
            ("vocabulary", f"{c.n_vocab}"),
            ("layers", f"{c.n_layer}"),
            ("embedding", f"{c.n_embd}"),
            ("heads", f"{c.n_head} query, {c.n_head_kv} key/value, head size {c.head_dim}"),
            ("feed-forward", f"{c.n_ff}"),
            ("context", f"{c.n_ctx_train} (trained)"),
            ("rope", f"{c.rope_style}, theta {c.rope_theta:g}"),
        ]
        if c.is_embedding:   # an encoder: vectors out, weights read once per forward step of many inputs
            lines += [
                ("kind", f"embedding model: bidirectional, {c.pooling} pooling, {c.n_embd}-value vectors"),
                ("layernorm eps", f"{c.norm_eps:g}"),
                ("bytes per step", f"{spec.bytes_per_token() / 1e6:.1f} MB of weights read per forward step"),
            ]
        else:
            lines += [
                ("rms eps", f"{c.rms_eps:g}"),
                ("tied embeddings", "yes" if c.tie_embeddings else "no"),
                ("bytes per token", f"{spec.bytes_per_token() / 1e6:.1f} MB of weights read per generated token"),
                ("kv cache", _kv_cache_line(c)),
            ]
    return lines


def _kv_cache_line(config) -> str:
    """KV cache memory per context token for each --kv-type (f16 first: the default)."""
    from onewell.runtime.memory import kv_cache_bytes

    parts = []
    for kv_type in ("f16", "f32", "q8_0"):
        if kv_type == "q8_0" and config.head_dim % 32:
            continue
        per_token = kv_cache_bytes(config, 1, kv_type=kv_type)
        parts.append(f"{kv_type} {per_token / 1024:.1f} KiB/token ({per_token * 4096 / 2**20:.0f} MiB at 4096)")
    return "; ".join(parts)


def cmd_info(args: argparse.Namespace) -> int:
    from onewell.hub import ensure_model

    lines = describe_model(ensure_model(args.model))
    width = max(len(label) for label, _ in lines)
    for label, value in lines:
        print(f"{label:<{width}}  {value}")
    return 0


# -- parser ------------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onewell",
        description="Run LLMs (GGUF) on CPUs at the memory-bandwidth limit, and measure how close you are.")
    parser.add_argument("--version", action="version", version=f"onewell {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("pull", help="download and verify a registry model into the cache")
    p.add_argument("name", help="registry name, e.g. qwen2.5-coder-0.5b-instruct or NAME:q8_0")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=cmd_pull)

    p = sub.add_parser("list", help="known models and whether they are cached")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("run", help="generate text for one prompt, streamed to the terminal")
    p.add_argument("model", help="registry name or path to a .gguf file")
    p.add_argument("prompt", help="the prompt ('-' reads it from stdin)")
    p.add_argument("-n", "--max-tokens", dest="n", type=positive_int, default=128, help="tokens to generate (128)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--chat", dest="chat", action="store_true", default=True,
                      help="wrap the prompt in the model's chat template (default)")
    mode.add_argument("--raw", dest="chat", action="store_false", help="feed the prompt as plain text")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--json-schema", metavar="FILE", help="the reply is JSON matching this JSON Schema file")
    shape.add_argument("--grammar", metavar="FILE", help="the reply matches this Lark or GBNF grammar file")
    _add_sampling_options(p)
    _add_engine_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("embed", help="embedding vectors of texts (an embedding model, e.g. nomic-embed-text-v1.5)")
    p.add_argument("model", help="registry name or path to a .gguf file")
    p.add_argument("texts", nargs="+", metavar="TEXT", help="texts to embed, one vector each ('-' reads stdin)")
    p.add_argument("--dimensions", type=positive_int, default=None,
                   help="keep the first D values and normalize again (Matryoshka)")
    _add_engine_options(p)
    p.set_defaults(func=cmd_embed)

    p = sub.add_parser("chat", help="interactive chat in the terminal")
    p.add_argument("model", help="registry name or path to a .gguf file")
    p.add_argument("-n", "--max-tokens", dest="n", type=positive_int, default=512, help="tokens per reply (512)")
    p.add_argument("--system", help="system message")
    _add_sampling_options(p)
    _add_engine_options(p)
    p.set_defaults(func=cmd_chat)

    for name, (_, text) in FORWARDED.items():  # listed for --help; main() dispatches them before parsing
        sub.add_parser(name, help=f"{text} (options: onewell {name} --help)", add_help=False)

    p = sub.add_parser("quantize", help="convert a GGUF model to another weight format")
    p.add_argument("input", help="registry name or path to a .gguf file")
    p.add_argument("output", help="path of the .gguf file to write")
    p.add_argument("--type", required=True, choices=CONVERT_TYPES, help="target weight format")
    p.set_defaults(func=cmd_quantize)

    p = sub.add_parser("info", help="architecture, hyperparameters, tensor types, bytes per token")
    p.add_argument("model", help="registry name or path to a .gguf file")
    p.set_defaults(func=cmd_info)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in FORWARDED:
        forward = FORWARDED[argv[0]][0]
        run: Callable[[], int] = lambda: forward(argv[1:])  # noqa: E731
    else:
        args = build_parser().parse_args(argv)
        run = lambda: args.func(args)  # noqa: E731
    previous = _exit_on_sigterm()
    try:
        return run()
    except OnewellError as e:
        print(f"onewell: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 128 + signal.SIGINT
    except BrokenPipeError:  # `onewell run ... | head`: the reader left; not an error worth a traceback
        # point stdout at /dev/null so the interpreter's final flush does not complain again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm() -> Any:
    """Turn SIGTERM into SystemExit so cleanup code runs (a killed pull removes its temp files, as on Ctrl-C).
    Returns the previous handler, or None when signals cannot be set here (not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def terminate(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, terminate)
