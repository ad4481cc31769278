"""Static checks of a schedule and the dependency rules that every consumer shares.

Dependencies (the same for the simulator and the torch runtime), with "before" and
"after" the neighbouring stages on the micro-batch's route (``s-1`` and ``s+1`` unless the
schedule gives routes):

- ``F(s, j)`` after the forward of the stage before;
- the backward of ``(s, j)`` (``B`` or ``I``) after ``F(s, j)`` and the backward of the
  stage after;
- ``W(s, j)`` after ``I(s, j)``.
"""

from __future__ import annotations

from ppbook.schedule import KINDS, Action, Schedule

MAX_LISTED = 12
_KIND_INDEX = {kind: i for i, kind in enumerate(KINDS)}


class ScheduleError(ValueError):
    """A schedule that is malformed or cannot finish; the message says why."""


class ScheduleIndex:
    """Every compute part of a schedule indexed by integers, built in one pass.

    ``steps`` lists every rank's steps back to back (``first[rank]`` is where a rank
    starts); ``where[key]`` is the step that runs part ``key = (stage * m + microbatch) * 4 +
    kind`` (-1 if none). :meth:`problems` lists what :func:`validate` reports.
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
                for stage, kind, mb in (step,) if type(step) is Action else step.parts:
                    k = kind_index.get(kind)
                    if k is None or not (0 <= stage < num_stages and 0 <= mb < m):
                        self.errors.append(self._misplaced(rank, sid, stage, kind, mb))
                        continue
                    if stage_to_rank[stage] != rank:
                        self.errors.append(
                            f"rank {rank}, position {sid - offset} ({step}): "
                            f"stage {stage} lives on rank {stage_to_rank[stage]}"
                        )
                    key = (stage * m + mb) * 4 + k
                    if where[key] >= 0:
                        self.errors.append(
                            f"rank {rank}, position {sid - offset}: "
                            f"{stage}{kind}{mb} appears more than once"
                        )
                    where[key] = sid

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

    def problems(self) -> list[str]:
        """Everything :func:`validate` would report, as sentences."""
        schedule, where, m = self.schedule, self.where, self.num_microbatches
        problems = list(self.errors)
        if m < 1:
            problems.append(f"num_microbatches must be >= 1, got {m}")
        all_stages = schedule.routes is None
        for mb in range(max(m, 0)):
            on_route = None if all_stages else set(schedule.route(mb))
            for stage in range(schedule.num_stages):
                base = (stage * m + mb) * 4
                f, b, i, w = (
                    where[base] >= 0,
                    where[base + 1] >= 0,
                    where[base + 2] >= 0,
                    where[base + 3] >= 0,
                )
                if f and not i and not w and b:
                    continue  # the common case: one F, one B
                if on_route is not None and stage not in on_route:
                    if f or b or i or w:
                        problems.append(
                            f"stage {stage}, micro-batch {mb}: the stage is not "
                            "on this micro-batch's route, yet has actions"
                        )
                    continue
                if not f:
                    problems.append(f"stage {stage}, micro-batch {mb}: no forward F")
                if not ((b and not i and not w) or (i and w and not b)):
                    problems.append(
                        f"stage {stage}, micro-batch {mb}: has B={b:d}, I={i:d}, "
                        f"W={w:d}; expected one B, or one I and one W"
                    )
        return problems

    def dependencies(self, stage: int, kind: str, microbatch: int) -> list[int]:
        """Keys of the parts that part (stage, kind, microbatch) waits for."""
        m = self.num_microbatches
        if kind == "W":
            return [(stage * m + microbatch) * 4 + 2]
        before, after = self.schedule.neighbours(stage, microbatch)
        if kind == "F":
            return [(before * m + microbatch) * 4] if before is not None else []
        deps = [(stage * m + microbatch) * 4]
        if after is not None:
            deps.append(self.backward_key(after, microbatch))
        return deps


def validate(schedule: Schedule) -> ScheduleIndex:
    """Raise :class:`ScheduleError` listing what is wrong with ``schedule``, if anything.

    Checks: kinds and ranges; every (stage, micro-batch) on its route has one ``F`` and
    either one ``B`` or one ``I`` and one ``W``; every action runs on the rank that holds
    its stage. Whether the schedule can finish is found by the simulator, which names the
    stuck ranks. Returns the schedule's :class:`ScheduleIndex`.
    """
    index = ScheduleIndex(schedule)
    problems = index.problems()
    if problems:
        listed = problems[:MAX_LISTED]
        more = len(problems) - len(listed)
        tail = f"\n  ... and {more} more" if more else ""
        raise ScheduleError(f"invalid schedule {schedule.name!r}:\n  " + "\n  ".join(listed) + tail)
    return index
