"""Static checks of a schedule, and an index of its parts by integer keys.

Which action waits for which is :mod:`ppbook.dependencies`' rule; :class:`ScheduleIndex`
turns that rule into integer keys once per stage, kind and route, so that the simulator
and the other consumers look dependencies up without re-deriving them.
"""

from __future__ import annotations

from ppbook import limits
from ppbook.checks import shown
from ppbook.dependencies import BACKWARD, needs
from ppbook.pipeline_schedule import KINDS, Action, Schedule, numbers

MAX_LISTED = 12
"""Most problems listed in one :class:`ScheduleError` message."""

_KIND_INDEX = {kind: i for i, kind in enumerate(KINDS)}
_NEED_INDEX = {"F": 0, BACKWARD: 1, "I": 2}  # BACKWARD: B's key, or I's (one more) if split


class ScheduleError(ValueError):
    """A schedule that is malformed or cannot finish; the message says why."""


class ScheduleIndex:
    """Every compute part of a schedule indexed by integers, built in one pass.

    ``steps`` lists every rank's steps back to back (``first[rank]`` is where a rank
    starts); ``where[key]`` is the step that runs part ``key = (stage * m + microbatch) * 4 +
    kind`` (-1 if none). ``rules[(route_id[j] * num_stages + stage) * 4 + kind]`` is what
    that part waits for, as offsets from the part's own key (a backward's offset is B's;
    when the schedule has no B there, I's key is the next one), computed from
    :func:`ppbook.dependencies.needs` once for each distinct route: the rules depend on a
    micro-batch only through its route. :meth:`problems` lists what :func:`validate`
    reports.
    """

    def __init__(self, schedule: Schedule):
        self.schedule = schedule
        num_stages, m = schedule.num_stages, schedule.num_microbatches
        self.num_microbatches = m
        self.steps: list = []
        self.step_rank: list[int] = []
        self.first: list[int] = []
        self.where = where = [-1] * (num_stages * max(m, 0) * 4)
        self.errors: list[str] = []
        kind_index = _KIND_INDEX
        stage_to_rank = schedule.stage_to_rank
        steps, step_rank, first = self.steps, self.step_rank, self.first
        for rank, row in enumerate(schedule.actions):
            offset = len(steps)
            first.append(offset)
            steps.extend(row)
            step_rank.extend([rank] * len(row))
            for sid, step in enumerate(row, offset):
                if type(step) is Action:  # the common case, checked inline
                    stage, kind, mb = step
                    k = kind_index.get(kind)
                    if k is not None and 0 <= stage < num_stages and 0 <= mb < m:
                        key = (stage * m + mb) * 4 + k
                        if where[key] < 0 and stage_to_rank[stage] == rank:
                            where[key] = sid
                            continue
                for part in step.parts:
                    self._add(rank, sid, part)
        self.route_id, self.rules = self._rules()

    def _add(self, rank: int, sid: int, part: Action) -> None:
        """Index ``part`` of step ``sid`` on ``rank``, or record what is wrong with it."""
        stage, kind, mb = part
        m, where = self.num_microbatches, self.where
        k = _KIND_INDEX.get(kind)
        if k is None or not (0 <= stage < self.schedule.num_stages and 0 <= mb < m):
            self.errors.append(self._misplaced(rank, sid, stage, kind, mb))
            return
        key = (stage * m + mb) * 4 + k
        position = sid - self.first[rank]
        if where[key] >= 0:
            self.errors.append(f"rank {rank}, position {position}: {part} appears more than once")
        elif self.schedule.stage_to_rank[stage] != rank:
            self.errors.append(
                f"rank {rank}, position {position} ({self.steps[sid]}): "
                f"stage {stage} lives on rank {self.schedule.stage_to_rank[stage]}"
            )
        where[key] = sid

    def _rules(self) -> tuple[list[int], list]:
        """Each micro-batch's route number, and the dependency rules of each route."""
        schedule, m, num_stages = self.schedule, self.num_microbatches, self.schedule.num_stages
        number: dict[tuple[int, ...], int] = {}  # a route -> its number
        first_of: list[tuple[tuple[int, ...], int]] = []  # (route, its first micro-batch)
        route_id = []
        for j in range(max(m, 0)):
            route = schedule.route(j) if schedule.routes is not None else ()
            if route not in number:
                number[route] = len(first_of)
                first_of.append((route, j))
            route_id.append(number[route])
        rules: list = [None] * (len(first_of) * num_stages * 4)
        for r, (route, j) in enumerate(first_of):
            for stage in route or range(num_stages):
                for k, kind in enumerate(KINDS):
                    rules[(r * num_stages + stage) * 4 + k] = tuple(
                        ((need.stage - stage) * m + need.microbatch - j) * 4
                        + _NEED_INDEX[need.kind]
                        for need in needs(schedule, stage, kind, j)
                    )
        return route_id, rules

    def _misplaced(self, rank, sid, stage, kind, mb) -> str:
        schedule = self.schedule
        where = f"rank {rank}, position {sid - self.first[rank]} ({self.steps[sid]})"
        if kind not in _KIND_INDEX:
            return f"{where}: unknown kind {kind!r}"
        if not 0 <= stage < schedule.num_stages:
            return f"{where}: stage {stage} is not in 0..{schedule.num_stages - 1}"
        return f"{where}: micro-batch {mb} is not in 0..{schedule.num_microbatches - 1}"

    def backward_key(self, stage: int, microbatch: int) -> int:
        """Key of the backward (B, or I when split) of (stage, microbatch)."""
        base = (stage * self.num_microbatches + microbatch) * 4
        return base + 1 if self.where[base + 1] >= 0 else base + 2

    def dependencies(self, stage: int, kind: str, microbatch: int) -> list[int]:
        """Keys of the parts that part (stage, kind, microbatch) waits for."""
        num_stages, where = self.schedule.num_stages, self.where
        k = _KIND_INDEX[kind]
        base = (stage * self.num_microbatches + microbatch) * 4
        rule = self.rules[(self.route_id[microbatch] * num_stages + stage) * 4 + k] or ()
        return [  # a backward's key is B's (off % 4 == 1), or I's, the next, when split
            base + off + 1 if off % 4 == 1 and where[base + off] < 0 else base + off for off in rule
        ]

    def problems(self) -> list[str]:
        """Everything :func:`validate` would report, as sentences."""
        schedule, where, m = self.schedule, self.where, self.num_microbatches
        problems = list(self.errors)
        if m < 1:
            problems.append(f"num_microbatches must be >= 1, got {m}")
            return problems
        problems += _idle_ranks(schedule)
        if schedule.routes is None and (
            min(where[0::4]) >= 0
            and (
                (min(where[1::4]) >= 0 and max(where[2::4]) < 0 and max(where[3::4]) < 0)
                or (max(where[1::4]) < 0 and min(where[2::4]) >= 0 and min(where[3::4]) >= 0)
            )
        ):
            return problems  # every part once: one F and one B, or one F, I and W, everywhere
        never: dict[tuple, list[int]] = {}  # (route, stages it never passes) -> micro-batches
        for mb in range(m):
            on_route = None if schedule.routes is None else set(schedule.route(mb))
            missed = []
            for stage in range(schedule.num_stages):
                base = (stage * m + mb) * 4
                f, b, i, w = (where[base + k] >= 0 for k in range(4))
                if f and b and not i and not w:
                    continue  # the common case: one F, one B
                if on_route is not None and stage not in on_route:
                    if f or b or i or w:
                        problems.append(
                            f"stage {stage}, micro-batch {mb}: the stage is not "
                            "on this micro-batch's route, yet has actions"
                        )
                    continue
                if not (f or b or i or w):
                    missed.append(stage)
                elif not (b or i or w):
                    problems.append(
                        f"stage {stage}, micro-batch {mb}: no backward after its F; "
                        "expected one B, or one I and one W"
                    )
                else:
                    if not f:
                        problems.append(
                            f"stage {stage}, micro-batch {mb}: a backward without its forward (F)"
                        )
                    if not ((b and not i and not w) or (i and w and not b)):
                        problems.append(
                            f"stage {stage}, micro-batch {mb}: has B={b:d}, I={i:d}, "
                            f"W={w:d}; expected one B, or one I and one W"
                        )
            if missed:
                never.setdefault((schedule.route(mb), tuple(missed)), []).append(mb)
        problems += [_never_passed(schedule, mbs, key[1]) for key, mbs in never.items()]
        return problems


def _idle_ranks(schedule: Schedule) -> list[str]:
    """A sentence for each rank that holds no stage (its row runs nothing)."""
    held = set(schedule.stage_to_rank)
    return [
        f"rank {rank} holds no stage and runs nothing: every rank of the pipeline runs a "
        "part of the model; give it a stage and that stage's F and B (or I and W) of every "
        "micro-batch, or leave the rank out"
        for rank in range(schedule.num_ranks)
        if rank not in held
    ]


def _never_passed(schedule: Schedule, microbatches: list[int], stages: tuple[int, ...]) -> str:
    """One line: which micro-batches never pass which stages, and what would be right."""
    verb = "passes" if len(microbatches) == 1 else "pass"
    head = f"{_microbatches(microbatches)} never {verb} {_stages(stages)}"
    if schedule.routes is None:
        return (
            f"{head} (no F, B, I or W there): every micro-batch runs F and then B (or I "
            f"and W) on every stage of the model, 0..{schedule.num_stages - 1}, unless the "
            "schedule declares other routes (Schedule(routes=...))"
        )
    route = schedule.route(microbatches[0])
    return (
        f"{head} of its route {shown(route)} (no F, B, I or W there): every micro-batch "
        "runs F and then B (or I and W) on every stage of its route"
    )


def _microbatches(values: list[int]) -> str:
    return f"micro-batch{'' if len(values) == 1 else 'es'} {numbers(values)}"


def _stages(values: tuple[int, ...]) -> str:
    return f"stage{'' if len(values) == 1 else 's'} {numbers(values)}"


def validate(schedule: Schedule) -> ScheduleIndex:
    """Raise :class:`ScheduleError` listing what is wrong with ``schedule``, if anything.

    Checks: kinds and ranges; every rank holds a stage; every micro-batch passes every
    stage of the model (every stage of its route, when the schedule declares routes),
    that is, every such (stage, micro-batch) has one ``F`` and either one ``B`` or one
    ``I`` and one ``W``; every action runs on the rank that holds its stage. A micro-batch
    that misses stages is one line naming it and the stages. Whether the schedule can
    finish is found by the simulator, which names the stuck ranks. Returns the schedule's
    :class:`ScheduleIndex`. The message lists at most :data:`MAX_LISTED` problems and
    :data:`ppbook.limits.MAX_MESSAGE` characters.
    """
    if not isinstance(schedule, Schedule):
        raise ValueError(
            f"expected a ppbook.schedule.Schedule, got {type(schedule).__name__}; "
            f"build one "
            "with ppbook.schedules.build or read one with ppbook.pytorch_csv.read_csv"
        )
    index = ScheduleIndex(schedule)
    problems = index.problems()
    if problems:
        head = f"invalid schedule {str(schedule.name)[:60]!r}:"
        raise ScheduleError(limits.listed(head, problems, most=MAX_LISTED))
    return index


def unit_steps(schedule: Schedule) -> list[list[int]]:
    """Each rank's start step when every step takes one unit of time and transfers are
    free: the columns of PyTorch's aligned CSV form (:func:`ppbook.pytorch_csv.write_csv`).

    A step starts when its rank's previous step has ended and every part it waits for
    (:mod:`ppbook.dependencies`' rule, through the :class:`ScheduleIndex`) has ended; an
    overlapped pair is one step. The same starts as the simulator at unit costs
    (:func:`ppbook.simulate.unit_cost_steps`, which the tests compare), without importing
    it. Raises :class:`ScheduleError` when the schedule is invalid or cannot finish.
    """
    index = validate(schedule)
    m = schedule.num_microbatches
    start: list[int | None] = [None] * len(index.steps)
    waits: list[list[int]] = []  # for each step id, the step ids it waits for
    for step in index.steps:
        own = set()
        for stage, kind, mb in step.parts:
            own.add(index.where[(stage * m + mb) * 4 + _KIND_INDEX[kind]])
        deps = {
            index.where[key]
            for stage, kind, mb in step.parts
            for key in index.dependencies(stage, kind, mb)
        }
        waits.append(sorted(deps - own))
    ends = [first + len(row) for first, row in zip(index.first, schedule.actions, strict=True)]
    at = list(index.first)  # each rank's next step id
    while True:
        moved = False
        for rank, sid in enumerate(at):
            while sid < ends[rank]:
                if any(start[d] is None for d in waits[sid]):
                    break
                after = start[sid - 1] + 1 if sid > index.first[rank] else 0
                start[sid] = max([after, *(start[d] + 1 for d in waits[sid])])
                sid += 1
                moved = True
            at[rank] = sid
        if not moved:
            break
    stuck = [r for r, sid in enumerate(at) if sid < ends[r]]
    if stuck:
        named = ", ".join(f"rank {r} at {index.steps[at[r]]}" for r in stuck[:MAX_LISTED])
        raise ScheduleError(
            f"schedule {str(schedule.name)[:60]!r} cannot finish: every rank left waits "
            f"for a step that waits on it ({named})"
        )
    return [
        [start[sid] for sid in range(first, end)]
        for first, end in zip(index.first, ends, strict=True)
    ]
