"""Static checks of a schedule and the dependency rules that every consumer shares.

Dependencies (the same for the simulator and the torch runtime):

- ``F(s, j)`` after ``F(s-1, j)``;
- the backward of ``(s, j)`` (``B`` or ``I``) after ``F(s, j)`` and the backward of ``(s+1, j)``;
- ``W(s, j)`` after ``I(s, j)``.
"""

from __future__ import annotations

from collections import Counter

from ppbook.schedule import KINDS, Action, Schedule

MAX_LISTED = 12


class ScheduleError(ValueError):
    """A schedule that is malformed or cannot finish; the message says why."""


def dependencies(action: Action, backward_kind: dict[tuple[int, int], str], last_stage: int):
    """The actions that ``action`` waits for (a list of ``Action``).

    ``backward_kind[(stage, microbatch)]`` says whether that pair's backward is ``B`` or
    ``I`` (a split backward).
    """
    stage, kind, microbatch = action
    if kind == "F":
        return [Action(stage - 1, "F", microbatch)] if stage > 0 else []
    if kind == "W":
        return [Action(stage, "I", microbatch)]
    deps = [Action(stage, "F", microbatch)]
    if stage < last_stage:
        deps.append(Action(stage + 1, backward_kind[(stage + 1, microbatch)], microbatch))
    return deps


def backward_kinds(schedule: Schedule) -> dict[tuple[int, int], str]:
    """Map each (stage, microbatch) to the kind of its backward: ``B`` or ``I``."""
    return {
        (part.stage, part.microbatch): part.kind
        for row in schedule.actions
        for step in row
        for part in step.parts
        if part.kind in ("B", "I")
    }


def validate(schedule: Schedule) -> None:
    """Raise :class:`ScheduleError` listing what is wrong with ``schedule``, if anything.

    Checks: kinds and ranges; every (stage, micro-batch) has one ``F`` and either one ``B``
    or one ``I`` and one ``W``; every action runs on the rank that holds its stage.
    Whether the schedule can finish is found by the simulator (it names stuck ranks).
    """
    problems: list[str] = []
    num_stages, num_mb = schedule.num_stages, schedule.num_microbatches
    if num_mb < 1:
        problems.append(f"num_microbatches must be >= 1, got {num_mb}")
    counts: Counter[Action] = Counter()
    for rank, row in enumerate(schedule.actions):
        for index, step in enumerate(row):
            for part in step.parts:
                where = f"rank {rank}, position {index} ({step})"
                if part.kind not in KINDS:
                    problems.append(f"{where}: unknown kind {part.kind!r}")
                    continue
                if not 0 <= part.stage < num_stages:
                    problems.append(f"{where}: stage {part.stage} is not in 0..{num_stages - 1}")
                    continue
                if not 0 <= part.microbatch < num_mb:
                    problems.append(
                        f"{where}: micro-batch {part.microbatch} is not in 0..{num_mb - 1}"
                    )
                    continue
                owner = schedule.stage_to_rank[part.stage]
                if owner != rank:
                    problems.append(f"{where}: stage {part.stage} lives on rank {owner}")
                counts[part] += 1
    for stage in range(num_stages):
        for mb in range(num_mb):
            n = {k: counts[Action(stage, k, mb)] for k in KINDS}
            if n["F"] != 1:
                problems.append(f"stage {stage}, micro-batch {mb}: {n['F']} forwards, expected 1")
            full, split = n["B"], (n["I"], n["W"])
            if not ((full, split) == (1, (0, 0)) or (full, split) == (0, (1, 1))):
                problems.append(
                    f"stage {stage}, micro-batch {mb}: {full} B, {split[0]} I and {split[1]} W; "
                    "expected one B, or one I and one W"
                )
    if problems:
        listed = problems[:MAX_LISTED]
        more = len(problems) - len(listed)
        tail = f"\n  ... and {more} more" if more else ""
        raise ScheduleError(
            f"invalid schedule {schedule.name!r}:\n  " + "\n  ".join(listed) + tail
        )
