"""Questions asked on cases drawn at grading time (``Question.variant``), for assignments 1
and 2: one way to bind a drawn set of cases to a question's ``collect`` and ``score``."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace


def on_drawn_cases(
    question,
    draw: Callable[[random.Random], list],
    share_for: Callable[[list], Callable[[object], tuple[float, str]]],
    calls_for: Callable[[list], str],
):
    """``question`` with a ``variant``: the same question on ``draw(rng)``'s cases, its
    ``collect`` from ``calls_for(cases)`` and its score ``share_for(cases)`` (a share of the
    marks, 0 to 1) in points."""

    def variant(rng: random.Random):
        cases = draw(rng)
        share = share_for(cases)

        def score(data: object) -> tuple[float, str]:
            got, line = share(data)
            return round(question.max_score * got, 2), line

        return replace(question, collect=calls_for(cases), score=score, variant=None)

    return replace(question, variant=variant)
