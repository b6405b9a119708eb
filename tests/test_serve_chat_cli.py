"""`onewell chat`: the terminal loop with scripted input (Ctrl-C simulated by raising KeyboardInterrupt where
the terminal would), on SmolLM2 with the reference backend; history trimming with a stand-in model."""
from __future__ import annotations

import io

import pytest

import onewell
from onewell.chat_cli import chat_loop, fit_history
from onewell.errors import ContextOverflowError
from onewell.tokenizer import MissingChatTemplateError


class Script:
    """Plays the lines of a user; an exception instance in the list is raised instead (Ctrl-C, Ctrl-D)."""

    def __init__(self, *lines):
        self.lines = list(lines)
        self.prompts = 0

    def __call__(self, prompt: str) -> str:
        self.prompts += 1
        item = self.lines.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item


class InterruptingOutput(io.StringIO):
    """Raises KeyboardInterrupt on the n-th chunk of reply text, as Ctrl-C during a reply would."""

    def __init__(self, at_chunk: int):
        super().__init__()
        self.at_chunk, self.chunks = at_chunk, 0

    def write(self, text: str) -> int:
        if text != "\n":
            self.chunks += 1
            if self.chunks == self.at_chunk:
                raise KeyboardInterrupt
        return super().write(text)


@pytest.fixture(scope="module")
def model(smollm_path):
    return onewell.load(smollm_path, backend="reference", n_ctx=512)


@pytest.mark.model
def test_two_turns_reuse_the_cache_and_eof_leaves(model):
    out, err = io.StringIO(), io.StringIO()
    script = Script("Hi! My name is Ada.", "What is my name?", EOFError())
    assert chat_loop(model, max_tokens=6, sampling={"temperature": 0}, read_line=script, out=out, err=err) == 0
    assert script.prompts == 3 and not script.lines
    assert len([line for line in out.getvalue().splitlines() if line.strip()]) == 2  # two replies
    # the second turn re-sent the first, which the KV cache still held
    assert model.last_stats.cached_tokens > len(model.tokenize_chat([{"role": "user", "content": "Hi! My name is Ada."}]))
    assert err.getvalue().count(" gen tok,") == 2  # a stats line per reply


@pytest.mark.model
def test_ctrl_c_stops_the_reply_but_not_the_chat(model):
    out, err = InterruptingOutput(at_chunk=2), io.StringIO()
    script = Script("Tell me a story.", "/reset", "Hello", KeyboardInterrupt())
    assert chat_loop(model, max_tokens=12, sampling={"temperature": 0}, read_line=script, out=out, err=err) == 0
    assert "[stopped]" in err.getvalue() and "(conversation cleared)" in err.getvalue()
    assert script.prompts == 4  # it went on after the stopped reply; Ctrl-C at the prompt left
    # after /reset the prompt holds only the new message
    assert model.last_stats.prompt_tokens == len(model.tokenize_chat([{"role": "user", "content": "Hello"}]))
    # and the model still generates normally after an interrupted reply
    assert model.chat([{"role": "user", "content": "Hello"}], max_tokens=3, temperature=0)


class FakeChatModel:
    """tokenize_chat counts 10 tokens per message."""

    def __init__(self, n_ctx: int, template: bool = True):
        self.n_ctx, self.template = n_ctx, template

    def tokenize_chat(self, messages):
        if not self.template:
            raise MissingChatTemplateError("this model has no chat template")
        return [0] * (10 * len(messages))


def test_fit_history_drops_the_oldest_turns_but_keeps_the_system_message():
    history = [{"role": "system", "content": "s"}] + [{"role": r, "content": str(i)}
                                                     for i, r in enumerate(["user", "assistant"] * 3)]
    assert fit_history(FakeChatModel(n_ctx=60), history, keep=1, max_tokens=20) == 3
    assert history[0]["role"] == "system" and len(history) == 4 and history[-1]["content"] == "5"
    with pytest.raises(ContextOverflowError):
        fit_history(FakeChatModel(n_ctx=25), history, keep=1, max_tokens=20)


def test_missing_chat_template_fails_before_the_first_prompt():
    script = Script("hi")
    with pytest.raises(MissingChatTemplateError):
        chat_loop(FakeChatModel(100, template=False), read_line=script, out=io.StringIO(), err=io.StringIO())
    assert script.prompts == 0
