"""Hostile chat templates (a template is data from the model file): every render ends within its budget of time
and size, and every failure is a ChatTemplateError, never another exception, a hang or a runaway allocation."""
from __future__ import annotations

import threading
import time

import pytest

from onewell.tokenizer import ChatTemplateError, render_chat
from onewell.tokenizer import chat_template
from onewell.tokenizer.template_sandbox import TemplateLimits

USER = [{"role": "user", "content": "hi"}]
FAST = TemplateLimits(max_seconds=0.3)

# Each of these computed without bound before the limits: seconds to minutes, gigabytes, or a bare exception.
HOSTILE = {
    "string repeat": '{{ "x" * 10**9 }}',
    "list repeat of big items": '{{ ["x" * 60000] * 60000 }}',
    "huge power": "{{ 10 ** (10 ** 6) }}",
    "int squaring": "{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}",
    "nested range loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "range too long": "{% for i in range(10**9) %}{% endfor %}",
    "exponential macro recursion":
        "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(60) }}",
    "endless macro recursion": "{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}",
    "doubling with ~": '{% set ns = namespace(s="xy") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}',
    "doubling with +": '{% set ns = namespace(s="xy") %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}',
    "center filter": '{{ "x" | center(1000000000) }}',
    "ljust method": '{{ "x".ljust(100000000) }}',
    "replace filter": '{{ ("x" * 60000) | replace("x", "y" * 60000) }}',
    "replace method": '{{ ("x" * 60000).replace("x", "y" * 60000) }}',
    "join filter": '{{ (["a"] * 60000) | join("x" * 60000) }}',
    "indent filter": '{{ ("\\n" * 60000) | indent(60000) }}',
    "format width": '{{ "{:>99999999}".format(1) }}',
    "percent width": '{{ "%99999999d" % 1 }}',
    "output size": '{% for i in range(100000) %}{{ "x" * 1000 }}{% endfor %}',
    "float overflow": "{{ 10.0 ** 400 }}",
    "int to text": "{{ 10 ** 4000 }}",
    "type error": "{{ messages + 1 }}",
    "parser recursion": "{{ " + "(" * 50000 + "1" + ")" * 50000 + " }}",
    "int argument": "{{ range(3) | batch(10**12) | list }}",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_template_ends_in_a_chat_template_error_quickly(name):
    started = time.monotonic()
    with pytest.raises(ChatTemplateError):
        render_chat(HOSTILE[name], USER, limits=FAST)
    assert time.monotonic() - started < 3.0, name


def test_the_time_budget_is_the_one_given():
    started = time.monotonic()
    with pytest.raises(ChatTemplateError, match="longer than 0.2 s"):
        render_chat(HOSTILE["nested range loops"], USER, limits=TemplateLimits(max_seconds=0.2))
    assert 0.2 <= time.monotonic() - started < 1.5


def test_ordinary_operators_filters_and_loops_still_work():
    template = ('{% for m in messages %}[{{ m.role | upper }}:{{ m.content * 2 }}]{% endfor %}'
                '{{ [1, 2] | join(",") }} {{ "a" ~ "b" }} {{ 2 ** 10 }} {{ "%d-%s" % (3, "x") }} '
                '{{ "{}|{}".format(1, 2) }} {{ (range(3) | list) * 2 }} {{ "ab".replace("a", "c") }}'
                '{{ "x" | indent(2) }}{{ "z" | center(5) }}')
    assert render_chat(template, USER) == "[USER:hihi]1,2 ab 1024 3-x 1|2 [0, 1, 2, 0, 1, 2] cbx  z  "


def test_the_output_budget_grows_with_the_conversation():
    long_message = [{"role": "user", "content": "y" * 2_000_000}]  # more than the fixed budget of 1 Mi chars
    assert len(render_chat("{{ messages[0].content }}", long_message)) == 2_000_000


def test_a_template_is_compiled_once_also_when_it_does_not_compile():
    chat_template._compile_or_error.cache_clear()
    for _ in range(3):
        render_chat("{{ messages[0].content }}!", USER)
        with pytest.raises(ChatTemplateError, match="does not compile"):
            render_chat("{% for %}", USER)
    info = chat_template._compile_or_error.cache_info()
    assert (info.misses, info.hits) == (2, 4)


def test_concurrent_renders_keep_their_own_budgets():
    """One compiled template on several threads: a slow render's deadline must not stop a quick one."""
    results: dict[str, object] = {}

    def slow():
        try:
            render_chat(HOSTILE["nested range loops"], USER, limits=TemplateLimits(max_seconds=0.5))
        except ChatTemplateError as e:
            results["slow"] = e

    def quick():
        time.sleep(0.1)
        results["quick"] = [render_chat("{% for i in range(1000) %}{% endfor %}ok", USER,
                                        limits=TemplateLimits(max_seconds=5)) for _ in range(20)]

    threads = [threading.Thread(target=slow), threading.Thread(target=quick)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert isinstance(results["slow"], ChatTemplateError)
    assert results["quick"] == ["ok"] * 20
