"""The questions of the grader's fixture assignment ``00_fixture`` (tests only): square(n)
and hypotenuse(3, 4), scored here against answers computed here."""

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    name: str
    max_score: float
    collect: str
    score: Callable[[object], tuple[float, str]]
    timeout: float = 5


def _squares(data) -> tuple[float, str]:
    for n, got in zip(range(-3, 4), data, strict=True):
        if got != n * n:
            return 0.0, f"square({n}) should be {n * n}, got {got!r}"
    return 2.0, "square is right for -3..3"


def _hypotenuse(data) -> tuple[float, str]:
    if isinstance(data, int | float) and math.isclose(data, 5.0):
        return 3.0, "hypotenuse(3, 4) = 5"
    return 0.0, f"hypotenuse(3, 4) should be 5, got {data!r}"


QUESTIONS = [
    Question("1", 2, "[square(n) for n in range(-3, 4)]", _squares),
    Question("2", 3, "hypotenuse(3, 4)", _hypotenuse),
]
