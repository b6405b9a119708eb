"""The `onewell` command: parsing, exit codes, clean errors, and the contracts with the engine modules.

Engine modules (`onewell.api`, `onewell.quant.convert`, the bench/serve mains) are replaced by fakes that
record how the CLI calls them, so these tests pin the CLI's side of each contract without running a model.
"""
import subprocess
import sys
import types
from pathlib import Path

import pytest

from onewell.cli import main
from onewell.errors import OnewellError, UnsupportedError


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onewell", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def fake_module(monkeypatch, name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    monkeypatch.setitem(sys.modules, name, module)
    return module


class FakeModel:
    def __init__(self, fail_with: BaseException | None = None):
        self.calls: list[tuple] = []
        self.fail_with = fail_with
        self.last_stats = {"prompt_tokens": 12, "gen_tokens": 3, "prompt_seconds": 0.5, "gen_seconds": 0.25}
        self.n_ctx = 4096

    def tokenize_chat(self, messages):
        return [0] * sum(len(m["content"]) for m in messages)

    def generate(self, prompt, **kwargs):
        self.calls.append(("generate", prompt, kwargs))
        yield "Hel"
        if self.fail_with:
            raise self.fail_with
        yield "lo"
        yield "!"

    def chat(self, messages, **kwargs):
        self.calls.append(("chat", [dict(m) for m in messages], kwargs))
        yield f"reply{len(self.calls)}"


@pytest.fixture
def fake_api(monkeypatch):
    state = {"model": FakeModel(), "load_calls": []}

    def load(model, backend, threads, kv_type):
        state["load_calls"].append((model, backend, threads, kv_type))
        return state["model"]

    fake_module(monkeypatch, "onewell.api", load=load)
    return state


def test_help_lists_every_subcommand():
    result = run_cli("--help")
    assert result.returncode == 0, result.stderr
    for command in ("pull", "list", "run", "chat", "serve", "bench", "bandwidth", "quantize", "info"):
        assert f"\n    {command}" in result.stdout


def test_pull_unknown_name_fails_cleanly():
    result = run_cli("pull", "no-such-model")
    assert result.returncode == 1
    assert "unknown model 'no-such-model'" in result.stderr
    assert "qwen2.5-coder-0.5b-instruct" in result.stderr  # tells what would have worked
    assert "Traceback" not in result.stderr


def test_quantize_bad_type_fails_cleanly(tmp_path):
    result = run_cli("quantize", "in.gguf", str(tmp_path / "out.gguf"), "--type", "q3_k")
    assert result.returncode == 2
    assert "invalid choice: 'q3_k'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out.gguf").exists()


@pytest.mark.parametrize("args", [["--threads", "0"], ["--top-p", "1.5"], ["--temp", "nan"], ["-n", "-3"],
                                  ["--seed", "x"], ["--kv-type", "q4_0"]])
def test_bad_run_options_are_usage_errors(args, fake_api, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "m", "p", *args])
    assert exit_info.value.code == 2
    assert "error: argument" in capsys.readouterr().err
    assert fake_api["load_calls"] == []


def test_run_streams_and_reports_speed(fake_api, capsys):
    code = main(["run", "some-model", "Say hi", "-n", "3", "--temp", "0.5", "--seed", "7", "--threads", "2"])
    out, err = capsys.readouterr()
    assert code == 0
    assert out == "Hello!\n"
    assert "[12 prompt tok, 3 gen tok, 24.0 tok/s prompt, 12.0 tok/s gen]" in err
    assert fake_api["load_calls"] == [("some-model", "native", 2, "f16")]   # f16: the default KV cache
    (kind, prompt, kwargs), = fake_api["model"].calls
    # only the sampling options the user gave are passed: the engine owns the defaults
    assert (kind, prompt) == ("generate", "Say hi")
    assert kwargs == {"max_tokens": 3, "stream": True, "chat": True, "temperature": 0.5, "seed": 7}


def test_run_raw_mode_and_reference_backend(fake_api, capsys):
    assert main(["run", "m", "p", "--raw", "--backend", "reference", "--top-k", "40", "--kv-type", "q8_0"]) == 0
    assert fake_api["load_calls"] == [("m", "reference", None, "q8_0")]
    kwargs = fake_api["model"].calls[0][2]
    assert kwargs["chat"] is False and kwargs["top_k"] == 40 and kwargs["max_tokens"] == 128


def test_engine_error_is_one_line_and_exit_1(fake_api, capsys):
    fake_api["model"] = FakeModel(fail_with=UnsupportedError("architecture 'mamba' is not supported"))
    assert main(["run", "m", "p"]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == "onewell: error: architecture 'mamba' is not supported"
    assert "Traceback" not in err


def test_ctrl_c_exits_130_quietly(fake_api, capsys):
    fake_api["model"] = FakeModel(fail_with=KeyboardInterrupt())
    assert main(["run", "m", "p"]) == 130
    assert "Traceback" not in capsys.readouterr().err


def test_sigterm_unwinds_like_ctrl_c(fake_api):
    """A terminated command runs its cleanup (a pull removes its temp files) and exits 143."""
    import os
    import signal

    fake_api["model"] = FakeModel(fail_with=None)
    cleaned = []

    def generate(prompt, **kwargs):
        try:
            yield "x"
            os.kill(os.getpid(), signal.SIGTERM)
            yield "never"
        finally:
            cleaned.append(True)

    fake_api["model"].generate = generate
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "m", "p"])
    assert exit_info.value.code == 143 and cleaned == [True]
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is only ours while a command runs


def test_missing_engine_module_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onewell.api", None)  # as if the module did not exist
    assert main(["run", "m", "p"]) == 1
    assert "`onewell run` needs onewell.api" in capsys.readouterr().err


def test_forwarded_commands_get_their_arguments_untouched(monkeypatch):
    seen = []
    fake_module(monkeypatch, "onewell.bench.bandwidth", main=lambda argv: seen.append(argv) or 3)
    assert main(["bandwidth", "--threads", "1,2", "--json"]) == 3
    assert seen == [["--threads", "1,2", "--json"]]


def test_quantize_calls_the_converter(monkeypatch, tmp_path, capsys):
    calls = []
    fake_module(monkeypatch, "onewell.quant.convert", convert_file=lambda s, d, t: calls.append((s, d, t)))
    src = tmp_path / "in.gguf"
    src.write_bytes(b"GGUF")
    assert main(["quantize", str(src), str(tmp_path / "out.gguf"), "--type", "q8_0"]) == 0
    assert calls == [(src, tmp_path / "out.gguf", "q8_0")]
    # writing over the input is refused before the converter runs
    assert main(["quantize", str(src), str(src), "--type", "f16"]) == 1
    assert "is the input file" in capsys.readouterr().err
    assert len(calls) == 1


def test_chat_keeps_history_and_resets(fake_api, monkeypatch, capsys):
    lines = iter(["hello", "/reset", "again", "more"])

    def fake_input(prompt=""):
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    monkeypatch.setattr("builtins.input", fake_input)
    assert main(["chat", "m", "--system", "be brief"]) == 0
    calls = fake_api["model"].calls
    assert [c[1] for c in calls] == [
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}],
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "again"}],
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "again"},
         {"role": "assistant", "content": "reply2"}, {"role": "user", "content": "more"}],
    ]
    assert "reply1\nreply2\nreply3\n" == capsys.readouterr().out


def test_list_shows_cache_state(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ONEWELL_HOME", str(tmp_path))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "smollm2-135m-instruct-q4_1.gguf").write_bytes(b"x")
    assert main(["list"]) == 0
    rows = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()[1:] if line.strip()
            and not line.startswith("cache:")}
    assert rows["smollm2-135m-instruct"] == "yes"
    assert rows["qwen2.5-coder-0.5b-instruct"] == "-"


def test_onewell_error_is_the_base_of_cli_errors():
    from onewell.cli import FeatureMissingError

    assert issubclass(FeatureMissingError, OnewellError)


@pytest.mark.model
def test_info_describes_smollm(smollm_path):
    result = run_cli("info", str(smollm_path))
    assert result.returncode == 0, result.stderr
    fields = dict(line.split(None, 1) if "  " not in line else [s.strip() for s in line.split("  ", 1)]
                  for line in result.stdout.splitlines())
    assert fields["architecture"] == "llama"
    assert fields["tensors"].startswith("272:") and "Q4_1" in fields["tensors"]
    assert fields["chat template"].startswith("yes")
    assert fields["tied embeddings"] == "yes"
    # SmolLM2 reads ~96.6 MB per token (anchors.md); info computes it from the tensors
    assert fields["bytes per token"].startswith("96.6 MB")
    # 30 layers x K and V x 3 kv heads x 64 values: 11,520 values per token
    assert fields["kv cache"] == ("f16 22.5 KiB/token (90 MiB at 4096); f32 45.0 KiB/token (180 MiB at 4096); "
                                  "q8_0 12.0 KiB/token (48 MiB at 4096)")


def test_info_on_a_non_gguf_file_is_a_clean_error(tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a model at all, just some text padding")
    result = run_cli("info", str(bogus))
    assert result.returncode == 1
    assert "bogus.gguf" in result.stderr and "magic" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.model
def test_embed_prints_one_normalized_vector_per_text(nomic_embed_path):
    import json

    import numpy as np

    result = run_cli("embed", str(nomic_embed_path), "search_query: hello", "clustering: world",
                     "--dimensions", "32", "--threads", "1")
    assert result.returncode == 0, result.stderr
    vectors = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(vectors) == 2 and all(len(v) == 32 for v in vectors)
    assert all(abs(np.linalg.norm(v) - 1) < 1e-5 for v in vectors)


@pytest.mark.model
def test_embed_on_a_generative_model_and_run_on_an_embedding_model_fail_cleanly(smollm_path, nomic_embed_path):
    result = run_cli("embed", str(smollm_path), "hello", "--threads", "1")
    assert result.returncode == 1 and "generative model" in result.stderr and "Traceback" not in result.stderr
    result = run_cli("run", str(nomic_embed_path), "hello", "--threads", "1")
    assert result.returncode == 1 and "embedding model" in result.stderr and "Traceback" not in result.stderr
