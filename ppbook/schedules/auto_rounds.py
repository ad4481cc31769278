"""One candidate of ``zb-auto`` (:mod:`ppbook.schedules.auto`): every rank's order, built
round by round and timed while it is built (Zero Bubble PP, arXiv:2401.10241, sec. 3).

A round places one F on each rank from the first to the last, then one I on each rank from
the last to the first, so that whatever an action waits for is placed, and timed, before
it (each pass starts as soon as its rank is free and its input has arrived, as
:func:`ppbook.simulate.simulate` times it). :class:`Rounds` builds either the greedy (the
paper's heuristic, written anew) or one member of the hand-written family of ZB-H1 and
ZB-H2 (given warm-ups and W delays):

- warm-up: rank r runs as many forwards as fit, within the memory limit, before the
  gradient of its first micro-batch comes back;
- steady state: one forward and one input-gradient pass per round; before each, W passes
  fill the wait for its input when they fit in it, and when the rank's memory is full a W
  runs first to free what its activation still holds;
- cool-down: the weight passes left over run at the end.

Memory is counted as :class:`~ppbook.timeline.Timeline` counts it: an activation whole
from its F to its I, then the share w (``Costs.w_memory``) until its W; ``share`` is w as the
fraction (n, d) that the float is (:func:`exact_share`, computed once per schedule), so
that :meth:`Rounds.fits` and :func:`most_waiting` decide the limit exactly, in integers.
"""

from __future__ import annotations


class Rounds:
    """One candidate's order for every rank, timed while it is built.

    ``adaptive`` is ``(stop_before_gap, overrun, cap)``: the greedy above. ``fixed`` is
    ``(warmup, delay)``: the hand-written family, rank r warming up with ``warmup[r]``
    forwards and keeping ``delay[r]`` weight passes postponed. Per rank: ``nf``, ``ni``,
    ``nw`` passes of each kind placed, ``free`` the end of its last pass, ``idle`` its wait
    since its first forward; ``over`` whether some rank ever held more than the limit
    (whole activations until I, the share w = n / d until W); ``f_end[r * m + j]`` and
    ``i_end[r * m + j]`` the end of F and I of micro-batch j on rank r.
    """

    def __init__(self, p, m, limit, cost, comm, share, adaptive=None, fixed=None):
        self.p, self.m, self.limit, self.comm, self.share = p, m, limit, comm, share
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
        """Whether ``whole`` activations and rank r's waiting W passes fit in the limit
        (n * waiting <= (K - whole) * d, with w = n / d exactly)."""
        n, d = self.share
        return n * (self.ni[r] - self.nw[r]) <= (self.limit - whole) * d

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

    def build(self) -> Rounds:
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


def exact_share(kept: float) -> tuple[int, int]:
    """The share w = ``kept`` of an activation a waiting W holds, as the fraction (n, d)
    that the float is exactly."""
    return float(kept).as_integer_ratio()


def most_waiting(room: int, share: tuple[int, int], m: int) -> int:
    """How many of m weight passes, each holding w = n / d (``share``), fit in ``room``
    activations."""
    n, d = share
    if n * m <= room * d:
        return m
    return room * d // n
