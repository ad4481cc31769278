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
    inside the same walls (``python -I -m RUN ANSWER_PATH`` in the submission's copy), for
    what must be measured rather than reported by the kernel; questions that name the same
    module share one run. Empty: ``collect`` is evaluated in the kernel."""
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
        _question(
            "1.4",
            2,
            _calls("best_chunks", score_bubble.CHUNK_CASES),
            score_bubble.score_chunks,
            "best_chunks",
            "the v past which more chunks no longer pay on a link",
        ),
    ],
    "02_one_f_one_b": [
        _question(
            "2.1",
            4,
            _calls("one_f_one_b_rows", score_schedules.MANY_MICROBATCHES),
            score_schedules.score_many_microbatches,
            "one_f_one_b_rows",
            "1F1B for m >= p: valid, and (m+p-1)(F+B)",
        ),
        _question(
            "2.2",
            3,
            _calls("one_f_one_b_rows", score_schedules.FEW_MICROBATCHES),
            score_schedules.score_few_microbatches,
            "one_f_one_b_rows",
            "1F1B for m < p: valid, and (m+p-1)(F+B)",
        ),
        _question(
            "2.3",
            3,
            _calls(
                "one_f_one_b_rows",
                score_schedules.MANY_MICROBATCHES + score_schedules.FEW_MICROBATCHES,
            ),
            score_schedules.score_memory,
            "one_f_one_b_rows",
            "1F1B's memory: rank r holds at most min(p - r, m) micro-batches",
        ),
    ],
    "03_send_receive": [
        _question(
            "3.1",
            4,
            "__import__('ppbook.assign.transport', fromlist=['_'])"
            f".pipeline_gradients({transport.TRANSPORT!r})",
            transport.score_loss,
            transport.TRANSPORT,
            "the forward: the pipeline's loss equals one process's",
            timeout=120,
            module=True,
        ),
        _question(
            "3.2",
            6,
            "__import__('ppbook.assign.transport', fromlist=['_'])"
            f".pipeline_gradients({transport.TRANSPORT!r})",
            transport.score_gradients,
            transport.TRANSPORT,
            "the backward: every gradient equals one process's",
            timeout=120,
            module=True,
        ),
    ],
    "04_design_a_schedule": [
        _question(
            "4.1",
            10,
            "my_schedule()",
            score_schedules.score_design,
            "my_schedule",
            "the smallest makespan within the memory limit (ZB-H1's or less: full marks)",
        ),
    ],
}
"""Every assignment's questions, by its notebook's stem."""


FORBIDDEN: dict[str, tuple[str, ...]] = {
    "01_interleaved_bubble": ("ppbook.symbolic.schedules", "ppbook.closed_form"),
    "02_one_f_one_b": ("ppbook.schedules", "ppbook.pytorch_csv", "torch.distributed.pipelining"),
    "03_send_receive": (
        "ppbook.runtime.execute.StepRunner.receive",
        "ppbook.runtime.execute.StepRunner.deliver",
    ),
    "04_design_a_schedule": (
        "ppbook.schedules",
        "ppbook.pytorch_csv",
        "torch.distributed.pipelining",
    ),
}
"""What each assignment asks the reader to write and so refuses to see called: qualified
names of modules, functions or methods (a name forbids everything below it). The grader
(:mod:`ppbook.assign.forbidden`) looks for them in the submission's code and refuses the
assignment's marks where it finds one."""


def questions_for(notebook_path: str | Path) -> list[Question]:
    """The questions of the assignment whose notebook is ``notebook_path`` (by its stem)."""
    stem = Path(notebook_path).stem
    if stem not in ASSIGNMENTS:
        raise ValueError(
            f"no assignment is called {stem!r}; the assignments are {', '.join(ASSIGNMENTS)}"
        )
    return ASSIGNMENTS[stem]
