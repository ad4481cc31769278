"""The one exercise API of the book: every chapter and assignment checks answers through it.

In a chapter::

    from ppbook.exercises import check, solution

    answer_1 = None   # your answer here
    check("1.1", answer_1)

:func:`check` returns a :class:`Verdict`, shown in the notebook as one line: right (and
why), not yet (what is wrong, and a hint), or not answered yet (said once, no answer
shown). :func:`solution` shows the worked answer, only when the reader asks for it.
Right answers are computed by the package (the simulator, the symbolic layer), never
stored.

Each chapter's exercises live in ``ppbook.exercises.chN`` (loaded on first use), each a
function registered with :func:`exercise` that receives the reader's answer (never
``None``) and returns :func:`right` or :func:`wrong`. Answers of the wrong type are
turned into a "not yet" verdict by :func:`number`, :func:`integer` and the chapter's
own checks; a :class:`ValueError` raised while checking (an invalid schedule, say) becomes
"not yet" with its message. Numbers are compared with :func:`close`: within half a percent,
so that an answer rounded to three significant digits is right.
"""

from __future__ import annotations

import html
import importlib
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

from ppbook.checks import clipped, shown

KINDS = ("compute", "construct", "choose", "derive", "implement")
"""What an exercise asks: compute a number, construct something (a schedule, costs, a
placement), choose (a schedule, a parameter, a limit) and justify it by its effect, derive
a formula (a sympy expression, checked against the simulator or the critical path) or
implement a function (run against an independent answer such as PyTorch's autograd)."""

REL_TOL = 5e-3
"""Relative tolerance of :func:`close`: an answer rounded to three significant digits passes."""

ABS_TOL = 5e-4
"""Absolute tolerance of :func:`close`, for answers near zero."""

_CHAPTERS = {
    "1": "ppbook.exercises.ch1",
    "2": "ppbook.exercises.ch2",
    "3": "ppbook.exercises.ch3",
    "4": "ppbook.exercises.ch4",
    "5": "ppbook.exercises.ch5",
    "6": "ppbook.exercises.ch6",
    "7": "ppbook.exercises.ch7",
    "8": "ppbook.exercises.ch8",
    "9": "ppbook.exercises.ch9",
    "10": "ppbook.exercises.ch10",
    "11": "ppbook.exercises.ch11",
    "A1": "ppbook.exercises.assignments",
    "A2": "ppbook.exercises.assignments",
    "A3": "ppbook.exercises.assignments",
    "A4": "ppbook.exercises.assignments",
}


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking one answer: ``status`` is right, wrong, unanswered, or
    deferred (inside the grader's kernel, a check the grader makes itself afterwards)."""

    exercise: str
    status: str
    message: str
    hint: str = ""

    def __bool__(self) -> bool:
        return self.status == "right"

    @property
    def text(self) -> str:
        """The verdict as one line of plain text."""
        head = {
            "right": "right",
            "wrong": "not yet",
            "unanswered": "not answered yet",
            "deferred": "left to the grader",
        }
        line = f"Exercise {self.exercise}, {head[self.status]}: {self.message}"
        if self.hint:
            line += f" Hint: {self.hint}"
        return line

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        colour = {"right": "#1a7f37", "wrong": "#b35900"}.get(self.status, "#555")
        mark = {"right": "&#10004;", "wrong": "&#10008;"}.get(self.status, "&#8230;")
        return (
            f'<div style="color:{colour}"><b>{mark} {html.escape(self.text)}</b></div>'
            if self.status == "right"
            else f'<div style="color:{colour}">{mark} {html.escape(self.text)}</div>'
        )


@dataclass(frozen=True)
class Exercise:
    """A registered exercise: its id (``"2.3"``), what it asks, its kind and its check."""

    id: str
    prompt: str
    kind: str
    check: Callable[..., Verdict]
    solution: str
    answer_name: str


class _Verdict(Exception):
    """Raised by :func:`number` and friends to end a check with a verdict at once."""

    def __init__(self, verdict_args: tuple[str, str]):
        super().__init__(verdict_args[0])
        self.message, self.hint = verdict_args


_REGISTRY: dict[str, Exercise] = {}


def exercise(
    id: str, prompt: str, kind: str, solution: str, answer_name: str = "answer"
) -> Callable[[Callable[..., Verdict]], Callable[..., Verdict]]:
    """Register the decorated function as the check of exercise ``id``.

    ``prompt`` is the question in one sentence; ``kind`` one of :data:`KINDS`; ``solution``
    the worked answer in Markdown (shown only by :func:`solution`); ``answer_name`` the
    variable the notebook asks the reader to set.
    """
    if kind not in KINDS:
        raise ValueError(f"exercise {id}: kind must be one of {', '.join(KINDS)}, got {kind!r}")

    def register(func: Callable[..., Verdict]) -> Callable[..., Verdict]:
        if id in _REGISTRY:
            raise ValueError(f"exercise {id} is registered twice")
        _REGISTRY[id] = Exercise(id, prompt, kind, func, solution, answer_name)
        return func

    return register


def right(message: str) -> tuple[str, str, str]:
    """A right answer, with what makes it right."""
    return ("right", message, "")


def deferred(message: str) -> tuple[str, str, str]:
    """A check not made here because the grader makes it itself (assignment 3's measurement,
    inside the grading kernel): neither right nor wrong."""
    return ("deferred", message, "")


def wrong(message: str, hint: str = "") -> tuple[str, str, str]:
    """A wrong answer: what is wrong with it, and a hint towards the right one."""
    return ("wrong", message, hint)


def number(answer: object, what: str = "a number such as 0.25") -> float:
    """``answer`` as a float, or end the check with "this exercise wants ``what``"."""
    if isinstance(answer, bool) or isinstance(answer, str | bytes):
        raise _Verdict((f"this exercise wants {what}, got {shown(answer)}.", ""))
    try:
        value = float(answer)  # int, float, Fraction, Decimal, numpy and sympy numbers
    except (TypeError, ValueError, OverflowError):
        raise _Verdict((f"this exercise wants {what}, got {shown(answer)}.", "")) from None
    if not math.isfinite(value):
        raise _Verdict((f"this exercise wants a finite number, got {shown(answer)}.", ""))
    return value


def integer(
    answer: object,
    what: str = "a whole number",
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    """``answer`` as an int within ``minimum``..``maximum`` (either may be None), or end the
    check with "this exercise wants ``what``"."""
    if isinstance(answer, float) and answer.is_integer():
        answer = int(answer)
    if isinstance(answer, bool) or not isinstance(answer, numbers.Integral):
        raise _Verdict((f"this exercise wants {what}, got {shown(answer)}.", ""))
    value = int(answer)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise _Verdict((f"this exercise wants {what}, got {value}.", ""))
    return value


def close(answer: float, truth: float) -> bool:
    """Whether ``answer`` is ``truth`` within :data:`REL_TOL` (or :data:`ABS_TOL` near 0)."""
    return math.isclose(answer, truth, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def get(id: str) -> Exercise:
    """The registered exercise ``id`` (``"1.2"``), loading its chapter's module on first use."""
    if not isinstance(id, str):
        raise ValueError(f"an exercise id is a string such as '1.2', got {shown(id)}")
    chapter = id.partition(".")[0]
    if chapter in _CHAPTERS:
        importlib.import_module(_CHAPTERS[chapter])
    if id not in _REGISTRY:
        known = ", ".join(sorted(i for i in _REGISTRY if i.partition(".")[0] == chapter))
        where = f"; chapter {chapter} has {known}" if known else ""
        raise ValueError(f"there is no exercise {id!r}{where}")
    return _REGISTRY[id]


def exercises(chapter: str) -> list[Exercise]:
    """Every exercise of ``chapter`` (``"1"``), in order."""
    if chapter not in _CHAPTERS:
        raise ValueError(f"no chapter {chapter!r} has exercises; chapters: {', '.join(_CHAPTERS)}")
    importlib.import_module(_CHAPTERS[chapter])
    found = [e for i, e in _REGISTRY.items() if i.partition(".")[0] == chapter]
    return sorted(found, key=lambda e: tuple(int(x) for x in e.id.split(".")[1:]))


def check(id: str, answer: object, **context) -> Verdict:
    """Check ``answer`` to exercise ``id``; keyword arguments go to the exercise's check."""
    entry = get(id)
    if answer is None:
        return Verdict(
            id,
            "unanswered",
            f"set {entry.answer_name} and run this cell again. "
            f'(Stuck? solution("{id}") shows a worked answer.)',
        )
    try:
        status, message, hint = entry.check(answer, **context)
    except _Verdict as stop:
        return Verdict(id, "wrong", stop.message, stop.hint)
    except ValueError as error:  # the answer is not valid (a schedule that cannot run, ...)
        text = "; ".join(line.strip() for line in str(error).splitlines()[:4])
        return Verdict(id, "wrong", clipped(text, 300))
    return Verdict(id, status, message, hint)


def assert_right(id: str, answer: object, **context) -> Verdict:
    """:func:`check` for a notebook whose answer must be right (the instructor versions of
    the assignments): the verdict when right, else AssertionError with its line, so that
    running the notebook (nbval, CI) fails on a wrong solution (a check deferred to the
    grader passes). ``ppbook assign build``
    turns each call into :func:`check` in the student copies."""
    verdict = check(id, answer, **context)
    if verdict.status not in ("right", "deferred"):
        raise AssertionError(verdict.text)
    return verdict


class Solution:
    """A worked answer, shown as Markdown in a notebook and as text elsewhere."""

    def __init__(self, id: str, markdown: str):
        self.id, self.markdown = id, markdown

    def _repr_markdown_(self) -> str:
        return f"**Solution {self.id}.** {self.markdown}"

    def __repr__(self) -> str:
        return f"Solution {self.id}. {self.markdown}"


def solution(id: str) -> Solution:
    """The worked answer of exercise ``id``: call it only when you want to see it."""
    return Solution(id, get(id).solution)
