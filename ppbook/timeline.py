"""The one timeline type: what each rank computed and when, simulated or measured.

The simulator (:mod:`ppbook.simulate`) and the torch runtime (:mod:`ppbook.runtime`)
both return a :class:`Timeline`, so every plot, metric and trace export works on either.

Two names for the bubble (REFERENCES.md), both computed over all ranks:

- ``bubble_fraction`` f = idle time / total time (GPipe's (p-1)/(m+p-1));
- ``bubble_ratio`` r = idle time / compute time (Megatron-LM's and the Ultra-Scale
  Playbook's (p-1)/m).

They describe the same idle time: f = r / (1 + r) exactly.

Activation memory: the activations of (stage, micro-batch) live on the stage's rank from
the start of its ``F`` until the end of its backward ``B``, or of its ``W`` when the backward
is split into ``I`` and ``W`` (with ``w_memory`` < 1, all but that share are freed at the
end of ``I``, the Zero Bubble paper's accounting). Amounts are in micro-batch activations
of a full stage (one device's share of the model): a stage chunk of a schedule with v
chunks per rank counts :attr:`~ppbook.pipeline_schedule.Schedule.chunk_share` = 1/v, so amounts
compare across schedules (with m >= p, the first rank holds p of them under 1F1B and
p + (p-1)/v under interleaved 1F1B). Bytes use the per-stage ``activation_bytes`` when
given.

Times are in :attr:`Timeline.time_unit`: ``"time unit"`` for simulated and closed-form
timelines (costs are unitless), ``"s"`` for measured ones.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from itertools import accumulate

from ppbook.checks import as_count, finite_result
from ppbook.pipeline_schedule import Action, Schedule, Step

ACTIVATION_UNIT = "micro-batch activations of a full stage"
"""The unit of :meth:`Timeline.memory` and :meth:`Timeline.peak_activations`."""

_KIND = operator.attrgetter("kind")
_HELD = {"F": 1, "I": 0, "B": -1, "W": -1}  # stage chunks an action allocates (+) or frees (-)


@dataclass(frozen=True, slots=True)
class Interval:
    """One action a rank computed, from ``start`` to ``end``."""

    action: Step
    start: float
    end: float

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Timeline:
    """Every rank's computed actions, in execution order, plus the schedule they ran.

    ``starts[rank][k]`` and ``ends[rank][k]`` time the k-th action of
    ``schedule.actions[rank]``; :attr:`intervals` gives them as :class:`Interval` records.
    ``source`` says where the times come from: ``"simulated"``, ``"measured"`` or
    ``"closed form"`` (:func:`ppbook.symbolic.gpipe_timeline`). ``time_unit`` says what
    the times count: by default ``"s"`` for a measured timeline and ``"time unit"`` (the
    unit of the costs) otherwise. ``activation_bytes[stage]`` is what one micro-batch's
    activations take on ``stage``, when known.

    ``w_memory`` is the share of a micro-batch's activations a split backward keeps from
    the end of its ``I`` to the end of its ``W`` (:class:`ppbook.costs.Costs`; 1: all).

    ``steps`` training steps ran one after the other (:func:`ppbook.simulate.simulate`):
    micro-batch j of step k is ``k * microbatches_per_step + j``, and ``sync`` says what
    joined the steps (``"optimizer"``, ``"none"``; None when nothing said).
    """

    schedule: Schedule
    starts: tuple[tuple[float, ...], ...]
    ends: tuple[tuple[float, ...], ...]
    activation_bytes: list[float] | None = None
    source: str = "simulated"
    time_unit: str | None = None
    steps: int = 1
    sync: str | None = None
    w_memory: float = 1.0

    def __post_init__(self) -> None:
        lengths = [len(row) for row in self.schedule.actions]
        if [len(r) for r in self.starts] != lengths or [len(r) for r in self.ends] != lengths:
            raise ValueError("a timeline needs one start and one end per action of each rank")
        if self.time_unit is None:
            unit = "s" if self.source == "measured" else "time unit"
            object.__setattr__(self, "time_unit", unit)
        m = self.schedule.num_microbatches
        object.__setattr__(self, "steps", as_count(self.steps, "steps", "a timeline"))
        if m % self.steps:
            raise ValueError(
                f"a timeline of {self.steps} steps needs a multiple of {self.steps} "
                f"micro-batches, got {m}"
            )

    @classmethod
    def from_arrays(cls, schedule: Schedule, starts, ends, **kwargs) -> Timeline:
        """Build from per-rank lists of start and end times."""
        return cls(schedule, tuple(map(tuple, starts)), tuple(map(tuple, ends)), **kwargs)

    @cached_property
    def intervals(self) -> tuple[tuple[Interval, ...], ...]:
        """Per rank, an :class:`Interval` for each action, in execution order."""
        return tuple(
            tuple(map(Interval, row, s, e))
            for row, s, e in zip(self.schedule.actions, self.starts, self.ends, strict=True)
        )

    @property
    def num_ranks(self) -> int:
        return len(self.starts)

    @cached_property
    def origin(self) -> float:
        """Time at which the first action starts (0 for a simulation)."""
        return min((row[0] for row in self.starts if row), default=0.0)

    @cached_property
    def makespan(self) -> float:
        """Time from the first start to the last end, over all ranks."""
        last = max((max(row) for row in self.ends if row), default=self.origin)
        return finite_result(last - self.origin, f"the makespan (in {self.time_unit})")

    @cached_property
    def _busy(self) -> tuple[float, ...]:
        return tuple(
            sum(map(operator.sub, ends, starts))
            for starts, ends in zip(self.starts, self.ends, strict=True)
        )

    def busy(self, rank: int) -> float:
        """Time ``rank`` spent computing."""
        return self._busy[rank]

    def idle(self, rank: int) -> float:
        """Time ``rank`` spent idle within the makespan."""
        return self.makespan - self.busy(rank)

    def idle_gaps(self, rank: int) -> list[tuple[float, float]]:
        """Idle (start, end) gaps of ``rank`` within the makespan, in time order."""
        gaps, t = [], self.origin
        for start, end in zip(self.starts[rank], self.ends[rank], strict=True):
            if start > t:
                gaps.append((t, start))
            t = max(t, end)
        end = self.origin + self.makespan
        if end > t:
            gaps.append((t, end))
        return gaps

    @cached_property
    def total_busy(self) -> float:
        return sum(self._busy)

    @cached_property
    def total_idle(self) -> float:
        return self.num_ranks * self.makespan - self.total_busy

    @property
    def bubble_fraction(self) -> float:
        """f = idle / total time, over all ranks: GPipe's (p-1)/(m+p-1)."""
        total = self.num_ranks * self.makespan
        return self.total_idle / total if total else 0.0

    @property
    def bubble_ratio(self) -> float:
        """r = idle / compute time, over all ranks: Megatron-LM's (p-1)/m."""
        return self.total_idle / self.total_busy if self.total_busy else 0.0

    # ----- steps, spans and the period ---------------------------------------------------

    @property
    def microbatches_per_step(self) -> int:
        """m: the micro-batches of one training step."""
        return self.schedule.num_microbatches // self.steps

    @cached_property
    def _per_step(self) -> tuple[tuple[tuple[float, float, float] | None, ...], ...]:
        """``[step][rank]``: (first start, last end, compute time), None if nothing ran."""
        if self.steps == 1:  # the whole timeline: no pass over the actions in Python
            return (
                tuple(
                    (min(starts), max(ends), busy) if starts else None
                    for starts, ends, busy in zip(self.starts, self.ends, self._busy, strict=True)
                ),
            )
        m = self.microbatches_per_step
        table: list[list[list[float] | None]] = [[None] * self.num_ranks for _ in range(self.steps)]
        for rank, row in enumerate(self.schedule.actions):
            for step, start, end in zip(row, self.starts[rank], self.ends[rank], strict=True):
                k = step.parts[0].microbatch // m
                entry = table[k][rank]
                if entry is None:
                    table[k][rank] = [start, end, end - start]
                else:
                    entry[0] = min(entry[0], start)
                    entry[1] = max(entry[1], end)
                    entry[2] += end - start
        return tuple(tuple(e and tuple(e) for e in ranks) for ranks in table)

    def step_spans(self, step: int = -1) -> list[tuple[float, float] | None]:
        """Per rank, (first start, last end) of its actions in training step ``step``.

        ``step`` counts from 0; negative counts from the end (-1, the default, is the last
        step: the steady state when several steps run). None for a rank with no action.
        """
        if (
            isinstance(step, bool)
            or not isinstance(step, int)
            or not -self.steps <= step < self.steps
        ):
            raise ValueError(
                f"step must be a whole number from {-self.steps} to {self.steps - 1}, got {step!r}"
            )
        return [e and (e[0], e[1]) for e in self._per_step[step]]

    @property
    def rank_spans(self) -> list[float]:
        """Per rank, its span in the last step: last end minus first start (0 if idle).

        A rank that starts late and ends early spans less than the makespan; when the
        optimizer step is post-validated (``sync="none"``) the next step fills the rest.
        """
        return [e[1] - e[0] if e else 0.0 for e in self._per_step[-1]]

    @property
    def zb_bubble_rate(self) -> float:
        """The Zero Bubble paper's bubble rate (arXiv:2401.10241, Table 5), in the last step.

        1 - (most compute of one rank in the step) / (longest rank span): for stages of
        equal cost, 1 - m(F+I+W) / longest span. It counts only the idle time inside the
        longest span, so it is smaller than the bubble fraction f when ranks start at
        different times (ZB-H2) and equal to it when a rank spans the whole step (1F1B).
        """
        last = self._per_step[-1]
        longest = max((e[1] - e[0] for e in last if e), default=0.0)
        compute = max((e[2] for e in last if e), default=0.0)
        return finite_result(1 - compute / longest, "the bubble rate") if longest else 0.0

    @cached_property
    def period(self) -> float:
        """The steady-state step time: the last step's end minus the previous step's end.

        The makespan when one step ran; with ``sync="optimizer"``, exactly one step's
        makespan; with ``sync="none"`` it is shorter when ranks idle at the pipeline's ends.
        """
        if self.steps == 1:
            return self.makespan
        ends = [max((e[1] for e in ranks if e), default=0.0) for ranks in self._per_step]
        return finite_result(ends[-1] - ends[-2], f"the period (in {self.time_unit})")

    @property
    def period_bubble_fraction(self) -> float:
        """f of one steady-state step: 1 - compute per step / (ranks * period)."""
        total = self.num_ranks * self.period
        return (total - self.total_busy / self.steps) / total if total else 0.0

    # ----- activation memory ------------------------------------------------------------

    def memory(self, rank: int, in_bytes: bool = False) -> list[tuple[float, float]]:
        """Activations held by ``rank`` over time: ``(time, amount)`` after each change.

        Amounts are in micro-batch activations of a full stage (:data:`ACTIVATION_UNIT`; a
        stage chunk counts ``schedule.chunk_share``), or bytes with ``in_bytes`` (needs
        ``activation_bytes``).
        """
        changes = self._changes(rank, in_bytes)
        share = 1.0 if in_bytes else self.schedule.chunk_share
        held, curve = 0, [(self.origin, 0.0)]
        for time, delta in changes:
            held += delta
            curve.append((time, float(held) * share))
        return curve

    def peak_activations(self, rank: int) -> float:
        """Most activations ``rank`` holds at once, in micro-batch activations of a full stage."""
        return self._peak(rank, in_bytes=False) * self.schedule.chunk_share

    def peak_activation_bytes(self, rank: int) -> float:
        """Most activation bytes ``rank`` holds at once (needs ``activation_bytes``)."""
        return finite_result(self._peak(rank, in_bytes=True), "the peak activation bytes")

    def _peak(self, rank: int, in_bytes: bool) -> float:
        if not in_bytes and self.w_memory == 1 and self._in_order(rank):
            try:  # one action allocates or frees at most one chunk: a running sum in order
                kinds = map(_KIND, self.schedule.actions[rank])
                return float(max(accumulate(map(_HELD.__getitem__, kinds), initial=0)))
            except KeyError:  # an overlapped pair allocates and frees: go event by event
                pass
        held = peak = 0
        for _, delta in self._changes(rank, in_bytes):
            held += delta
            if held > peak:
                peak = held
        return float(peak)

    def _in_order(self, rank: int) -> bool:
        """Whether execution order is time order (measured times may overlap a little)."""
        starts, ends = self.starts[rank], self.ends[rank]
        return all(map(operator.le, starts, ends)) and all(map(operator.le, ends[:-1], starts[1:]))

    def _changes(self, rank: int, in_bytes: bool) -> list[tuple[float, float]]:
        """``(time, +size)`` when an ``F`` starts, ``(time, -size)`` when a ``B`` or ``W`` ends
        (with ``w_memory`` = w < 1: ``-(1-w) size`` when an ``I`` ends, ``-w size`` at ``W``).

        Sizes count stage chunks (1 each), or bytes with ``in_bytes``. In time order, and at
        equal times in execution order: a rank runs one action after another, so a back-to-back
        or zero-length action's free comes before the next allocation, and an action's start
        before its own end.
        """
        if in_bytes and self.activation_bytes is None:
            raise ValueError("memory in bytes needs activation_bytes (Costs(activation_bytes=...))")
        sizes = self.activation_bytes if in_bytes else None
        starts, ends = self.starts[rank], self.ends[rank]
        # Counts add exactly (a Fraction of w), so that a peak at a limit K reads K, not
        # K plus a rounding error; bytes are floats anyway.
        kept = self.w_memory if in_bytes or self.w_memory == 1 else Fraction(self.w_memory)
        freed = {"B": 1, "W": kept, "I": 1 - kept}  # a split backward frees at I and at W
        events: list[tuple[float, int, int, float]] = []
        for k, step in enumerate(self.schedule.actions[rank]):
            for stage, kind, _ in (step,) if type(step) is Action else step.parts:
                size = sizes[stage] if sizes else 1
                if kind == "F":
                    events.append((starts[k], k, 0, size))
                elif freed[kind]:
                    events.append((ends[k], k, 1, -size * freed[kind]))
        if not self._in_order(rank):
            events.sort(key=lambda e: e[:3])
        return [(time, delta) for time, _, _, delta in events]

    def metrics(self) -> dict:
        """The metrics as plain data (what ``ppbook simulate --json`` prints).

        ``num_microbatches`` is m, per step. Times (``makespan``, ``busy``, ``idle``, ``period``,
        ``rank_spans``) are in
        ``time_unit``; ``zb_bubble_rate`` is the Zero Bubble paper's rate; peak activations in
        micro-batch activations of a full stage (``peak_activations_full_stage``), and in
        bytes (``peak_activation_bytes``) when activation sizes are known. Raises a ValueError
        when a result is not a finite number (costs too large for floating point).
        """
        ranks = range(self.num_ranks)
        busy = list(self._busy)
        makespan = self.makespan
        out = {
            "schedule": self.schedule.name,
            "source": self.source,
            "time_unit": self.time_unit,
            "num_ranks": self.num_ranks,
            "num_stages": self.schedule.num_stages,
            "num_microbatches": self.microbatches_per_step,
            "makespan": makespan,
            "bubble_fraction": finite_result(self.bubble_fraction, "the bubble fraction"),
            "bubble_ratio": finite_result(self.bubble_ratio, "the bubble ratio"),
            "busy": busy,
            "idle": [makespan - b for b in busy],
            "steps": self.steps,
            "sync": self.sync,
            "period": self.period,
            "period_bubble_fraction": finite_result(
                self.period_bubble_fraction, "the bubble fraction of one period"
            ),
            "rank_spans": self.rank_spans,
            "zb_bubble_rate": self.zb_bubble_rate,
            "activation_unit": ACTIVATION_UNIT,
            "peak_activations_full_stage": [self.peak_activations(r) for r in ranks],
        }
        if self.activation_bytes is not None:
            out["peak_activation_bytes"] = [self.peak_activation_bytes(r) for r in ranks]
        return out
