"""A pipeline schedule as plain data: per-rank ordered lists of actions.

One schedule, three consumers: :mod:`ppbook.simulate` times it, :mod:`ppbook.views.gantt` draws
it and :mod:`ppbook.runtime` executes it on real processes. Nothing here imports anything
beyond the standard library.

The notation is PyTorch's (``torch.distributed.pipelining``, torch 2.13): an action is
``<stage><kind><microbatch>`` with kinds ``F`` (forward), ``B`` (full backward), ``I``
(backward for the stage input only) and ``W`` (weight-gradient pass), and an overlapped
forward-and-backward pair is written ``(0F4;7B1)OVERLAP_F_B``. Stages are global: with
``v`` chunks per rank there are ``p * v`` stages. PyTorch's CSV form (one row per rank,
one action per cell) is read and written by :mod:`ppbook.pytorch_csv`. Sizes are checked
against :mod:`ppbook.limits` before anything big is built.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from itertools import repeat
from typing import ClassVar, NamedTuple

from ppbook import limits
from ppbook.checks import as_count, clipped, shown

KINDS = ("F", "B", "I", "W")
"""Compute kinds, spelled as PyTorch spells them."""

_ACTION_RE = re.compile(r"^(\d+)([FBIW])(\d+)$")
_OVERLAP_RE = re.compile(r"^\((.*);(.*)\)OVERLAP_F_B$")


class Action(NamedTuple):
    """One compute action: ``kind`` of global ``stage`` on ``microbatch`` (``0F3``).

    A named tuple, so that building and hashing the tens of thousands of actions of a large
    schedule stays cheap. :func:`ppbook.validate.validate` checks kinds and ranges.
    """

    stage: int
    kind: str
    microbatch: int

    @property
    def parts(self) -> tuple[Action, ...]:
        """The compute actions this action performs: itself."""
        return (self,)

    def __str__(self) -> str:
        return f"{self.stage}{self.kind}{self.microbatch}"

    __repr__ = __str__


@dataclass(frozen=True, slots=True)
class OverlapFB:
    """A forward and a backward run together, as DualPipe's overlapped F&B chunk pair."""

    forward: Action
    backward: Action
    kind: ClassVar[str] = "OVERLAP_F_B"

    def __post_init__(self) -> None:
        if self.forward.kind != "F" or self.backward.kind not in ("B", "I"):
            raise ValueError(
                "an overlapped pair holds one forward (F) and one backward (B or I), "
                f"got {self.forward} and {self.backward}"
            )
        if self.forward.stage == self.backward.stage and (
            self.forward.microbatch == self.backward.microbatch
        ):
            raise ValueError(
                f"an overlapped pair cannot hold a forward and its own backward "
                f"({self.forward} and {self.backward}): the backward needs the forward's "
                "result; pair the forward with another micro-batch's backward"
            )

    @property
    def parts(self) -> tuple[Action, Action]:
        """The compute actions this pair performs: its forward, then its backward."""
        return (self.forward, self.backward)

    def __str__(self) -> str:
        return f"({self.forward};{self.backward})OVERLAP_F_B"

    __repr__ = __str__


Step = Action | OverlapFB

_new_action = partial(tuple.__new__, Action)


def _shifted(step: Step, offset: int) -> Step:
    """``step`` with ``offset`` added to its micro-batch numbers."""
    if type(step) is Action:
        return _new_action((step.stage, step.kind, step.microbatch + offset))
    forward, backward = step.parts
    return OverlapFB(
        Action(forward.stage, "F", forward.microbatch + offset),
        Action(backward.stage, backward.kind, backward.microbatch + offset),
    )


def actions_of(kind: str, stages: Iterable[int], microbatches: Iterable[int]) -> list[Action]:
    """``Action(stage, kind, microbatch)`` for each pair of ``stages`` and ``microbatches``.

    The same as a list comprehension, in about half the time: builders of schedules with
    hundreds of thousands of actions use it.
    """
    return list(map(_new_action, zip(stages, repeat(kind), microbatches)))


def parse_action(text: str) -> Step:
    """Parse PyTorch's notation: ``0F3``, ``1B2``, ``2I0``, ``2W0``, ``(0F4;7B1)OVERLAP_F_B``."""
    text = text.strip()
    if match := _ACTION_RE.match(text):
        stage, kind, microbatch = match.groups()
        return Action(int(stage), kind, int(microbatch))
    if match := _OVERLAP_RE.match(text):
        forward, backward = (parse_action(part) for part in match.groups())
        if not (isinstance(forward, Action) and isinstance(backward, Action)):
            raise ValueError(f"an overlapped pair cannot nest another pair: {text!r}")
        return OverlapFB(forward, backward)
    raise ValueError(
        f"cannot parse action {clipped(text, 40)!r}: expected <stage><F|B|I|W><microbatch> "
        "such as '0F3', or '(0F4;7B1)OVERLAP_F_B'"
    )


@dataclass(frozen=True)
class Schedule:
    """Per-rank ordered actions and the placement of stages on ranks.

    ``actions[rank]`` is the order in which ``rank`` runs its actions; idle time is not
    stored (the simulator finds it). ``stage_to_rank[stage]`` is the rank that holds
    ``stage``. Build one with a function of :mod:`ppbook.schedules`, with
    :meth:`from_strings` or :func:`ppbook.pytorch_csv.read_csv`; check it with
    :func:`ppbook.validate.validate`. Ranks, stages, micro-batches and actions beyond
    :mod:`ppbook.limits` are refused here.

    ``routes[j]``, when given, is the ordered tuple of stages micro-batch ``j`` goes
    through; by default every micro-batch goes through all stages in order. The k-th stage
    of a route runs model part k, so two stages on different routes can hold copies of
    the same part: DualPipe feeds half of the micro-batches from each end of the pipeline.
    Routes are declared, never guessed from the actions: every route passes every model
    part once (all routes have the same length) and every stage is on some route.
    Without routes, a schedule is valid only if every micro-batch passes every stage.
    """

    actions: tuple[tuple[Step, ...], ...]
    stage_to_rank: tuple[int, ...]
    num_microbatches: int
    name: str = "custom"
    routes: tuple[tuple[int, ...], ...] | None = None
    notes: tuple[str, ...] = field(default=(), compare=False)
    """What was left out or assumed when the schedule was read (for the reader to see)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "actions", tuple(tuple(row) for row in self.actions))
        object.__setattr__(self, "stage_to_rank", tuple(self.stage_to_rank))
        object.__setattr__(self, "notes", tuple(self.notes))
        m = as_count(self.num_microbatches, "num_microbatches", "a schedule", minimum=0)
        object.__setattr__(self, "num_microbatches", m)
        limits.current().check(
            f"schedule {str(self.name)[:40]!r}",
            ranks=len(self.actions),
            stages=len(self.stage_to_rank),
            microbatches=m,
            actions=sum(map(len, self.actions)),
        )
        if not self.actions:
            raise ValueError("a schedule needs at least one rank, got none")
        if not self.stage_to_rank:
            raise ValueError("a schedule needs at least one stage, got none")
        for stage, rank in enumerate(self.stage_to_rank):
            if not 0 <= rank < len(self.actions):
                raise ValueError(
                    f"stage {stage} is placed on rank {rank}, but the schedule has ranks "
                    f"0..{len(self.actions) - 1}"
                )
        if self.routes is not None:
            object.__setattr__(self, "routes", tuple(tuple(r) for r in self.routes))
            _check_routes(self.routes, self.num_microbatches, len(self.stage_to_rank))

    @cached_property
    def split_backward(self) -> bool:
        """Whether any backward is split into I and W (zero-bubble schedules)."""
        return any(a.kind in ("I", "W") for row in self.actions for s in row for a in s.parts)

    @property
    def num_ranks(self) -> int:
        """p: the number of pipeline ranks (devices)."""
        return len(self.actions)

    @property
    def num_stages(self) -> int:
        """The number of stage chunks, p * v."""
        return len(self.stage_to_rank)

    @property
    def chunk_share(self) -> float:
        """The share of one device's part of the model that one stage chunk holds.

        The ranks that hold stages, divided by the length of a micro-batch's route: 1/v
        for interleaved schedules with v chunks per rank, 1/2 for ZB-V and DualPipeV, 1 for
        GPipe, 1F1B, ZB-H1, ZB-H2 and DualPipe. Costs are for one device's share
        (:mod:`ppbook.costs`); a chunk pass takes ``cost * chunk_share``.
        """
        return len(set(self.stage_to_rank)) / len(self.route(0))

    def stages_on(self, rank: int) -> tuple[int, ...]:
        """The stages that ``rank`` holds, in increasing order."""
        return tuple(s for s, r in enumerate(self.stage_to_rank) if r == rank)

    def route(self, microbatch: int) -> tuple[int, ...]:
        """The stages ``microbatch`` goes through, in order."""
        if self.routes is None:
            return tuple(range(self.num_stages))
        return self.routes[microbatch]

    def neighbours(self, stage: int, microbatch: int) -> tuple[int | None, int | None]:
        """The stages before and after ``stage`` on ``microbatch``'s route (None at an end)."""
        if self.routes is None:
            return (
                stage - 1 if stage > 0 else None,
                stage + 1 if stage < self.num_stages - 1 else None,
            )
        route = self.routes[microbatch]
        k = route.index(stage)
        return (route[k - 1] if k > 0 else None, route[k + 1] if k < len(route) - 1 else None)

    def model_part(self, stage: int) -> int:
        """Which part of the model ``stage`` runs: its position on the routes through it."""
        if self.routes is None:
            return stage
        for route in self.routes:
            if stage in route:
                return route.index(stage)
        raise ValueError(f"stage {stage} is on no micro-batch's route")

    def __len__(self) -> int:
        return sum(len(row) for row in self.actions)

    def repeated(self, steps: int) -> Schedule:
        """``steps`` training steps of this schedule in a row, as one schedule.

        Each rank runs its whole order once per step; micro-batch j of step k is numbered
        ``k * m + j`` and keeps micro-batch j's route. Nothing here makes a step wait for the
        previous one on other ranks (what :func:`ppbook.simulate.simulate` with
        ``sync="optimizer"`` adds): a rank's own order already runs the steps one after the
        other. Sizes are checked against :mod:`ppbook.limits` before anything is built.
        """
        steps = as_count(steps, "steps", "Schedule.repeated")
        m = self.num_microbatches
        limits.current().check(
            f"{steps} steps of schedule {str(self.name)[:40]!r}",
            microbatches=steps * m,
            actions=steps * len(self),
        )
        if steps == 1:
            return self
        rows = [
            [_shifted(step, k * m) for k in range(steps) for step in row] for row in self.actions
        ]
        routes = None if self.routes is None else self.routes * steps
        return Schedule(
            rows, self.stage_to_rank, steps * m, name=self.name, routes=routes, notes=self.notes
        )

    # ----- text forms -------------------------------------------------------------------

    def to_strings(self) -> list[list[str]]:
        """Each rank's actions in PyTorch's notation."""
        return [[str(a) for a in row] for row in self.actions]

    @classmethod
    def from_strings(
        cls,
        rows: Sequence[Sequence[str | None]],
        stage_to_rank: Sequence[int] | None = None,
        num_microbatches: int | None = None,
        name: str = "custom",
        routes: Sequence[Sequence[int]] | str | None = None,
        notes: Sequence[str] = (),
    ) -> Schedule:
        """Build a schedule from rows of action strings (``None`` or ``""`` is an idle step).

        ``stage_to_rank`` and ``num_microbatches`` are inferred from the actions when not
        given. Routes are not: without ``routes`` every micro-batch goes through every stage
        in order, and :func:`ppbook.validate.validate` refuses a micro-batch that misses a
        stage. A schedule whose micro-batches take other routes declares them: a sequence
        of routes, or :data:`TWO_WAY` for DualPipe's two directions
        (:func:`two_way_routes`). CSV carries no routes, so a DualPipe file is read with
        ``routes=TWO_WAY``. A malformed cell is a ValueError naming its row, column and
        text; stage and micro-batch numbers beyond :mod:`ppbook.limits` are refused before
        anything is built from them.
        """
        bounds = limits.current()
        actions: list[list[Step]] = []
        count = top_stage = top_microbatch = 0
        for r, row in enumerate(rows):
            parsed: list[Step] = []
            for c, cell in enumerate(row):
                if cell is None or not cell.strip():
                    continue
                try:
                    step = parse_action(cell)
                except ValueError as exc:
                    raise ValueError(f"row {r} (rank {r}), column {c}: {exc}") from None
                for part in step.parts:
                    top_stage = max(top_stage, part.stage)
                    top_microbatch = max(top_microbatch, part.microbatch)
                parsed.append(step)
            count += len(parsed)
            actions.append(parsed)
            bounds.check(
                f"row {r}", ranks=r + 1, stages=top_stage + 1, microbatches=top_microbatch + 1
            )
            bounds.check("the rows", actions=count)
        if stage_to_rank is None:
            stage_to_rank = _infer_placement(actions)
        if num_microbatches is None:
            mbs = [p.microbatch for row in actions for a in row for p in a.parts]
            num_microbatches = max(mbs) + 1 if mbs else 0
        if isinstance(routes, str):
            if routes != TWO_WAY:
                raise ValueError(
                    f"routes must be a sequence of routes or {TWO_WAY!r} (DualPipe's two "
                    f"directions), got {shown(routes)}"
                )
            routes = two_way_routes(len(stage_to_rank), num_microbatches)
        return cls(
            tuple(map(tuple, actions)),
            tuple(stage_to_rank),
            num_microbatches,
            name,
            routes,
            tuple(notes),
        )

    def __str__(self) -> str:
        width = max((len(str(a)) for row in self.actions for a in row), default=1)
        lines = [
            f"{self.name}: {self.num_ranks} ranks, {self.num_stages} stages, "
            f"{self.num_microbatches} micro-batches"
        ]
        for rank, row in enumerate(self.actions):
            lines.append(f"rank {rank}: " + " ".join(f"{str(a):>{width}}" for a in row))
        return "\n".join(lines)


def _infer_placement(actions: Iterable[Sequence[Step]]) -> tuple[int, ...]:
    owner: dict[int, int] = {}
    for rank, row in enumerate(actions):
        for action in row:
            for part in action.parts:
                previous = owner.setdefault(part.stage, rank)
                if previous != rank:
                    raise ValueError(
                        f"stage {part.stage} appears on rank {previous} and on rank {rank}: "
                        "a stage lives on exactly one rank"
                    )
    if not owner:
        raise ValueError("cannot infer stage placement from a schedule with no actions")
    missing = sorted(set(range(max(owner) + 1)) - set(owner))
    if missing:
        listed = ", ".join(map(str, missing[:12])) + (", ..." if len(missing) > 12 else "")
        raise ValueError(
            f"{len(missing)} stage(s) have no actions ({listed}): cannot place them on a rank"
        )
    return tuple(owner[s] for s in range(len(owner)))


def _check_routes(routes, num_microbatches: int, num_stages: int) -> None:
    if len(routes) != num_microbatches:
        raise ValueError(
            f"routes has {len(routes)} entries, expected one per micro-batch ({num_microbatches})"
        )
    part_of: dict[int, int] = {}
    parts = len(routes[0]) if routes else 0
    for j, route in enumerate(routes):
        if not route or len(set(route)) != len(route):
            raise ValueError(
                f"route of micro-batch {j} must list distinct stages, got {shown(route)}"
            )
        for k, stage in enumerate(route):
            if not 0 <= stage < num_stages:
                raise ValueError(
                    f"route of micro-batch {j} names stage {stage}, not in 0..{num_stages - 1}"
                )
            if part_of.setdefault(stage, k) != k:
                raise ValueError(
                    f"stage {stage} is at position {part_of[stage]} of one route "
                    f"and {k} of another: a stage runs one model part"
                )
        if len(route) != parts:
            raise ValueError(
                f"route of micro-batch {j} passes {len(route)} stage(s) and that of "
                f"micro-batch 0 passes {parts}: every route passes every model part once"
            )
    unrouted = sorted(set(range(num_stages)) - set(part_of))
    if unrouted:
        raise ValueError(
            f"stage(s) {numbers(unrouted)} are on no micro-batch's route: every stage of "
            "the schedule runs on some route (drop the stage or route micro-batches through it)"
        )


TWO_WAY = "two-way"
"""``Schedule.from_strings(..., routes=TWO_WAY)``: DualPipe's two directions
(:func:`two_way_routes`)."""


def two_way_routes(num_stages: int, num_microbatches: int) -> tuple[tuple[int, ...], ...]:
    """DualPipe's routes: micro-batches 0..m/2-1 through stages 0..n/2-1 in order, and
    micro-batches m/2..m-1 through stages n/2..n-1 (stage n/2 + k a copy of part k).

    Both counts must be even (half of each to each direction), as DualPipe's builder
    (:func:`ppbook.schedules.dualpipe`) makes them.
    """
    if num_stages % 2 or num_microbatches % 2 or num_microbatches < 2:
        raise ValueError(
            f"two-way routes need an even number of stages and of micro-batches (half of "
            f"each to each direction), got {num_stages} stages and {num_microbatches} "
            "micro-batches"
        )
    half, mid = num_microbatches // 2, num_stages // 2
    return (tuple(range(mid)),) * half + (tuple(range(mid, num_stages)),) * half


def numbers(values: Iterable[int], most: int = 12) -> str:
    """Whole numbers as a short list of runs: ``[0, 1, 2, 3, 5]`` -> ``"0..3, 5"``."""
    runs: list[list[int]] = []
    for value in sorted(set(values)):
        if runs and value == runs[-1][1] + 1:
            runs[-1][1] = value
        else:
            runs.append([value, value])
    shown_runs = [
        f"{a}" if a == b else f"{a}, {b}" if b == a + 1 else f"{a}..{b}" for a, b in runs[:most]
    ]
    return ", ".join(shown_runs) + (", ..." if len(runs) > most else "")
