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
timing it, micro-batch by micro-batch. A round places one F on each rank from the first to
the last, then one I on each rank from the last to the first, so that whatever an action
waits for is placed, and timed, before it (each pass starts as soon as its rank is free and
its input has arrived, as :func:`ppbook.simulate.simulate` times it):

- warm-up: rank r runs as many forwards as fit, within the memory limit, before the
  gradient of its first micro-batch comes back;
- steady state: one forward and one input-gradient pass per round; before each, W passes
  fill the wait for its input when they fit in it, and when the rank's memory is full a W
  runs first to free an activation;
- cool-down: the weight passes left over run at the end.

Eight variants (whether the warm-up stops before a forward that would leave a gap, whether
a W may overrun a short wait, and a cap of 2(p-1-r) warm-up forwards) are built, and so is
the hand-written family of ZB-H1 and ZB-H2 (rank r warms up with n_r forwards and runs each
W d_r pairs late, n_r + 1 + w d_r <= K). The best by (longest rank span, makespan) is kept:
the paper's bubble rate is measured on the longest span. ZB-H1 and ZB-H2 are themselves
candidates whenever they fit the limit, and the result is no slower than either on either
measure (when none of these is, a hill-climb over the family looks for one:
:func:`zb_auto` says what is kept if it finds none).

How low the span can go: :func:`zb_span_lower_bound`. With w = 1 a postponed W is as
dear as a waiting forward, and at K = 2p no schedule reaches the paper's ZB-2p rates; with
the paper's w (about 0.37 to 0.43 for its models) this scheduler matches or beats them
(``tests/test_zero_bubble_paper.py``).
"""

from __future__ import annotations

from fractions import Fraction
from functools import partial

from ppbook.costs import Costs
from ppbook.schedule import Action, Schedule
from ppbook.schedules.rules import check_counts, check_int

_as_action = partial(tuple.__new__, Action)  # (stage, kind, microbatch) -> Action, fast
_TOLERANCE = 1e-9  # relative: sums of the same costs in another order differ in the last bits


class _Rounds:
    """One candidate's order for every rank, timed while it is built.

    ``adaptive`` is ``(stop_before_gap, overrun, cap)``: the greedy above. ``fixed`` is
    ``(warmup, delay)``: the hand-written family, rank r warming up with ``warmup[r]``
    forwards and keeping ``delay[r]`` weight passes postponed. Per rank: ``nf``, ``ni``,
    ``nw`` passes of each kind placed, ``free`` the end of its last pass, ``idle`` its wait
    since its first forward; ``over`` whether some rank ever held more than the limit
    (whole activations until I, the share ``kept`` until W); ``f_end[r * m + j]`` and
    ``i_end[r * m + j]`` the end of F and I of micro-batch j on rank r.
    """

    def __init__(self, p, m, limit, cost, comm, kept, adaptive=None, fixed=None):
        self.p, self.m, self.limit, self.comm, self.kept = p, m, limit, comm, kept
        self.adaptive, self.fixed = adaptive, fixed
        self.F, self.I, self.W = cost["F"], cost["I"], cost["W"]
        self.nf, self.ni, self.nw, self.over = [0] * p, [0] * p, [0] * p, False
        self.free, self.idle, self.first = [0.0] * p, [0.0] * p, [0.0] * p
        self.most_idle = 0.0
        self.f_end, self.i_end = [0.0] * (p * m), [0.0] * (p * m)
        self.rows: list[list[tuple[int, str, int]]] = [[] for _ in range(p)]

    # ----- placing one pass -------------------------------------------------------------

    def _run(self, r: int, kind: str, j: int, ready: float, cost: float) -> float:
        start, row = self.free[r], self.rows[r]
        if not row:
            start = self.first[r] = ready if ready > start else start
        elif ready > start:  # the rank waits for its input
            idle = self.idle[r] = self.idle[r] + ready - start
            if idle > self.most_idle:
                self.most_idle = idle
            start = ready
        end = self.free[r] = start + cost
        row.append((r, kind, j))
        return end

    def forward(self, r: int) -> None:
        j = self.nf[r]
        ready = self.f_end[(r - 1) * self.m + j] + self.comm if r else 0.0
        self.f_end[r * self.m + j] = self._run(r, "F", j, ready, self.F[r])
        self.nf[r] = j + 1
        if not self.fits(r, j + 1 - self.ni[r]):
            self.over = True

    def fits(self, r: int, whole: int) -> bool:
        """Whether ``whole`` activations and rank r's waiting W passes fit in the limit."""
        return _fits(whole, self.ni[r] - self.nw[r], self.kept, self.limit)

    def input_grad(self, r: int) -> None:
        j = self.ni[r]
        ready = self.i_end[(r + 1) * self.m + j] + self.comm if r < self.p - 1 else 0.0
        self.i_end[r * self.m + j] = self._run(r, "I", j, ready, self.I[r])
        self.ni[r] = j + 1

    def weight(self, r: int) -> None:
        self._run(r, "W", self.nw[r], 0.0, self.W[r])
        self.nw[r] += 1

    def fill(self, r: int, ready: float) -> None:
        """W passes in the wait for an input due at ``ready``: those that fit, then one that
        overruns it, with ``overrun`` or when waiting would make rank r the one that has
        idled most."""
        w = self.W[r]
        while self.nw[r] < self.ni[r] and self.free[r] + w <= ready:
            self.weight(r)
        if self.nw[r] < self.ni[r] and self.free[r] < ready:
            if self.adaptive[1] or ready - self.free[r] > self.most_idle - self.idle[r]:
                self.weight(r)

    # ----- the phases -------------------------------------------------------------------

    def warmup(self) -> list[int]:
        """Forwards each rank runs before its first I besides its first, never rising from
        rank to rank (so that every forward's input is placed before it)."""
        p, m = self.p, self.m
        if self.fixed:
            extra = [min(w, m - 1) for w in self.fixed[0]]
        else:  # from the last rank up: the forwards that fit before the first gradient
            stop_before_gap, _, cap = self.adaptive
            extra = [0] * p
            back = self.f_end[(p - 1) * m] + self.I[p - 1]  # the last rank's first I ends
            for r in range(p - 2, -1, -1):
                due, t, k = back + self.comm, self.free[r], 0
                most = min(m - 1, self.limit - 1, cap * (p - 1 - r) if cap else m)
                while k < most and not (t + self.F[r] > due if stop_before_gap else t >= due):
                    t += self.F[r]
                    k += 1
                extra[r] = k
                back = max(t, due) + self.I[r]
            for r in range(1, p):  # fall by one a rank, as 1F1B, unless all m are done
                if extra[r] >= extra[r - 1] and 1 + extra[r] < m:
                    extra[r] = max(0, extra[r - 1] - 1)
        for r in range(1, p):
            extra[r] = min(extra[r], extra[r - 1])
        return extra

    def build(self) -> _Rounds:
        p, m, comm = self.p, self.m, self.comm
        for r in range(p):  # warm-up
            self.forward(r)
        for r, extra in enumerate(self.warmup()):
            for _ in range(extra):
                self.forward(r)
        for i in range(m):  # steady state: one F per rank down, one I per rank up
            for r in range(p):
                if i == 0 or self.nf[r] >= m:
                    continue
                if not self.fixed:
                    while self.nw[r] < self.ni[r] and not self.fits(r, 1 + self.nf[r] - self.ni[r]):
                        self.weight(r)  # memory full: a W first
                    if r:
                        self.fill(r, self.f_end[(r - 1) * m + self.nf[r]] + comm)
                self.forward(r)
            for r in range(p - 1, -1, -1):
                if self.fixed:
                    self.input_grad(r)
                    while self.ni[r] - self.nw[r] > self.fixed[1][r]:  # W, d_r pairs late
                        self.weight(r)
                    continue
                if r < p - 1:
                    self.fill(r, self.i_end[(r + 1) * m + i] + comm)
                if r == 0 and self.nf[0] == m:  # nothing waits for rank 0's I: W first
                    while self.nw[0] < self.ni[0]:
                        self.weight(0)
                self.input_grad(r)
        for r in range(p):  # cool-down: the postponed weight passes
            while self.nw[r] < m:
                self.weight(r)
        return self

    def measures(self) -> tuple[float, float]:
        """(longest rank span, makespan)."""
        return max(map(float.__sub__, self.free, self.first)), max(self.free)


ADAPTIVE = [(a, b, cap) for cap in (None, 2) for a in (True, False) for b in (True, False)]
"""The greedy's variants: (stop the warm-up before a forward that would leave a gap before
the first I, let a W overrun a short wait, cap the warm-up at 2(p-1-r) extra forwards)."""


def _hand_written(p: int, m: int, limit: int, cost: dict, comm: float, kept: float):
    """(name, warm-up, W delay) of ZB-H1, ZB-H2 (m >= 2p-1), and the same shape with the
    warm-up of 1F1B, of ZB-H2, and of the forwards that fill the wait for the first
    gradient under these costs, each W postponed as far as the limit allows; and ZB-H2
    fitted to these costs: one more warm-up forward on all but the last four ranks, and
    rank r's W late by as many W passes as fill sum_{q<r} (F_q + I_q + 2c), the lead of
    its steady state over rank 0's (2r at F = I = W, no transfer time: ZB-H2's)."""
    yield "zb-h1", [p - 1 - r for r in range(p)], list(range(p))
    if m >= 2 * p - 1:
        yield "zb-h2", [2 * (p - 1 - r) for r in range(p)], [2 * r for r in range(p)]
    fill = []
    for r in range(p):
        wait = sum(cost["F"][r + 1 :]) + sum(cost["I"][r + 1 :]) + 2 * (p - 1 - r) * comm
        fill.append(int(wait // cost["F"][r]) if cost["F"][r] else m)
    h2_plus = [2 * (p - 1 - r) + (r < p - 4) for r in range(p)]
    for warmup in ([p - 1 - r for r in range(p)], [2 * (p - 1 - r) for r in range(p)], fill):
        warm = _falling(warmup, limit, m)
        yield "family", warm, [_latest(limit, w, kept, m) for w in warm]
    warm, lead, delay = _falling(h2_plus, limit, m), 0.0, []
    for r in range(p):
        latest = _latest(limit, warm[r], kept, m)
        delay.append(min(latest, round(lead / cost["W"][r])) if cost["W"][r] else latest)
        lead += cost["F"][r] + cost["I"][r] + 2 * comm
    yield "family", warm, delay


def _falling(warmup: list[int], limit: int, m: int) -> list[int]:
    """Warm-up forwards within the limit (all held whole), never rising from rank to rank."""
    warm = [min(warmup[0], limit - 1, m - 1)]
    for w in warmup[1:]:
        warm.append(min(w, warm[-1]))
    return warm


def _latest(limit: int, warm: int, kept: float, m: int) -> int:
    """The most W passes a rank with ``warm`` warm-up forwards may keep waiting: each of
    them holds ``kept`` of an activation, beside the warm + 1 held whole."""
    if warm + 1 > limit:
        return -1  # not even the warm-up fits
    return _waiting(limit - 1 - warm, kept, m)


def _waiting(room: int, kept: float, m: int) -> int:
    """How many of m weight passes, each holding ``kept``, fit in ``room`` activations."""
    if _fits(0, m, kept, room):
        return m
    return int(Fraction(room) // Fraction(kept))


def _fits(whole: int, waiting: int, kept: float, limit: int) -> bool:
    """Whether ``whole`` activations and ``waiting`` shares ``kept`` fit in ``limit``,
    decided exactly (a float product first, the exact fraction when it is too close)."""
    room, used = limit - whole, kept * waiting
    if abs(used - room) > 1e-9 * (limit + 1):
        return used < room
    return Fraction(kept) * waiting <= room


def _search(p, m, limit, cost, comm, kept, start, goal) -> _Rounds | None:
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
    current = _Rounds(p, m, limit, cost, comm, kept, fixed=(warm, delay)).build()
    worst = excess(current)
    while budget > 0 and not _no_slower(current.measures(), goal):
        for r, which, step in ((r, k, s) for r in range(p) for k in (1, 0) for s in (1, -1)):
            trial = [list(warm), list(delay)]
            trial[which][r] += step
            if trial[which][r] < 0 or trial[1][r] > _latest(limit, trial[0][r], kept, m):
                continue
            budget -= 1
            rounds = _Rounds(p, m, limit, cost, comm, kept, fixed=trial).build()
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
    cost, comm, kept = costs.per_stage(p), costs.transfer, costs.w_memory
    candidates, references, starts = [], [], []
    for adaptive in ADAPTIVE:
        candidates.append(_Rounds(p, m, limit, cost, comm, kept, adaptive=adaptive).build())
    for name, warmup, delay in _hand_written(p, m, limit, cost, comm, kept):
        rounds = _Rounds(p, m, limit, cost, comm, kept, fixed=(warmup, delay)).build()
        if not rounds.over:
            candidates.append(rounds)
            if name != "family":
                references.append(rounds.measures())
                starts.append((warmup, delay))
    # ZB-H1 and ZB-H2 where they fit: be no slower than either on either measure
    goal = tuple(min((r[k] for r in references), default=float("inf")) for k in (0, 1))
    fair = [c for c in candidates if _no_slower(c.measures(), goal)]
    for start in starts if not fair else ():
        found = _search(p, m, limit, cost, comm, kept, start, goal)
        if found:
            fair.append(found)
            break
    if not fair:  # the measures pull apart (lopsided stages): no slower than the shorter span
        floor = min(references)
        fair = [c for c in candidates if _no_slower(c.measures(), floor)]
    best = min(fair, key=_Rounds.measures)
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
    cost, c, kept = costs.per_stage(p), costs.transfer, costs.w_memory
    F, I, W = cost["F"], cost["I"], cost["W"]  # noqa: E741 (PyTorch's names)
    work = [m * (F[r] + I[r] + W[r]) for r in range(p)]
    bound, trip = max(work), F[p - 1]  # trip: from rank r's first F to its first I
    for r in range(p - 2, -1, -1):
        trip += F[r] + I[r + 1] + 2 * c
        bound = max(bound, work[r] + trip - min(limit, m) * F[r])
    waiting = _waiting(limit, kept, m)
    for s in range(1, p):
        tail = m * (F[s] + I[s]) + (m - waiting) * W[s]
        path = 0.0  # sum over q = r .. s-1 of F_q + I_q + 2c
        for r in range(s - 1, -1, -1):
            path += F[r] + I[r] + 2 * c
            bound = max(bound, path + tail + W[r])
    return bound
