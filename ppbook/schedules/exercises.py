"""Check functions for the exercises of chapter 2 (``notebooks/02_schedules.ipynb``).

Each ``check_*`` prints whether the answer is right, with a hint when it is not, and
returns True when it is right (None as the answer: not answered yet). The right answers
come from the simulator, not from a stored number.
"""

from __future__ import annotations

import math

from ppbook.costs import Costs
from ppbook.schedule import Schedule
from ppbook.schedules.basic import gpipe
from ppbook.schedules.interleaved import interleaved_1f1b
from ppbook.simulate import simulate


def check_gpipe_with_comm(answer: float | None) -> bool:
    """Exercise 1: GPipe, p = 4, m = 8, F = 1, B = 2, transfer time c = 0.25."""
    if answer is None:
        return say("Replace None with your answer.", False)
    truth = simulate(gpipe(4, 8), Costs(F=1, B=2, comm=0.25)).makespan
    if math.isclose(answer, truth):
        return say(f"Right: {truth}.", True)
    if math.isclose(answer, (8 + 4 - 1) * 3):
        return say("That is the makespan without communication: count the transfers.", False)
    side = "small" if answer < truth else "large"
    return say(
        f"Too {side} by {abs(answer - truth):g}: how many transfers are on the critical path?",
        False,
    )


def check_smallest_m(answer: int | None, p: int = 4, v: int = 2, target: float = 0.10) -> bool:
    """Exercise 2: smallest m for interleaved 1F1B (p = 4, v = 2) with f = idle/total < 10%."""
    if answer is None:
        return say("Replace None with your answer.", False)
    if answer < p or answer % p:
        return say(f"Interleaved 1F1B needs m to be a positive multiple of p = {p}.", False)

    def fraction(m: int) -> float:
        return simulate(interleaved_1f1b(p, m, v), Costs(F=1 / v, B=2 / v)).bubble_fraction

    f = fraction(answer)
    if f >= target:
        return say(
            f"At m = {answer} the bubble fraction is f = {f:.3f}, not below {target}.", False
        )
    smaller = answer - p
    if smaller >= p and fraction(smaller) < target:
        return say(
            f"m = {answer} works, but so does m = {smaller} (f = {fraction(smaller):.3f}).", False
        )
    return say(f"Right: m = {answer} gives f = {f:.3f}.", True)


def check_one_f_one_b_by_hand(rows: list[list[str]] | None, p: int = 2, m: int = 3) -> bool:
    """Exercise 3: write 1F1B for p = 2, m = 3 as rows of action strings."""
    if rows is None:
        return say("Replace None with your rows.", False)
    try:
        run = simulate(Schedule.from_strings(rows, num_microbatches=m), Costs(F=1, B=2))
    except ValueError as error:
        return say(f"Not a valid schedule: {error}", False)
    if run.num_ranks != p:
        return say(f"Expected {p} rows (one per rank), got {run.num_ranks}.", False)
    if not math.isclose(run.makespan, (m + p - 1) * 3):
        return say(f"Makespan {run.makespan}; 1F1B takes (m+p-1)(F+B) = {(m + p - 1) * 3}.", False)
    if run.peak_activations(0) > min(p, m):
        held = run.peak_activations(0)
        return say(f"Rank 0 holds {held} activations at once; 1F1B holds only min(p, m).", False)
    return say("Right: a valid 1F1B schedule.", True)


def say(text: str, right: bool) -> bool:
    """Print the verdict or hint for the reader; return whether the answer is right."""
    print(text)
    return right
