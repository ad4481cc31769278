"""The questions of the four assignments: what the grader collects from a submission, and
how it scores that data (``notebooks/assignments/``).

A :class:`Question`'s ``collect`` is the source of one expression that the grader
evaluates in the submission's kernel after all its cells ran; it calls the function the
question asks for and gives back plain data (numbers, strings, lists, dicts). Its
``score`` runs in the grader's own process and trusts that data for nothing more: it
re-checks it with ppbook (sympy, the validator, the simulator, the single-process
reference) and returns the points and one line of feedback that teaches. The notebooks'
self-check cells go through the same two steps (:mod:`ppbook.exercises.assignments`), so
a reader sees the grader's own verdict before handing in.

The scores live with their assignments: :mod:`.score_bubble` (1),
:mod:`.score_schedules` (2 and 4), :mod:`.transport` (3).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ppbook.assign import score_bubble, score_schedules, transport


@dataclass(frozen=True)
class Question:
    """One graded question: its name ("1.1"), points, what to collect and how to score it.

    ``function`` is the notebook's function the question asks for, or with ``module`` the
    module that ``collect`` imports (assignment 3); ``prompt`` the question in one sentence,
    for reports and self-checks.
    """

    name: str
    max_score: float
    collect: str
    score: Callable[[object], tuple[float, str]]
    timeout: float = 60
    function: str = ""
    prompt: str = ""
    module: bool = False
    run: str = ""
    """A module of ppbook that the grader runs itself, outside the submission's kernel and
    inside the same walls (``python -I -m RUN ANSWER_PATH`` in the submission's copy, with
    the files the notebook's cells wrote there), after the kernel closed, for what must be
    measured rather than reported by the kernel; questions that name the same module share
    one run, whose time limit is their largest ``timeout`` (:mod:`ppbook.assign.measure`).
    Empty: ``collect`` is evaluated in the kernel."""
    variant: Callable[[random.Random], Question] | None = None
    """Draws the question the grader asks: the same question on cases drawn at grading time
    (``collect`` and ``score`` bound to them), so that no table of the cases can answer
    it; None: the question as it stands (the notebook's self-check always uses that)."""


def _scaled(share: Callable[[object], tuple[float, str]], points: float):
    """A score in points from one that gives a share of the marks (0 to 1)."""

    def score(data: object) -> tuple[float, str]:
        got, line = share(data)
        return round(points * got, 2), line

    score.__doc__ = share.__doc__
    return score


def _question(name, points, collect, share, function, prompt, timeout=60, module=False) -> Question:
    scaled = _scaled(share, points)
    return Question(name, points, collect, scaled, timeout, function, prompt, module)


_TREE = "__import__('ppbook.assign.expressions', fromlist=['to_tree']).to_tree"


def _calls(function: str, cases) -> str:
    """Source that calls ``function`` once per argument tuple of ``cases``, in a list."""
    return f"[{function}(*case) for case in {[list(case) for case in cases]!r}]"


ASSIGNMENTS: dict[str, list[Question]] = {
    "01_interleaved_bubble": [
        _question(
            "1.1",
            3,
            f"{_TREE}(interleaved_bubble())",
            score_bubble.score_bubble,
            "interleaved_bubble",
            "the idle time of one device under interleaved 1F1B",
        ),
        _question(
            "1.2",
            2,
            f"{_TREE}(interleaved_bubble_fraction())",
            score_bubble.score_fraction,
            "interleaved_bubble_fraction",
            "its bubble fraction f = idle / total",
        ),
        _question(
            "1.3",
            3,
            f"{_TREE}(interleaved_makespan_with_transfer())",
            score_bubble.score_transfer,
            "interleaved_makespan_with_transfer",
            "the makespan with a transfer time c on every message between ranks",
        ),
        score_bubble.varied(  # the grader asks it on cases it draws (Question.variant)
            _question(
                "1.4",
                2,
                score_bubble.chunk_calls(score_bubble.CHUNK_CASES),
                score_bubble.score_chunks,
                "best_chunks",
                "the v past which more chunks no longer pay on a link",
            )
        ),
    ],
    "02_one_f_one_b": [
        score_schedules.varied(  # the grader asks it on (p, m) it draws (Question.variant)
            _question(
                "2.1",
                4,
                score_schedules.calls(score_schedules.MANY_MICROBATCHES),
                score_schedules.score_many_microbatches,
                "one_f_one_b_rows",
                "1F1B for m >= p: valid, 1F1B's order on every rank, and its time",
            )
        ),
        score_schedules.varied(
            _question(
                "2.2",
                3,
                score_schedules.calls(score_schedules.FEW_MICROBATCHES),
                score_schedules.score_few_microbatches,
                "one_f_one_b_rows",
                "1F1B for m < p: valid, 1F1B's order on every rank, and its time",
            )
        ),
        score_schedules.varied(
            _question(
                "2.3",
                3,
                score_schedules.calls(
                    score_schedules.MANY_MICROBATCHES + score_schedules.FEW_MICROBATCHES
                ),
                score_schedules.score_memory,
                "one_f_one_b_rows",
                "1F1B's order and memory: rank r holds at most min(p - r, m) micro-batches",
            )
        ),
    ],
    "03_send_receive": [
        transport.measured_question(  # run: measured by the grader, outside the kernel
            _question(
                "3.1",
                4,
                transport.COLLECT,
                transport.score_loss,
                transport.TRANSPORT,
                "the forward: the pipeline's loss equals one process's",
                timeout=180,
                module=True,
            )
        ),
        transport.measured_question(
            _question(
                "3.2",
                6,
                transport.COLLECT,
                transport.score_gradients,
                transport.TRANSPORT,
                "the backward: every gradient and parameter after the step equals one process's",
                timeout=180,
                module=True,
            )
        ),
    ],
    "04_design_a_schedule": [
        _question(
            "4.1",
            10,
            "my_schedule()",
            score_schedules.score_design,
            "my_schedule",
            "the smallest makespan within the memory limit (within 2 % of the bound: full marks)",
        ),
    ],
}
"""Every assignment's questions, by its notebook's stem."""


FORBIDDEN: dict[str, tuple[str, ...]] = {
    "01_interleaved_bubble": (
        "ppbook.symbolic.schedules",
        "ppbook.symbolic.interleaved_makespan",
        "ppbook.symbolic.interleaved_bubble",
        "ppbook.symbolic.interleaved_bubble_fraction",
        "ppbook.symbolic.interleaved_bubble_ratio",
        "ppbook.symbolic.one_f_one_b_makespan",
        "ppbook.symbolic.one_f_one_b_bubble",
        "ppbook.symbolic.pipeline_makespan",
        "ppbook.symbolic.bubble_fraction_of",
        "ppbook.symbolic.bubble_ratio_of",
        "ppbook.symbolic.bubble_conventions",
        "ppbook.symbolic.bubble_expr",
        "ppbook.symbolic.microbatch_target",
        "ppbook.symbolic.numeric",
        "ppbook.symbolic.formula",
        "ppbook.symbolic.formulas",
        "ppbook.closed_form",
        "ppbook.critical_path",
        "ppbook.views.bubble_curves",
        "ppbook.widgets.bubble_explorer",
        "ppbook.assign.score_bubble",
        "ppbook.assign.equality",
    ),
    "02_one_f_one_b": score_schedules.READY_MADE_ORDERS,
    "03_send_receive": (
        "ppbook.runtime.execute.StepRunner.receive",
        "ppbook.runtime.execute.StepRunner.deliver",
        "ppbook.runtime.execute.StepRunner._take",
        "ppbook.runtime.execute.StepRunner._put",
        "ppbook.runtime.reference",
        "ppbook.assign.guarded_transport",
        "ppbook.assign.measure_transport",
    ),
    "04_design_a_schedule": score_schedules.READY_MADE_ORDERS,
}
"""What each assignment asks the reader to write and so refuses to see called: qualified
names of modules, functions or methods (a name forbids everything below it). The grader
looks for them, without running anything (:func:`ppbook.assign.forbidden.scan`: imports,
aliases, attribute chains, import functions and ``getattr`` with constant strings,
re-exports resolved to where an object is defined), in every code cell of the notebook and
every ``.py`` file of its folder; one found costs every question of the assignment its
marks, with a line naming it. The notebook's self-check scans the answer's own code the
same way (:mod:`ppbook.exercises.assignments`)."""


def questions_for(notebook_path: str | Path) -> list[Question]:
    """The questions of the assignment whose notebook is ``notebook_path`` (by its stem)."""
    stem = Path(notebook_path).stem
    if stem not in ASSIGNMENTS:
        raise ValueError(
            f"no assignment is called {stem!r}; the assignments are {', '.join(ASSIGNMENTS)}"
        )
    return ASSIGNMENTS[stem]
