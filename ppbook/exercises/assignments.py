"""Self-checks of the four assignments (``notebooks/assignments/``): exercises A1.1 to A4.1.

Each is one :class:`~ppbook.assign.questions.Question`, checked exactly as the grader
checks it: the question's ``collect`` expression is evaluated with the reader's answer
(the function the question asks for; for assignment 3 the transport module's name) under
that function's name, its data goes through JSON as it would leave the grader's kernel,
and the question's ``score`` judges it. Full marks read as right, anything less as not
yet, with the score's line of feedback and the points. An unfinished stub reads as work
still to do, an error in the reader's code as one line naming it. Assignments show no
worked answer: :func:`ppbook.exercises.solution` says so.

Before any of that, the answer's code is scanned for calls of what its assignment forbids
(:data:`ppbook.assign.questions.FORBIDDEN`, :func:`ppbook.assign.forbidden.findings`), as
the grader scans the notebook: the function's source (``inspect.getsource``), with the
names it takes from the notebook resolved through its globals (an import in another cell
counts), or for a module question the module's file. A call found reads as the grader's
verdict: not right, 0 points, naming what was used.
"""

from __future__ import annotations

import builtins
import importlib.util
import inspect
import json
import os
import textwrap
import types

from ppbook.assign.forbidden import findings
from ppbook.assign.grade import explain
from ppbook.assign.questions import ASSIGNMENTS, FORBIDDEN, Question
from ppbook.assign.sandbox import GRADING
from ppbook.checks import clipped
from ppbook.exercises import deferred, exercise, right, wrong

NO_SOLUTION = (
    "assignments show no worked answer; the self-check's line says what is still wrong, "
    "and your instructor has the solutions."
)


def _data(question: Question, answer: object) -> object:
    """What the grader would collect from a notebook whose ``question.function`` is ``answer``."""
    if question.module:
        if answer != question.function:
            raise ValueError(
                f"the grader imports the module {question.function!r}: write your code to "
                f"{question.function}.py and check {question.function!r}"
            )
        scope = {}
    else:
        if not callable(answer):
            raise ValueError(f"check the function {question.function} itself, got {answer!r:.60}")
        scope = {question.function: answer}
    collected = eval(question.collect, {"__builtins__": builtins, **scope})  # the package's own
    return json.loads(json.dumps(collected))


def _names(code: types.CodeType) -> set[str]:
    """Every global name ``code`` and the functions inside it use."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _names(constant)
    return names


def _prelude(function, seen: set) -> list[str]:
    """Python that binds each name ``function`` takes from outside (its globals and closure)
    as the notebook bound it (an import of the module, function or class it names),
    followed by the source of each function of the notebook's own that it calls, and what
    those use in turn."""
    lines, helpers = [], []
    scope = getattr(function, "__globals__", {})
    bound = {name: scope.get(name) for name in _names(function.__code__)}
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or (), strict=True):
        try:
            bound[name] = cell.cell_contents
        except ValueError:  # a closure variable not bound yet
            continue
    for name, value in sorted(bound.items()):
        module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", "")
        if isinstance(value, types.ModuleType):
            lines.append(f"import {value.__name__} as {name}")
        elif isinstance(value, types.FunctionType) and module == function.__module__:
            if value not in seen:  # the notebook's own helper: its code counts too
                seen.add(value)
                helpers += _prelude(value, seen) + _source(value)
        elif isinstance(module, str) and isinstance(qualname, str) and qualname:
            head, *rest = qualname.split(".")
            if all(part.isidentifier() for part in module.split(".")) and head.isidentifier():
                lines.append(f"from {module} import {head} as _ppbook_{name}")
                lines.append(f"{name} = _ppbook_{name}{''.join('.' + r for r in rest)}")
    return lines + helpers


def _source(function) -> list[str]:
    try:
        return [textwrap.dedent(inspect.getsource(function))]
    except (OSError, TypeError):
        return []


def _sources(question: Question, answer) -> dict[str, str]:
    """The code of ``answer`` that the grader would scan."""
    if question.module:
        spec = importlib.util.find_spec(str(answer))
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return {}
        with open(spec.origin, encoding="utf-8", errors="replace") as file:
            return {f"{answer}.py": file.read()}
    parts = _prelude(answer, {answer}) + _source(answer)
    return {f"{question.function} ({number})": part for number, part in enumerate(parts)}


def _forbidden(stem: str, question: Question, answer) -> str | None:
    """The grader's verdict line if ``answer`` uses what assignment ``stem`` forbids."""
    found = findings(_sources(question, answer), FORBIDDEN.get(stem, ()))
    if not found:
        return None
    number = stem.split("_")[0].lstrip("0") or stem
    return f"uses {found[0][1]}, which assignment {number} asks you to write yourself"


def _checker(stem: str, question: Question):
    def check(answer):
        if question.run and os.environ.get(GRADING) == "1":
            return deferred("inside the grader; it measures this itself after the notebook ran")
        suitable = isinstance(answer, str) if question.module else callable(answer)
        refused = _forbidden(stem, question, answer) if suitable else None
        if refused:
            return wrong(f"{refused} (0 of {question.max_score:g} points)")
        try:
            data = _data(question, answer)
        except NotImplementedError as stub:  # read as the grader reads it
            record = {"type": "NotImplementedError", "message": str(stub)}
            return wrong(explain({**record, "function": question.function}))
        except (TypeError, ValueError, ArithmeticError, LookupError, RuntimeError) as error:
            text = clipped((str(error).splitlines() or [""])[0], 300)
            return wrong(f"{question.function} gave an error: {type(error).__name__}: {text}")
        points, line = question.score(data)
        marks = f"({points:g} of {question.max_score:g} points)"
        if points >= question.max_score:
            return right(f"{line.removeprefix('right: ')} {marks}")
        return wrong(f"{line} {marks}")

    return check


for _stem, _questions in ASSIGNMENTS.items():
    for _question in _questions:
        exercise(
            f"A{_question.name}",
            _question.prompt,
            kind="construct",
            solution=NO_SOLUTION,
            answer_name=_question.function,
        )(_checker(_stem, _question))
