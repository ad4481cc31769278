"""Grade a submitted notebook: run it in a fresh, walled-in kernel, collect each question's
answer as plain data, and score that data outside the kernel (issues 10 and 16).

:func:`grade` refuses a submission that is a link or not a well-formed notebook
(:mod:`ppbook.assign.submission`), copies its folder to a fresh temporary folder (without
the other notebooks, without links), and looks through its code for calls of what the
assignment forbids (:mod:`ppbook.assign.forbidden`): one found costs every question its
marks, and the notebook is not run. Otherwise it runs every code cell in a new kernel
(:class:`ppbook.assign.kernel.Kernel`) inside the strongest sandbox this machine allows
(:mod:`ppbook.assign.sandbox`), with a limit for the whole notebook and one per cell, then
evaluates each question's ``collect`` expression there (each with its own time limit),
closes the kernel, scans the copy's ``.py`` files again (the notebook may have written
some), measures the questions with a ``run`` module itself (:mod:`ppbook.assign.measure`),
and removes the folder. Each question's ``score`` runs here, in the grader, on the
answer as data (:mod:`ppbook.assign.answers`: NaN, infinities and oversized numbers are
refused). Questions with a ``variant`` are asked on cases drawn from ``random.Random(seed)``
(the seed from ``os.urandom`` unless given; the report shows it).

A kernel that will not start, crashes or sends messages the grader cannot read costs this
submission the questions not yet graded, with a note; it never raises. Every field of the
report that a submission could write is cleaned (:mod:`ppbook.assign.report`).

A question is any object with ``name``, ``max_score``, ``collect`` (the source of one
expression giving JSON data), ``score`` (data -> (score, one line of feedback)) and
``timeout`` (seconds for ``collect``), and optionally ``run`` and ``variant``, as
:mod:`ppbook.assign.questions` defines them. Feedback is one line: an unfinished stub
(``NotImplementedError("write f: what")``) reads "f is still to do: what"; another
exception "f raised ValueError: ..."; a cell that ran out of time is named by its first line.
"""

from __future__ import annotations

import math
import os
import random
import re
import shutil
import tempfile
import time
from pathlib import Path

from ppbook.assign import forbidden as forbidden_calls
from ppbook.assign.answers import MAX_ANSWER_BYTES, collect_code, explain, judge, read_answer
from ppbook.assign.answers import result as _result
from ppbook.assign.kernel import Kernel, first_line
from ppbook.assign.measure import HAND_BACK_SECONDS, hand_back_code, measured, measured_copy
from ppbook.assign.processes import become_subreaper
from ppbook.assign.report import FEEDBACK_CHARS, QuestionResult, Report, clean
from ppbook.assign.sandbox import Limits, Sandbox, choose
from ppbook.assign.submission import (
    MAX_COPY_BYTES,
    assignment_of,
    code_cells,
    copy_submission,
    own,
    python_files,
    read_notebook,
    refuse_link,
)

__all__ = [
    "DEFAULT_CELL_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "FEEDBACK_CHARS",
    "MAX_ANSWER_BYTES",
    "MAX_COPY_BYTES",
    "MAX_TIMEOUT",
    "QuestionResult",
    "Report",
    "assignment_of",
    "explain",
    "grade",
]

DEFAULT_TIMEOUT = 300.0
"""Seconds for all the notebook's cells together (``--timeout``)."""
DEFAULT_CELL_TIMEOUT = 120.0
"""Seconds for one cell."""
MAX_TIMEOUT = 86_400.0
"""The longest time limit the grader accepts (a day)."""


def check_seconds(value: object, name: str) -> float:
    """``value`` as seconds if it is a number more than 0 and at most :data:`MAX_TIMEOUT`,
    else a one-line ValueError saying so."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not (0 < seconds <= MAX_TIMEOUT):
        raise ValueError(
            f"{name} must be a number of seconds more than 0 and at most {MAX_TIMEOUT:g}, "
            f"got {clean(value, 40)}"
        )
    return seconds


def grade(
    path: str | os.PathLike,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    cell_timeout: float = DEFAULT_CELL_TIMEOUT,
    questions: list | None = None,
    isolation: str | None = None,
    limits: Limits | None = None,
    seed: int | None = None,
    forbidden: tuple[str, ...] | None = None,
    sandbox: Sandbox | None = None,
) -> Report:
    """Run and score the notebook at ``path`` (see the module's docstring). ``questions``
    default to the assignment's (:func:`ppbook.assign.questions.questions_for`) and
    ``forbidden`` to its :data:`~ppbook.assign.questions.FORBIDDEN` entry; ``isolation``
    forces a sandbox mode (:data:`ppbook.assign.sandbox.MODES`), ``sandbox`` gives the
    sandbox itself (its uid: folder mode gives each submission graded at once its own)."""
    refuse_link(Path(path))
    path = Path(path).resolve()
    notebook = read_notebook(path)
    timeout = check_seconds(timeout, "timeout")
    cell_timeout = check_seconds(cell_timeout, "cell_timeout")
    assignment = assignment_of(notebook, path)
    if questions is None or forbidden is None:
        from ppbook.assign.questions import FORBIDDEN, questions_for

        questions = questions_for(assignment) if questions is None else questions
        forbidden = FORBIDDEN.get(assignment, ()) if forbidden is None else forbidden
    seed = int.from_bytes(os.urandom(8), "big") if seed is None else int(seed)
    rng = random.Random(seed)
    questions = [q.variant(rng) if getattr(q, "variant", None) else q for q in questions]
    collects = sum(float(q.timeout) for q in questions)
    limits = limits or Limits(cpu_seconds=int(timeout + collects + 60))
    root = Path(tempfile.mkdtemp(prefix="ppbook-grade-"))
    try:
        work, scratch = root / "submission", root / "scratch"
        notes = copy_submission(path.parent, path, work)
        for folder in (scratch / "home", scratch / "tmp"):
            folder.mkdir(parents=True)
        cells = {f"cell {n}": source for n, source in code_cells(notebook)}
        found = forbidden_calls.findings({**cells, **python_files(work)}, forbidden)
        sandbox = sandbox or choose(isolation)
        report = Report(path.name, assignment, [], sandbox.describe(), notes, seed)
        if found:
            return _refused(report, questions, found)
        if sandbox.uid is not None:
            own(root, sandbox.uid)
        become_subreaper()
        walls = (sandbox, work, scratch, limits)
        results = _in_kernel(report, questions, notebook, walls, (timeout, cell_timeout))
        handed = scratch / "tmp" / "handed"
        work = measured_copy(handed, path.name, root / "measured", work, sandbox.uid)
        found = forbidden_calls.findings(python_files(work), forbidden)
        if found:
            return _refused(report, questions, found)
        try:
            results |= measured(questions, sandbox, work, scratch, limits)
        except Exception as exc:  # noqa: BLE001 (the walls failed: this submission only)
            report.notes.append(clean(f"the measurement failed: {type(exc).__name__}: {exc}"))
        report.questions = [
            results.get(i) or _result(q, 0.0, "not graded: the measurement failed")
            for i, q in enumerate(questions)
        ]
        return report.clean()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _refused(report: Report, questions: list, found: list[tuple[str, str]]) -> Report:
    number = re.match(r"0*(\d+)_", report.assignment)
    which = f"assignment {number.group(1)}" if number else f"the assignment {report.assignment}"
    line = f"uses {found[0][1]}, which {which} asks you to write yourself"
    report.questions = [_result(q, 0.0, line) for q in questions]
    report.notes += [clean(f"{where} uses {name}") for where, name in found]
    return report.clean()


def _in_kernel(report: Report, questions: list, notebook: dict, walls, times) -> dict:
    """Run the cells and the kernel's questions; their results by index. Any failure of the
    kernel (it will not start, it dies, it sends what cannot be read) ends this phase with
    a note, and the questions not yet graded score 0."""
    sandbox, work, scratch, limits = walls
    results: dict[int, QuestionResult] = {}
    stopped = None
    try:
        with Kernel(sandbox, work, scratch, limits) as kernel:
            kernel.start()
            notes, stopped = _run_cells(kernel, notebook, times)
            report.notes += notes
            answer = scratch / "tmp" / "answer.json"
            for index, question in enumerate(questions):
                if getattr(question, "run", "") or stopped:
                    continue
                answer.unlink(missing_ok=True)
                code = collect_code(question.collect, answer, work)
                outcome = kernel.run(code, float(question.timeout))
                results[index] = judge(question, outcome, read_answer(answer))
                if outcome.status in ("stuck", "died"):
                    stopped = f"the kernel stopped while grading question {question.name}"
                    report.notes.append(stopped)
            if not stopped and any(getattr(q, "run", "") for q in questions):
                kernel.run(hand_back_code(scratch / "tmp" / "handed"), HAND_BACK_SECONDS)
    except Exception as exc:  # noqa: BLE001 (a kernel that misbehaves costs this submission)
        stopped = clean(f"the kernel failed: {type(exc).__name__}: {exc}")
        report.notes.append(stopped)
    for index, question in enumerate(questions):
        if index not in results and not getattr(question, "run", ""):
            results[index] = _result(question, 0.0, f"not graded: {stopped}")
    return results


def _run_cells(kernel: Kernel, notebook: dict, limits: tuple[float, float]):
    """Run the code cells; returns (notes, why the notebook stopped or None)."""
    timeout, cell_timeout = limits
    notes: list[str] = []
    deadline = time.monotonic() + timeout
    for number, source in code_cells(notebook):
        where = f"cell {number} (`{first_line(source)}`)"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            notes.append(f"the notebook's {timeout:g} s ran out before {where}")
            break
        limit = min(cell_timeout, remaining)
        outcome = kernel.run(source, limit)
        if outcome.status == "timeout":
            notes.append(f"{where} ran out of time ({limit:g} s) and was interrupted")
        elif outcome.status == "stuck":
            return notes, f"{where} ran out of time ({limit:g} s) and did not stop"
        elif outcome.status == "died":
            ended = f"the kernel ended in {where}"
            return notes, f"{ended}: {outcome.error}" if outcome.error else ended
    return notes, None
