"""Exercises 9.7 and 9.8 of chapter 9: implement and derive (``notebooks/09_multi_gpu.ipynb``).

- 9.7, a placement of p pipeline ranks on g GPUs, is run on drawn (p, g) and judged by
  what makes it right: every GPU holds p/g ranks, and the 1F1B messages that cross between
  GPUs (counted from the schedule's sends, :func:`crossing_messages`)
  reach the lower bound: messages go only between neighbouring ranks, g groups along the
  chain of ranks leave at least g-1 boundaries between GPUs, and each carries 2m messages
  a step (m activations down, m gradients up).
- 9.8, the clock offset of one round trip and its error bound (NTP, Mills 1991, RFC 1305;
  :mod:`ppbook.runtime.clock`), two sympy expressions in the three times read, is judged by
  the offsets the three times allow: with one-way delays d1, d2 >= 0, the peer's clock reads
  t1 = t0 + d1 + offset and the answer is back at t2 = t0 + d1 + d2, so the offsets
  consistent with (t0, t1, t2) are exactly [t1 - t2, t1 - t0]. The estimate plus or minus
  its bound must be that interval: no larger (a loose bound) and no smaller (a bound the
  true offset can break). Drawn delays show the reader which.
"""

from __future__ import annotations

import random

import sympy as sp

from ppbook.checks import shown
from ppbook.exercises import exercise, right, wrong
from ppbook.runtime.plan import sent_by
from ppbook.schedules import one_f_one_b

# ----- 9.7 ranks on GPUs ------------------------------------------------------------------------


def crossing_messages(gpu_of: list[int], num_microbatches: int = 8) -> int:
    """Messages of one 1F1B step (p = len(gpu_of)) between ranks on different GPUs
    (exercises 9.2 and 9.7)."""
    schedule = one_f_one_b(len(gpu_of), num_microbatches)
    return sum(
        gpu_of[src] != gpu_of[dst]
        for src in range(schedule.num_ranks)
        for dst, _ in sent_by(schedule, src)
    )


PLACEMENT_DRAWS = ((2, 1), (2, 2), (4, 2), (6, 3), (8, 2), (8, 4), (9, 3), (12, 4), (16, 8))
"""(p, g) on which 9.7's placement runs; g divides p."""

_M = 4  # micro-batches of the 1F1B step whose messages are counted


def _placement(answer, p: int, g: int) -> list[int]:
    try:
        made = answer(p, g)
    except Exception as error:  # the reader's code: any failure is a verdict, not a crash
        raise ValueError(
            f"your placement raised {type(error).__name__} at p = {p}, g = {g}: {error}"
        ) from None
    if not isinstance(made, list | tuple) or len(made) != p:
        raise ValueError(
            f"at p = {p}, g = {g} your placement returned {shown(made)}; it should return one "
            f"GPU index per rank, a list of {p}."
        )
    bad = next((x for x in made if isinstance(x, bool) or not isinstance(x, int)), None)
    if bad is not None or not all(0 <= x < g for x in made):
        shown_bad = bad if bad is not None else next(x for x in made if not 0 <= x < g)
        raise ValueError(f"at p = {p}, g = {g} {shown(shown_bad)} is not a GPU from 0 to {g - 1}.")
    return list(made)


@exercise(
    "9.7",
    "Implement place(p, g): a GPU index (0 to g-1) for each of p pipeline ranks, p/g ranks "
    "on every GPU, with as few 1F1B messages between GPUs as possible; the check runs it on "
    "drawn (p, g).",
    kind="implement",
    solution="Give each GPU a block of neighbouring ranks: `def place(p, g): return "
    "[r * g // p for r in range(p)]` (rank r on GPU r // (p/g)). A pipeline sends only "
    "between neighbouring ranks, so only the g-1 boundaries between blocks cross GPUs, each "
    "with m activations and m gradients a step: 2m(g-1) messages, and no balanced placement "
    "does better, since the g GPUs' ranks must change GPU at least g-1 times along the "
    "chain. The runtime's round robin, r % g, crosses at every one of the p-1 boundaries.",
    answer_name="answer_7",
)
def _place(answer):
    if not callable(answer):
        return wrong(f"this exercise wants a function place(p, g), got {shown(answer)}.")
    for p, g in PLACEMENT_DRAWS:
        gpu_of = _placement(answer, p, g)
        crowded = max(range(g), key=gpu_of.count)
        if gpu_of.count(crowded) != p // g:
            return wrong(
                f"at p = {p}, g = {g} GPU {crowded} holds {gpu_of.count(crowded)} ranks; "
                f"each GPU should hold p/g = {p // g}.",
                "balance the ranks: their memory and compute share the GPU.",
            )
        crossing, fewest = crossing_messages(gpu_of, _M), 2 * _M * (g - 1)
        if crossing > fewest:
            changes = sum(a != b for a, b in zip(gpu_of, gpu_of[1:], strict=False))
            return wrong(
                f"at p = {p}, g = {g} your placement {gpu_of} changes GPU at {changes} of the "
                f"{p - 1} boundaries between neighbouring ranks: {crossing} 1F1B messages "
                f"(m = {_M}) cross between GPUs a step, and {fewest} is possible.",
                "a pipeline's messages go only between neighbouring ranks.",
            )
    return right(
        f"on {len(PLACEMENT_DRAWS)} drawn (p, g) every GPU holds p/g ranks and only "
        "2m(g-1) messages cross between GPUs, the fewest any balanced placement allows."
    )


# ----- 9.8 the offset of one round trip and its bound --------------------------------------------

_TIMES = ("t0", "t1", "t2")


def round_trips(seed: int = 98) -> list[dict[str, float]]:
    """Drawn round trips: (t0, d1, d2, offset) and the three times they make."""
    rng = random.Random(seed)
    trips = []
    for _ in range(8):
        t0, d1, d2 = rng.uniform(0, 100), rng.uniform(0, 2), rng.uniform(0, 2)
        offset = rng.uniform(-5, 5)
        trips.append(dict(t0=t0, t1=t0 + d1 + offset, t2=t0 + d1 + d2, offset=offset))
    return trips


def _pair(answer: object) -> tuple[sp.Expr, sp.Expr]:
    if (
        not isinstance(answer, tuple | list)
        or len(answer) != 2
        or not all(isinstance(x, sp.Expr) for x in answer)
    ):
        raise ValueError(
            "this exercise wants two sympy expressions in t0, t1, t2: (offset, bound), got "
            f"{shown(answer)}."
        )
    for expr in answer:
        unknown = sorted(str(x) for x in expr.free_symbols if str(x) not in _TIMES)
        if unknown:
            raise ValueError(
                f"the expressions use {', '.join(unknown)}; write them in t0, t1 and t2 only."
            )
    return answer[0], answer[1]


def _at(expr: sp.Expr, trip: dict[str, float]) -> float:
    return float(expr.subs({x: trip[str(x)] for x in expr.free_symbols}))


@exercise(
    "9.8",
    "Derive, as sympy expressions in t0 (rank 0 sends), t1 (the peer's stamp) and t2 (the "
    "answer back on rank 0), the peer's clock offset and the bound on its error, the "
    "smallest bound that holds whatever the two one-way delays are.",
    kind="derive",
    solution="With one-way delays d1, d2 >= 0 and offset o: t1 = t0 + d1 + o and "
    "t2 = t0 + d1 + d2, so o = t1 - t0 - d1 with 0 <= d1 <= t2 - t0: every offset in "
    "[t1 - t2, t1 - t0] is possible and no other. The estimate that errs least in the worst "
    "case is the middle, `t1 - (t0 + t2)/2`, and its bound half the width, "
    "`(t2 - t0)/2`, half the round trip: NTP's estimate (`ppbook.runtime.clock`). Exercise "
    "9.6 is this at t0 = 10.0, t1 = 12.0, t2 = 10.6: 1.7 ms, within 0.3 ms.",
    answer_name="answer_8",
)
def _offset_and_bound(answer):
    estimate, bound = _pair(answer)
    for trip in round_trips():
        guess, width = _at(estimate, trip), _at(bound, trip)
        low, high = trip["t1"] - trip["t2"], trip["t1"] - trip["t0"]  # the offsets allowed
        if abs(guess - trip["offset"]) > width + 1e-9:
            return wrong(
                f"at t0 = {trip['t0']:.4g}, t1 = {trip['t1']:.4g}, t2 = {trip['t2']:.4g} the "
                f"true offset was {trip['offset']:.4g}, {abs(guess - trip['offset']):.4g} from "
                f"your estimate {guess:.4g}: more than your bound {width:.4g}.",
                "which offsets do the three times allow, for delays d1, d2 >= 0?",
            )
        if guess - width > low + 1e-9 or guess + width < high - 1e-9:
            return wrong(
                f"at t0 = {trip['t0']:.4g}, t1 = {trip['t1']:.4g}, t2 = {trip['t2']:.4g} any "
                f"offset from {low:.4g} to {high:.4g} is possible, but your estimate "
                f"{guess:.4g} +- {width:.4g} leaves some out: a delay could break the bound.",
                "put the estimate where the worst case is smallest.",
            )
        if guess - width < low - 1e-9 or guess + width > high + 1e-9:
            return wrong(
                f"at t0 = {trip['t0']:.4g}, t1 = {trip['t1']:.4g}, t2 = {trip['t2']:.4g} the "
                f"offset lies in [{low:.4g}, {high:.4g}], but your estimate {guess:.4g} +- "
                f"{width:.4g} spans more: the bound is larger than the worst case.",
                "the smallest bound that always holds is half the width of what is possible.",
            )
    return right(
        f"on {len(round_trips())} drawn round trips your estimate +- bound is exactly the set "
        "of offsets the three times allow: the true offset is always inside, and no smaller "
        "bound would be."
    )
