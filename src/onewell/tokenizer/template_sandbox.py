"""A Jinja sandbox with limits: a chat template comes from the model file, so it is hostile input.

Jinja's own sandbox stops attribute escapes but lets a template compute without bound (`"x" * 10**9`,
`10 ** 10**6`, nested `range(100000)` loops). This one keeps every render inside a budget:
- operators `*`, `**`, `+`, `%` and `~` (concatenation) are checked *before* they compute: a string or list
  result may hold at most `max_size` items, an integer at most `max_int_bits` bits;
- calls (methods, macros, filters): integer arguments above `max_int_arg` are refused (they are widths and
  counts: `center(10**9)`), known multiplying operations (`replace`, `join`, `indent`, `format`) are
  estimated before they run, and every result is measured after;
- time: every loop iteration, call and operator checks a deadline (`max_seconds`), so nested loops and
  exponential macro recursion end;
- output: the rendered text is collected piece by piece and stops at `max_size` characters.
Everything a limit stops is a TemplateBudgetError (turned into ChatTemplateError by chat_template.py).

The budget of the render running on this thread lives in a thread-local: one compiled template serves
concurrent renders on several worker threads.
"""
from __future__ import annotations

import operator
import re
import threading
import time
from dataclasses import dataclass

from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer


@dataclass(frozen=True)
class TemplateLimits:
    max_seconds: float = 1.0          # wall time of one render
    max_size: int = 1 << 20           # characters of output, items of any string or list built
    max_int_bits: int = 4096          # an int a template computes (10**1233 is ~4096 bits)
    max_int_arg: int = 1 << 16        # an int passed to a call (width, count, indent)
    max_range: int = 100_000          # items of one range()
    size_per_input_char: int = 4      # max_size grows by this per character of the conversation


class TemplateBudgetError(RuntimeError):
    """A render that went past one of its TemplateLimits."""


class Budget:
    def __init__(self, limits: TemplateLimits, input_chars: int = 0):
        self.limits = limits
        self.max_size = limits.max_size + limits.size_per_input_char * input_chars
        self.deadline = time.monotonic() + limits.max_seconds

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise TemplateBudgetError(f"the render took longer than {self.limits.max_seconds:g} s")

    def size(self, n: int, what: str) -> None:
        if n > self.max_size:
            raise TemplateBudgetError(f"{what} would hold {n} items, more than the limit of {self.max_size}")


_current = threading.local()


def current_budget() -> Budget:
    budget = getattr(_current, "budget", None)
    if budget is None:  # rendered outside render_chat (Template.render directly): default limits
        budget = _current.budget = Budget(TemplateLimits())
    return budget


class budget_scope:
    """`with budget_scope(Budget(...)):` renders on this thread count against that budget."""

    def __init__(self, budget: Budget):
        self.budget = budget

    def __enter__(self) -> Budget:
        self.previous = getattr(_current, "budget", None)
        _current.budget = self.budget
        return self.budget

    def __exit__(self, *exc) -> None:
        _current.budget = self.previous


def _length(value) -> int | None:
    return len(value) if isinstance(value, (str, bytes, list, tuple, dict)) else None


def _weight(value) -> int:
    """Items of a string or list, counting the items of the strings and lists it holds (one level): what
    `[s] * n` really multiplies."""
    if isinstance(value, (list, tuple)):
        return len(value) + sum(_length(x) or 0 for x in value)
    return _length(value) or 0


_FORMAT_WIDTH = re.compile(r"\d{6,}")  # a width or precision of 100000 or more in a % or {} format
_BINOPS = {"*": operator.mul, "**": operator.pow, "+": operator.add, "%": operator.mod}


def _check_args(budget: Budget, args, kwargs) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > budget.limits.max_int_arg:
            raise TemplateBudgetError(f"an argument of {value} is above the limit of {budget.limits.max_int_arg}")


def _estimate_call(budget: Budget, name: str, subject, args, kwargs) -> None:
    """Operations whose result can be a product of their inputs' sizes, checked before they run."""
    n = _length(subject) or 0
    if name == "replace" and len(args) >= 2 and isinstance(subject, str) and isinstance(args[0], str):
        hits = subject.count(args[0]) if args[0] else n + 1
        budget.size(n + hits * len(str(args[1])), "the result of replace")
    elif name == "join" and isinstance(subject, (list, tuple)):
        sep = args[0] if args else kwargs.get("d", "")
        budget.size(sum(len(x) if isinstance(x, str) else 32 for x in subject) + len(subject) * len(str(sep)),
                    "the result of join")
    elif name == "join" and isinstance(subject, str) and args and isinstance(args[0], (list, tuple)):
        items = args[0]  # str.join(items): the subject is the separator
        budget.size(sum(len(x) if isinstance(x, str) else 0 for x in items) + len(items) * n, "the result of join")
    elif name == "indent" and isinstance(subject, str):
        width = args[0] if args else kwargs.get("width", 4)
        per_line = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        budget.size(n + (subject.count("\n") + 1) * per_line, "the result of indent")
    elif name in ("format", "format_map") and isinstance(subject, str) and _FORMAT_WIDTH.search(subject):
        raise TemplateBudgetError("a format width or precision of 100000 or more")


def _check_result(budget: Budget, value, what: str):
    n = _length(value)
    if n is not None:
        budget.size(n, what)
    elif isinstance(value, int) and value.bit_length() > budget.limits.max_int_bits:
        raise TemplateBudgetError(f"{what} has more than {budget.limits.max_int_bits} bits")
    return value


def _checked_filter(name: str, fn):
    def run(*args, **kwargs):
        budget = current_budget()
        budget.tick()
        _check_args(budget, args[1:], kwargs)  # args[0] is the filtered value (or the context/environment)
        subject = next((a for a in args if isinstance(a, (str, list, tuple))), None)
        rest = args[args.index(subject) + 1:] if subject is not None else ()
        _estimate_call(budget, name, subject, rest, kwargs)
        return _check_result(budget, fn(*args, **kwargs), f"the result of the filter {name}")

    run.__name__ = getattr(fn, "__name__", name)
    for attr in ("jinja_pass_arg",):  # pass_context / pass_environment markers must survive the wrapping
        if hasattr(fn, attr):
            setattr(run, attr, getattr(fn, attr))
    return run


class _BudgetHooks(NodeTransformer):
    """Rewrites the parsed template so loops and `~` go through the budget."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Call(nodes.EnvironmentAttribute("budget_iter"), [node.iter], [], None, None,
                               lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Call(nodes.EnvironmentAttribute("budget_concat"), [nodes.List(node.nodes, lineno=node.lineno)],
                          [], None, None, lineno=node.lineno)


class LimitedSandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset(_BINOPS)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.globals["range"] = self.budget_range

    def finish_filters(self) -> None:
        """Wrap every filter (call after adding the template's own)."""
        self.filters = {name: _checked_filter(name, fn) for name, fn in self.filters.items()}

    def _parse(self, source, name, filename):
        return _BudgetHooks().visit(super()._parse(source, name, filename))

    # -- hooks the rewritten template calls ----------------------------------------------------------------

    def budget_iter(self, iterable):
        budget = current_budget()
        for item in iterable:
            budget.tick()
            yield item

    def budget_concat(self, parts):
        budget = current_budget()
        texts = [str(p) for p in parts]
        budget.size(sum(map(len, texts)), "a ~ concatenation")
        return "".join(texts)

    def budget_range(self, *args):
        budget = current_budget()
        r = range(*args)
        if len(r) > budget.limits.max_range:
            raise TemplateBudgetError(f"range of {len(r)} items, more than the limit of {budget.limits.max_range}")
        return r

    # -- the sandbox's interception points -----------------------------------------------------------------

    def call_binop(self, context, op: str, left, right):
        budget = current_budget()
        budget.tick()
        if op == "*":
            seq, count = (left, right) if _length(left) is not None else (right, left)
            if _length(seq) is not None and isinstance(count, int):
                budget.size(_weight(seq) * max(count, 0), "a repeated string or list")
            elif isinstance(left, int) and isinstance(right, int):
                self._int_bits(budget, left.bit_length() + right.bit_length())
        elif op == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
            if abs(left) > 1:
                self._int_bits(budget, right * (abs(left).bit_length() - 1) + 1)
        elif op == "+" and _length(left) is not None and _length(right) is not None:
            budget.size(_length(left) + _length(right), "a concatenation")
        elif op == "%" and isinstance(left, str):
            if _FORMAT_WIDTH.search(left):
                raise TemplateBudgetError("a % format width or precision of 100000 or more")
            _check_args(budget, right if isinstance(right, tuple) else (right,), {})
        return _check_result(budget, _BINOPS[op](left, right), f"the result of {op}")

    @staticmethod
    def _int_bits(budget: Budget, bits: int) -> None:
        if bits > budget.limits.max_int_bits:
            raise TemplateBudgetError(f"an integer of about {bits} bits, more than the limit of "
                                      f"{budget.limits.max_int_bits}")

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (Jinja's signature)
        budget = current_budget()
        budget.tick()
        if __obj != __self.budget_range:  # range has its own limit, on its length
            _check_args(budget, args, kwargs)
        name = getattr(__obj, "__name__", "")
        target = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
        _estimate_call(budget, name, getattr(target, "__self__", None), args, kwargs)
        return _check_result(budget, super().call(__context, __obj, *args, **kwargs), f"the result of {name or 'a call'}")
