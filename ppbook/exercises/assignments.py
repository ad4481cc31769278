"""Self-checks of the four assignments (``notebooks/assignments/``): exercises A1.1 to A4.1.

Each is one :class:`~ppbook.assign.questions.Question`, checked exactly as the grader
checks it: the question's ``collect`` expression is evaluated with the reader's answer
(the function the question asks for; for assignment 3 the transport module's name) under
that function's name, its data goes through JSON as it would leave the grader's kernel,
and the question's ``score`` judges it. Full marks read as right, anything less as not
yet, with the score's line of feedback and the points. An unfinished stub reads as work
still to do, an error in the reader's code as one line naming it. Assignments show no
worked answer: :func:`ppbook.exercises.solution` says so.
"""

from __future__ import annotations

import builtins
import json

from ppbook.assign.grade import explain
from ppbook.assign.questions import ASSIGNMENTS, Question
from ppbook.checks import clipped
from ppbook.exercises import exercise, right, wrong

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


def _checker(question: Question):
    def check(answer):
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
        )(_checker(_question))
