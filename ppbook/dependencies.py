"""The dependency rules, written once: what each compute action waits for, and what it sends.

Every consumer uses these two functions: the validator and the simulator (which action
waits for which), the torch runtime (which message each action receives and sends) and the
tests' lower bounds. A new action kind or placement changes this module only.

With "before" and "after" the neighbouring stages on the micro-batch's route
(:meth:`ppbook.pipeline_schedule.Schedule.neighbours`: ``s - 1`` and ``s + 1`` unless the schedule
gives routes):

- ``F(s, j)`` waits for ``F(before, j)`` and receives its output (an ``ACTIVATION``);
- the backward of ``(s, j)``, ``B`` or ``I``, waits for ``F(s, j)`` on its own stage and
  for the backward of ``(after, j)``, and receives the gradient of its output (a
  ``GRADIENT``) from it;
- ``W(s, j)`` waits for ``I(s, j)`` on its own stage and receives nothing.

A forward sends its output to the stage after; a backward sends its input's gradient to the
stage before; ``W`` sends nothing. Standard library only.
"""

from __future__ import annotations

from typing import NamedTuple

from ppbook.pipeline_schedule import Schedule

ACTIVATION, GRADIENT = 0, 1
"""What crosses a stage boundary: a forward's output, or a backward's input gradient."""

BACKWARD = "backward"
"""The kind named by a :class:`Need` on a backward: ``B``, or ``I`` when it is split."""


class Need(NamedTuple):
    """A part that an action waits for: ``kind`` of ``stage`` on ``microbatch``.

    ``kind`` is ``"F"``, ``"I"`` or :data:`BACKWARD` (the backward of that stage and
    micro-batch, whichever of ``B`` or ``I`` the schedule runs). ``message`` is
    ``ACTIVATION`` or ``GRADIENT`` when the part's result is data that crosses a stage
    boundary, ``None`` when the need is an order on the action's own stage.
    """

    stage: int
    kind: str
    microbatch: int
    message: int | None


def needs(schedule: Schedule, stage: int, kind: str, microbatch: int) -> tuple[Need, ...]:
    """The parts that ``kind`` of ``stage`` on ``microbatch`` waits for (rules above)."""
    if kind == "W":
        return (Need(stage, "I", microbatch, None),)
    before, after = schedule.neighbours(stage, microbatch)
    if kind == "F":
        return () if before is None else (Need(before, "F", microbatch, ACTIVATION),)
    own = Need(stage, "F", microbatch, None)
    if after is None:
        return (own,)
    return (own, Need(after, BACKWARD, microbatch, GRADIENT))


def sends(schedule: Schedule, stage: int, kind: str, microbatch: int) -> tuple[int, int] | None:
    """``(receiving stage, ACTIVATION or GRADIENT)`` that the action sends, or None."""
    if kind == "W":
        return None
    before, after = schedule.neighbours(stage, microbatch)
    if kind == "F":
        return None if after is None else (after, ACTIVATION)
    return None if before is None else (before, GRADIENT)
