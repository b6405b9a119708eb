"""The web chat page in a real headless browser: Debian's chromium driven by Playwright.

Needs `apt-get install chromium` and `pip install playwright` (no browser download: Playwright is pointed
at /usr/bin/chromium). Without them this test fails; it does not skip, so a missing browser is noticed."""
from __future__ import annotations

import re
import time

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

import onewell
from onewell.api import Model
from onewell.serve.app import create_app
from onewell.serve.background import BackgroundServer
from onewell.serve.slot_backends import new_sequence_backend

pytestmark = pytest.mark.model

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
QUESTION = "Name one color of the rainbow."

expect.set_options(timeout=60_000)  # the machine may be busy: wait for the reply, do not race it


@pytest.fixture(scope="module")
def model(smollm_path) -> Model:
    return onewell.load(smollm_path, backend="native", threads=1, n_ctx=1024)


@pytest.fixture(scope="module")
def server(model):
    with BackgroundServer(create_app(model, parallel=1, queue=2, model_name="smol-web")) as s:
        yield s


@pytest.fixture(scope="module")
def page():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            page = browser.new_page()
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()


def open_chat(page, server, max_tokens: int) -> None:
    page.goto(server.url + "/")
    expect(page.locator("#model")).to_have_text("smol-web")
    page.click("summary")  # the settings
    page.fill("#max-tokens", str(max_tokens))
    page.fill("#temperature", "0")


def test_page_streams_a_reply_and_shows_speed(page, server, model):
    open_chat(page, server, max_tokens=8)
    # count how often the reply's text changes while it streams
    page.evaluate("""() => {
        window.updates = 0;
        new MutationObserver(() => { window.updates += 1; })
            .observe(document.getElementById('log'), {subtree: true, childList: true, characterData: true});
    }""")
    page.fill("#prompt", QUESTION)
    page.keyboard.press("Enter")
    reply = page.locator(".msg.assistant")
    expect(reply).to_have_count(1)
    expect(reply).not_to_have_class(re.compile(r"\bstreaming\b"))  # done streaming
    expect(page.locator("#speed")).to_contain_text("tok/s")
    expect(page.locator(".msg.user")).to_have_text(QUESTION)

    alone = Model(model.spec, model.tokenizer, new_sequence_backend(model.backend, model.spec))
    expected = alone.chat([{"role": "user", "content": QUESTION}], max_tokens=8, temperature=0)
    assert reply.inner_text().strip() == expected.strip() and expected.strip()
    assert page.evaluate("window.updates") >= 3  # user bubble, reply bubble, then text arriving in pieces
    assert page.locator(".msg.error").count() == 0


def test_stop_button_cancels_the_request_on_the_server(page, server):
    open_chat(page, server, max_tokens=600)
    before = httpx.get(server.url + "/metrics").json()
    page.fill("#prompt", "Tell me a very long story about a lighthouse.")
    page.click("#send")
    reply = page.locator(".msg.assistant").last
    expect(reply).not_to_have_text("")  # some text arrived
    page.click("#stop")
    expect(page.locator("#send")).to_be_enabled()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        m = httpx.get(server.url + "/metrics").json()
        if m["active_slots"] == 0 and m["requests_cancelled"] > before["requests_cancelled"]:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the server did not cancel the stopped reply: {m}")
    assert m["tokens_generated"] - before["tokens_generated"] < 600
