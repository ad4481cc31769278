"""Lower bounds on any schedule's makespan, computed from the cost rules, not the simulator.

Shared by the schedule tests: the makespan is at least the busiest rank's compute and at
least the longest dependency chain of one micro-batch. What waits for what is
:func:`ppbook.dependencies.needs`, the one statement of the rules; durations are worked
out here from the cost model (each chunk pass scaled by the schedule's chunk share).
"""

from ppbook.costs import Costs
from ppbook.dependencies import BACKWARD, needs
from ppbook.schedule import Action, Schedule


def step_time(step, per_stage) -> float:
    """A step's duration by the cost model's rule, computed here, not by the simulator."""
    if isinstance(step, Action):
        return per_stage[step.kind][step.stage]
    forward, backward = step.parts
    if per_stage["FB"] is not None:
        return per_stage["FB"][forward.stage]
    return per_stage["F"][forward.stage] + per_stage[backward.kind][backward.stage]


def lower_bounds(schedule: Schedule, costs: Costs) -> tuple[float, float]:
    """(busiest rank's compute, longest single-micro-batch dependency chain)."""
    per_stage = costs.per_stage(schedule.num_stages, share=schedule.chunk_share)
    busiest = max(sum(step_time(s, per_stage) for s in row) for row in schedule.actions)
    step_of = {part: step for row in schedule.actions for step in row for part in step.parts}
    for step in step_of.values():  # a pair's parts are never on one micro-batch's chain
        assert len({part.microbatch for part in step.parts}) == len(step.parts), step

    finish: dict[Action, float] = {}

    def finished(part: Action) -> float:
        """Earliest end of ``part`` if only its dependency chain held it back."""
        if part not in finish:
            waits = []
            for need in needs(schedule, *part):
                kind = need.kind
                if kind == BACKWARD:
                    kind = "B" if Action(need.stage, "B", need.microbatch) in step_of else "I"
                waits.append(finished(Action(need.stage, kind, need.microbatch)))
            finish[part] = max(waits, default=0.0) + step_time(step_of[part], per_stage)
        return finish[part]

    longest = max(finished(part) for part in step_of)
    return busiest, longest
