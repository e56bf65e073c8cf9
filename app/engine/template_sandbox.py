"""A Jinja sandbox with a budget: chat templates come from downloaded files and must not hang or
exhaust memory.

Jinja's own sandbox stops a template from reaching Python objects, but not from looping for
hours (`range` in `range`), allocating gigabytes in one expression (`'x' * 10**10`) or doubling a
string in a loop. This environment keeps every render inside a `Budget`:

- steps: every loop iteration, call, filter and output piece costs one step; a step limit and a
  wall-clock deadline are checked as it runs, and so is a cancel callable (Stop, closing);
- sizes: no single value (string, list) may exceed `max_chars`; operators and calls that could
  build a huge value in one go (`*`, `**`, widths in `%` and `format`, huge int arguments) are
  checked *before* they run, everything else right after;
- output: every piece written, to the result or to a `{% set %}` / macro buffer, is counted,
  so the total text a render produces stays bounded too.

Any breach raises `TemplateBudgetError` (a TemplateError), or `Cancelled` when the caller asked to
stop. The budget is one object per render: nothing here is shared between threads.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass, field
from typing import Any

from jinja2 import TemplateError, nodes, pass_context
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from app.errors import Cancelled

_ITER_FILTER = "__specchat_iter"
_OUT_FILTER = "__specchat_out"
_CONCAT_FILTER = "__specchat_concat"
# Time and cancel are checked every this many steps: cheap, and still many times a second.
_CHECK_EVERY = 256
# Largest integer a template may build (bits); chat templates count messages, nothing more.
_MAX_INT_BITS = 4096
# Width/precision numbers inside `%` and `{:...}` format specs.
_PERCENT_SPEC = re.compile(r"%[-+ #0]*(\d*)(?:\.(\d+))?")
_BRACE_SPEC = re.compile(r"\{[^{}]*:[^{}\d]*(\d+)(?:\.(\d+))?")


class TemplateBudgetError(TemplateError):
    """The template ran past its step, time, size or output limit."""


@dataclass
class Budget:
    """Limits for one render; `spent()` and `written` say how much of it was used."""

    max_chars: int
    max_steps: int
    deadline_s: float
    should_stop: Callable[[], bool] | None = None
    clock: Callable[[], float] = time.monotonic
    steps: int = 0
    written: int = 0
    _started: float = field(default=-1.0)

    def start(self) -> None:
        self._started = self.clock()

    def step(self, n: int = 1) -> None:
        before = self.steps
        self.steps += n
        if self.steps > self.max_steps:
            raise TemplateBudgetError(f"it ran more than {self.max_steps} steps")
        if self.steps // _CHECK_EVERY != before // _CHECK_EVERY:
            self.check_time()

    def check_time(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise Cancelled("stopped while the chat template was rendering")
        if self._started >= 0 and self.clock() - self._started > self.deadline_s:
            raise TemplateBudgetError(f"it ran longer than {self.deadline_s:g} s")

    def write(self, n_chars: int) -> None:
        self.written += n_chars
        if self.written > 4 * self.max_chars:
            raise TemplateBudgetError(f"it wrote more than {4 * self.max_chars} characters")

    def check_size(self, value: object) -> object:
        if isinstance(value, str | bytes | list | tuple | dict | set) and (
            len(value) > self.max_chars
        ):
            raise TemplateBudgetError(f"it built a value longer than {self.max_chars}")
        if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
            raise TemplateBudgetError(f"it built a number larger than {_MAX_INT_BITS} bits")
        return value

    def check_argument(self, value: object) -> None:
        """Refuse, before a call, integers that would size an allocation or a loop, and
        containers whose text, joined or printed, would be too long."""
        if isinstance(value, bool):
            return
        if isinstance(value, int) and abs(value) > self.max_chars:
            raise TemplateBudgetError(f"it passed {value} where at most {self.max_chars} fits")
        if isinstance(value, tuple | list):
            for item in value[:64]:
                self.check_argument(item)
        self.check_text_size(value)

    def check_text_size(self, value: object) -> None:
        """Refuse a value whose text (str(), join, print) would exceed max_chars, before it
        is built: a list of a million references to one long string costs nothing to hold."""
        if _text_size(value, self.max_chars) > self.max_chars:
            raise TemplateBudgetError(f"it built a value longer than {self.max_chars}")

    def check_format(self, fmt: object) -> None:
        """Refuse `%10000000000s` / `{:10000000000}`: padding is allocated before we see it."""
        if not isinstance(fmt, str):
            return
        for pattern in (_PERCENT_SPEC, _BRACE_SPEC):
            for match in pattern.finditer(fmt):
                for number in match.groups():
                    if number and int(number) > self.max_chars:
                        raise TemplateBudgetError(f"a format width of {number} is too large")


class BudgetedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with every loop, call, filter, operator and output piece metered."""

    intercepted_binops = frozenset({"*", "**", "+", "%", "//", "/", "-"})

    def __init__(
        self, budget: Budget, filters: dict[str, Callable[..., Any]] | None = None, **options: Any
    ) -> None:
        super().__init__(**options)
        self.budget = budget
        # Extra filters are metered like Jinja's own.
        self.filters.update(filters or {})
        self.filters = {name: self._metered_filter(f) for name, f in self.filters.items()}
        self.filters[_ITER_FILTER] = self._metered_iter
        self.filters[_OUT_FILTER] = self._metered_output
        self.filters[_CONCAT_FILTER] = self._metered_concat
        # Jinja's lorem-ipsum generator is a ready-made way to allocate; no template needs it.
        self.globals.pop("lipsum", None)
        self.globals["range"] = self._bounded_range

    # -- the template tree is rewritten so loops and output pass through the meters ----------

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        result = _Meter().visit(tree)
        assert isinstance(result, nodes.Template)
        return result

    def _metered_iter(self, iterable: Iterable[Any]) -> Iterator[Any]:
        budget = self.budget
        for item in iterable:
            budget.step()
            yield item

    @pass_context  # a context filter is never folded at compile time, so literal text counts too
    def _metered_output(self, _context: Context, value: Any) -> Any:
        self.budget.step()
        self.budget.check_text_size(value)
        self.budget.write(len(value) if isinstance(value, Sized) else 1)
        return value

    @pass_context
    def _metered_concat(self, _context: Context, values: list[Any]) -> str:
        # `a ~ b ~ c ...` is one join of many operands: sized before it is built.
        self.budget.step()
        self.budget.check_text_size(values)
        return "".join(str(v) for v in values)

    def _bounded_range(self, *args: int) -> range:
        for value in args:
            self.budget.check_argument(value)
        return range(*args)

    def _metered_filter(self, function: Callable[..., Any]) -> Callable[..., Any]:
        budget = self.budget

        def metered(*args: Any, **kwargs: Any) -> Any:
            budget.step()
            for value in (*args, *kwargs.values()):
                budget.check_argument(value)
            if function.__name__ == "do_format" and args:
                budget.check_format(args[0])
            elif function.__name__ == "do_replace" and len(args) >= 4:
                _check_replace(budget, args[1], args[2], args[3])  # args[0]: eval context
            elif function.__name__ == "do_join" and len(args) >= 2:
                _check_join(budget, args[2] if len(args) > 2 else kwargs.get("d", ""), args[1])
            return budget.check_size(function(*args, **kwargs))

        # Keep Jinja's pass_context / pass_environment markers, which it reads off the function.
        metered.__dict__.update(getattr(function, "__dict__", {}))
        metered.__name__ = getattr(function, "__name__", "filter")
        return metered

    # -- sandbox hooks ------------------------------------------------------------------------

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        budget = __self.budget
        budget.step()
        for value in (*args, *kwargs.values()):
            budget.check_argument(value)
        bound_to = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)
        if isinstance(bound_to, str):
            name = getattr(__obj, "__name__", "")
            if name in ("format", "format_map"):
                budget.check_format(bound_to)
            elif name == "replace" and len(args) >= 2:
                _check_replace(budget, bound_to, args[0], args[1])
            elif name == "join" and args:
                _check_join(budget, bound_to, args[0])
        return budget.check_size(super().call(__context, __obj, *args, **kwargs))

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        budget = self.budget
        budget.step()
        if operator == "*":
            _check_repeat(budget, left, right)
            _check_repeat(budget, right, left)
            if (
                _is_int(left)
                and _is_int(right)
                and (left.bit_length() + right.bit_length() > _MAX_INT_BITS)
            ):
                raise TemplateBudgetError(f"it built a number larger than {_MAX_INT_BITS} bits")
        elif operator == "**" and _is_int(left) and _is_int(right) and abs(left) > 1:
            if right > 0 and left.bit_length() * right > _MAX_INT_BITS:
                raise TemplateBudgetError(f"it built a number larger than {_MAX_INT_BITS} bits")
        elif operator == "%" and isinstance(left, str):
            budget.check_format(left)
            budget.check_argument(right)
            budget.check_text_size([left, right])
        return budget.check_size(super().call_binop(context, operator, left, right))


class _Meter(NodeTransformer):
    """Routes loop iterables, output pieces and `~` results through the budget's filters."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = _filtered(_expression(node.iter), _ITER_FILTER)
        return node

    def visit_Output(self, node: nodes.Output) -> nodes.Node:
        self.generic_visit(node)
        node.nodes = [_filtered(_expression(c), _OUT_FILTER) for c in node.nodes]
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        operands = nodes.List([_expression(n) for n in node.nodes], lineno=node.lineno)
        return _filtered(operands, _CONCAT_FILTER)


def _expression(child: nodes.Node) -> nodes.Expr:
    # Literal text becomes a constant expression so that it is metered like the rest.
    if isinstance(child, nodes.TemplateData):
        return nodes.Const(child.data)
    assert isinstance(child, nodes.Expr)
    return child


def _filtered(node: nodes.Expr, name: str) -> nodes.Expr:
    return nodes.Filter(node, name, [], [], None, None, lineno=node.lineno)


def _check_join(budget: Budget, separator: object, items: object) -> None:
    """Refuse a join whose separators alone would be too long, before it is built."""
    if (
        isinstance(separator, str)
        and isinstance(items, Sized)
        and len(separator) * len(items) > budget.max_chars
    ):
        raise TemplateBudgetError(f"it built a value longer than {budget.max_chars}")


def _text_size(value: object, limit: int) -> int:
    """About how many characters str(value) or a join of it makes; stops counting past limit."""
    if isinstance(value, str | bytes):
        return len(value)
    if isinstance(value, list | tuple | set | frozenset | dict):
        total = 2
        items = value.items() if isinstance(value, dict) else value
        for item in items:
            total += 2 + _text_size(item, limit - total)
            if total > limit:
                break
        return total
    return 8  # numbers, None, booleans, small objects: their text is short


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_repeat(budget: Budget, sequence: object, times: object) -> None:
    if isinstance(sequence, str | bytes | list | tuple) and _is_int(times):
        assert isinstance(times, int)
        if len(sequence) * max(times, 0) > budget.max_chars:
            raise TemplateBudgetError(f"it built a value longer than {budget.max_chars}")


def _check_replace(budget: Budget, text: object, old: object, new: object) -> None:
    """Refuse a replace whose result would be too long, before it is built."""
    if not isinstance(text, str):
        return
    old_s, new_s = str(old), str(new)
    # Replacing "" inserts `new` between every character.
    hits = text.count(old_s) if old_s else len(text) + 1
    if len(text) + hits * max(0, len(new_s) - len(old_s)) > budget.max_chars:
        raise TemplateBudgetError(f"it built a value longer than {budget.max_chars}")
