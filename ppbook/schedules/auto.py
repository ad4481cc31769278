"""Automatic zero-bubble schedules under a memory limit (Zero Bubble PP, arXiv:2401.10241, sec. 3).

``zb_auto(p, m, costs, memory_limit=K)`` builds a one-stage-per-rank schedule of F, I and W
passes (the paper's B is ``I`` here) for the given per-stage costs and transfer time, in
which no rank ever holds more than K micro-batch activations, counted as
:class:`~ppbook.timeline.Timeline` counts them: whole from the start of a stage's F to the
end of its I, and the share w = ``costs.w_memory`` from there to the end of its W (the
paper's M_W / M_B, its Table 1: W needs only the inputs and output gradients of the
linear layers; w = 1, the default, holds it whole until W). The paper's ZB-1p is K = p,
its ZB-2p is K = 2p, both with its w.

The paper's heuristic, written anew: a list scheduler that builds every rank's order while
timing it, round by round (:mod:`ppbook.schedules.auto_rounds`): warm-up forwards that
fill the wait for the first gradient within the limit, then forward / input-gradient
pairs with W passes filling the waits, or run first when memory is full.

Eight variants (whether the warm-up stops before a forward that would leave a gap, whether
a W may overrun a short wait, and a cap of 2(p-1-r) warm-up forwards) are built, and so is
the hand-written family of ZB-H1 and ZB-H2 (rank r warms up with n_r forwards and runs each
W d_r pairs late, n_r + 1 + w d_r <= K), ZB-H2 fitted to the costs among them. The best
by (longest rank span, makespan) is kept: the paper's bubble rate is measured on the
longest span. ZB-H1 and ZB-H2 are themselves candidates whenever they fit the limit, and
the result is no slower than either on either measure (when none of these is, a
hill-climb over the family looks for one: :func:`zb_auto` says what is kept if it finds
none).

How low the span can go: :func:`zb_span_lower_bound`. With w = 1 a postponed W is as
dear as a waiting forward, and at K = 2p no schedule reaches the paper's ZB-2p rates; with
the paper's w (about 0.37 to 0.43 for its models) this scheduler beats or equals them in
eleven of its twelve configurations and comes within 0.0005 in the last
(``tests/test_zero_bubble_paper.py``, ``data/README.md``).
"""

from __future__ import annotations

from functools import partial

from ppbook.costs import Costs
from ppbook.pipeline_schedule import Action, Schedule
from ppbook.schedules.auto_rounds import ADAPTIVE, Rounds, exact_share, most_waiting
from ppbook.schedules.rules import check_counts, check_int

_as_action = partial(tuple.__new__, Action)  # (stage, kind, microbatch) -> Action, fast
_TOLERANCE = 1e-9  # relative: sums of the same costs in another order differ in the last bits


def _hand_written(p: int, m: int, limit: int, cost: dict, comm: float, share: tuple[int, int]):
    """(name, warm-up, W delay) of ZB-H1, ZB-H2 (m >= 2p-1), and the same shape with the
    warm-up of 1F1B, of ZB-H2, and of the forwards that fill the wait for the first
    gradient under these costs, each W postponed as far as the limit allows; and ZB-H2
    fitted to these costs: the warm-up of ZB-H2 with one more forward on all but the last
    four ranks, or the one that fills the wait, and rank r's W late by as many W passes as
    fill sum_{q<r} (F_q + I_q + 2c), the lead of its steady state over rank 0's (2r at
    F = I = W, no transfer time: ZB-H2's), or 10% or 20% more (slack for the waits that
    this estimate misses: on the paper's costs the best of these in most configurations)."""
    yield "zb-h1", [p - 1 - r for r in range(p)], list(range(p))
    if m >= 2 * p - 1:
        yield "zb-h2", [2 * (p - 1 - r) for r in range(p)], [2 * r for r in range(p)]
    fill = []
    for r in range(p):
        wait = sum(cost["F"][r + 1 :]) + sum(cost["I"][r + 1 :]) + 2 * (p - 1 - r) * comm
        fill.append(int(wait // cost["F"][r]) if cost["F"][r] else m)
    for warmup in ([p - 1 - r for r in range(p)], [2 * (p - 1 - r) for r in range(p)], fill):
        warm = _falling(warmup, limit, m)
        yield "family", warm, [_latest(limit, w, share, m) for w in warm]
    lead = [0.0]  # lead[r]: sum over q < r of F_q + I_q + 2c
    for r in range(p - 1):
        lead.append(lead[-1] + cost["F"][r] + cost["I"][r] + 2 * comm)
    for warmup in ([2 * (p - 1 - r) + (r < p - 4) for r in range(p)], fill):
        warm = _falling(warmup, limit, m)
        latest = [_latest(limit, w, share, m) for w in warm]
        for slack in (1.0, 1.1, 1.2):
            delay = [
                min(latest[r], round(slack * lead[r] / cost["W"][r])) if cost["W"][r] else latest[r]
                for r in range(p)
            ]
            yield "family", warm, delay


def _falling(warmup: list[int], limit: int, m: int) -> list[int]:
    """Warm-up forwards within the limit (all held whole), never rising from rank to rank."""
    warm = [min(warmup[0], limit - 1, m - 1)]
    for w in warmup[1:]:
        warm.append(min(w, warm[-1]))
    return warm


def _latest(limit: int, warm: int, share: tuple[int, int], m: int) -> int:
    """The most W passes a rank with ``warm`` warm-up forwards may keep waiting: each of
    them holds w = n / d (``share``) of an activation, beside the warm + 1 held whole."""
    if warm + 1 > limit:
        return -1  # not even the warm-up fits
    return most_waiting(limit - 1 - warm, share, m)


def _search(p, m, limit, cost, comm, share, start, goal) -> Rounds | None:
    """Hill-climb the hand-written family from ``start`` (warm-up, delay), one rank's w_r or
    d_r by one at a time, to a schedule within the limit and no slower than ``goal`` (span,
    makespan) on both; None if none is found within a budget of some 400,000 placed passes.

    Needed only where neither ZB-H1 nor ZB-H2 nor the greedy is as fast as both on both
    measures (ZB-H1 spans more, ZB-H2 ends later: lopsided per-stage costs)."""

    def excess(rounds):
        span, makespan = rounds.measures()
        return max(0.0, span - goal[0]) + max(0.0, makespan - goal[1])

    budget = max(8, 400_000 // (3 * p * m))
    warm, delay = list(start[0]), list(start[1])
    current = Rounds(p, m, limit, cost, comm, share, fixed=(warm, delay)).build()
    worst = excess(current)
    while budget > 0 and not _no_slower(current.measures(), goal):
        for r, which, step in ((r, k, s) for r in range(p) for k in (1, 0) for s in (1, -1)):
            trial = [list(warm), list(delay)]
            trial[which][r] += step
            if trial[which][r] < 0 or trial[1][r] > _latest(limit, trial[0][r], share, m):
                continue
            budget -= 1
            rounds = Rounds(p, m, limit, cost, comm, share, fixed=trial).build()
            if not rounds.over and excess(rounds) < worst:
                (warm, delay), current, worst = trial, rounds, excess(rounds)
                break
            if budget <= 0:
                break
        else:
            break  # no move helps
    return current if _no_slower(current.measures(), goal) else None


def _no_slower(candidate: tuple[float, float], reference: tuple[float, float]) -> bool:
    return all(c <= r * (1 + _TOLERANCE) for c, r in zip(candidate, reference, strict=True))


def _arguments(name, p, m, costs, memory_limit):
    p, m = check_counts(name, p, m, passes=3)
    if memory_limit is None:
        limit = p
    else:
        limit = check_int(name, "memory_limit (activations per rank)", memory_limit)
    if costs is None:
        costs = Costs()
    elif not isinstance(costs, Costs):
        raise ValueError(
            f"{name} needs costs to be a ppbook.costs.Costs, got {type(costs).__name__}; "
            "for example Costs(F=1, I=1, W=1)"
        )
    return p, m, costs, limit


def zb_auto(
    num_stages: int,
    num_microbatches: int,
    costs: Costs | None = None,
    memory_limit: int | None = None,
) -> Schedule:
    """An automatic zero-bubble schedule (Zero Bubble PP, arXiv:2401.10241, sec. 3).

    ``costs`` gives F, I and W per stage, the transfer time and ``w_memory`` (default
    ``Costs()``, the simulator's default: F = 1 and B = 2, so I = W = 1, no transfer time,
    w = 1); ``memory_limit`` K is the most micro-batch activations of one stage a rank may
    hold at any instant, an integer >= 1 (default p, the paper's ZB-1p; ZB-2p is 2p), each
    counted whole until its I and as the share w until its W, as the Timeline of the same
    costs counts them. The schedule is built for these costs: simulate it with the same
    ones. Any m >= 1.

    Its longest rank span is never above ZB-H1's when ZB-H1 fits the limit (always when
    K >= p), nor above ZB-H2's when m >= 2p-1 and K >= 2p-1; nor is its makespan, whenever
    a schedule it tries manages both (the tests find one for every cost that is the same
    on every stage). Where per-stage costs make ZB-H1 end sooner and ZB-H2 span less and
    none does, it is no slower on either measure than the one that spans less. Example:
    at F = I = W = 1 with no transfer time, m >= 2p-1 and K = 2p-1, every rank's span is
    3m: the Zero Bubble paper's bubble rate 0 (ZB-H2's parallelogram).
    """
    p, m, costs, limit = _arguments("zb-auto", num_stages, num_microbatches, costs, memory_limit)
    cost, comm, share = costs.per_stage(p), costs.transfer, exact_share(costs.w_memory)
    candidates, references, starts = [], [], []
    for adaptive in ADAPTIVE:
        candidates.append(Rounds(p, m, limit, cost, comm, share, adaptive=adaptive).build())
    tried = set()
    for name, warmup, delay in _hand_written(p, m, limit, cost, comm, share):
        key = (tuple(min(w, m - 1) for w in warmup), tuple(min(d, m) for d in delay))
        if key in tried:  # the same order as a member built before
            continue
        tried.add(key)
        rounds = Rounds(p, m, limit, cost, comm, share, fixed=(warmup, delay)).build()
        if not rounds.over:
            candidates.append(rounds)
            if name != "family":
                references.append(rounds.measures())
                starts.append((warmup, delay))
    # ZB-H1 and ZB-H2 where they fit: be no slower than either on either measure
    goal = tuple(min((r[k] for r in references), default=float("inf")) for k in (0, 1))
    fair = [c for c in candidates if _no_slower(c.measures(), goal)]
    for start in starts if not fair else ():
        found = _search(p, m, limit, cost, comm, share, start, goal)
        if found:
            fair.append(found)
            break
    if not fair:  # the measures pull apart (lopsided stages): no slower than the shorter span
        floor = min(references)
        fair = [c for c in candidates if _no_slower(c.measures(), floor)]
    best = min(fair, key=Rounds.measures)
    actions = [list(map(_as_action, row)) for row in best.rows]
    return Schedule(actions, tuple(range(p)), m, name="zb-auto")


def zb_span_lower_bound(
    num_stages: int,
    num_microbatches: int,
    costs: Costs | None = None,
    memory_limit: int | None = None,
) -> float:
    """A lower bound on the longest rank span of every schedule with one stage per rank in
    which no rank ever holds more than K activations (each held whole from its F to its I,
    and the share w = ``costs.w_memory`` of it from there to its W).

    A rank's span is at least its work, m(F_r + I_r + W_r), plus two waits:

    - warm-up: rank r's first I cannot start before micro-batch 0 has gone down to the
      last rank and its gradient back, sum_{q>=r} F_q + sum_{q>r} I_q + 2(p-1-r)c after
      rank r starts, and until then it can only run forwards, each held whole: at most
      min(K, m) of them. The rest of that time it idles;
    - cool-down: for ranks r < s, rank r starts at least sum_{q=r}^{s-1} (F_q + c) before
      rank s; rank s's last I ends at least m(F_s + I_s) + (m - n) W_s after rank s
      starts, where n = min(m, floor(K / w)) (m when w = 0) is the most weight passes that
      can still wait after it (then each holds w and nothing else is held); its gradient
      reaches rank r sum_{q=r}^{s-1} (I_q + c) later, and rank r still runs that I's W. So
      span_r >= sum_{q=r}^{s-1} (F_q + I_q + 2c) + m(F_s + I_s) + (m - n) W_s + W_r.

    Arguments as :func:`zb_auto`'s. At F = I = W = 1 with no transfer time and m >= K
    this is max(3m, 3m + 2(p-1) - (K-1)) for every w (the warm-up wait, which the share w
    cannot shorten; with w = 1 the cool-down gives the same): ZB-H1's 3m + p - 1 at K = p,
    and ZB-H2's 3m (no bubble) at K = 2p-1.
    """
    p, m, costs, limit = _arguments(
        "zb_span_lower_bound", num_stages, num_microbatches, costs, memory_limit
    )
    cost, c, share = costs.per_stage(p), costs.transfer, exact_share(costs.w_memory)
    F, I, W = cost["F"], cost["I"], cost["W"]  # noqa: E741 (PyTorch's names)
    work = [m * (F[r] + I[r] + W[r]) for r in range(p)]
    bound, trip = max(work), F[p - 1]  # trip: from rank r's first F to its first I
    for r in range(p - 2, -1, -1):
        trip += F[r] + I[r + 1] + 2 * c
        bound = max(bound, work[r] + trip - min(limit, m) * F[r])
    waiting = most_waiting(limit, share, m)
    for s in range(1, p):
        tail = m * (F[s] + I[s]) + (m - waiting) * W[s]
        path = 0.0  # sum over q = r .. s-1 of F_q + I_q + 2c
        for r in range(s - 1, -1, -1):
            path += F[r] + I[r] + 2 * c
            bound = max(bound, path + tail + W[r])
    return bound
