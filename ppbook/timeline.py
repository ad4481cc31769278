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
is split into ``I`` and ``W``. Counts are in micro-batch activations of one stage chunk;
bytes use the per-stage ``activation_bytes`` when given.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ppbook.schedule import Schedule, Step


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
    ``"closed form"`` (:func:`ppbook.symbolic.gpipe_timeline`).
    """

    schedule: Schedule
    starts: tuple[tuple[float, ...], ...]
    ends: tuple[tuple[float, ...], ...]
    activation_bytes: list[float] | None = None
    source: str = "simulated"

    def __post_init__(self) -> None:
        lengths = [len(row) for row in self.schedule.actions]
        if [len(r) for r in self.starts] != lengths or [len(r) for r in self.ends] != lengths:
            raise ValueError("a timeline needs one start and one end per action of each rank")

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
        return max((max(row) for row in self.ends if row), default=self.origin) - self.origin

    def busy(self, rank: int) -> float:
        """Time ``rank`` spent computing."""
        return sum(self.ends[rank]) - sum(self.starts[rank])

    def idle(self, rank: int) -> float:
        """Time ``rank`` spent idle within the makespan."""
        return self.makespan - self.busy(rank)

    def idle_gaps(self, rank: int) -> list[tuple[float, float]]:
        """Idle (start, end) gaps of ``rank`` within the makespan, in time order."""
        gaps, t = [], self.origin
        for iv in self.intervals[rank]:
            if iv.start > t:
                gaps.append((t, iv.start))
            t = max(t, iv.end)
        end = self.origin + self.makespan
        if end > t:
            gaps.append((t, end))
        return gaps

    @cached_property
    def total_busy(self) -> float:
        return sum(self.busy(r) for r in range(self.num_ranks))

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

    # ----- activation memory ------------------------------------------------------------

    def memory(self, rank: int, in_bytes: bool = False) -> list[tuple[float, float]]:
        """Activations held by ``rank`` over time: ``(time, amount)`` after each change.

        Amounts count micro-batch activations of one stage chunk, or bytes with
        ``in_bytes`` (needs ``activation_bytes``).
        """
        if in_bytes and self.activation_bytes is None:
            raise ValueError("memory in bytes needs activation_bytes (Costs(activation_bytes=...))")
        # Sorted by time, then by execution order: a rank runs one action after another, so at
        # equal times (back-to-back or zero-length actions) an earlier action's free comes
        # before a later action's allocation, and an action's start before its own end.
        events: list[tuple[float, int, int, float]] = []
        for k, iv in enumerate(self.intervals[rank]):
            for part in iv.action.parts:
                size = self.activation_bytes[part.stage] if in_bytes else 1
                if part.kind == "F":
                    events.append((iv.start, k, 0, size))
                elif part.kind in ("B", "W"):  # a split backward frees at its W
                    events.append((iv.end, k, 1, -size))
        events.sort(key=lambda e: e[:3])
        held, curve = 0.0, [(self.origin, 0.0)]
        for time, _, _, delta in events:
            held += delta
            curve.append((time, held))
        return curve

    def peak_activations(self, rank: int) -> int:
        """Most micro-batch activations ``rank`` holds at once."""
        return int(max(amount for _, amount in self.memory(rank)))

    def peak_activation_bytes(self, rank: int) -> float:
        """Most activation bytes ``rank`` holds at once (needs ``activation_bytes``)."""
        return max(amount for _, amount in self.memory(rank, in_bytes=True))

    def metrics(self) -> dict:
        """The metrics as plain data (what ``ppbook simulate --json`` prints)."""
        ranks = range(self.num_ranks)
        out = {
            "schedule": self.schedule.name,
            "source": self.source,
            "num_ranks": self.num_ranks,
            "num_stages": self.schedule.num_stages,
            "num_microbatches": self.schedule.num_microbatches,
            "makespan": self.makespan,
            "bubble_fraction": self.bubble_fraction,
            "bubble_ratio": self.bubble_ratio,
            "busy": [self.busy(r) for r in ranks],
            "idle": [self.idle(r) for r in ranks],
            "peak_activations": [self.peak_activations(r) for r in ranks],
        }
        if self.activation_bytes is not None:
            out["peak_activation_bytes"] = [self.peak_activation_bytes(r) for r in ranks]
        return out
