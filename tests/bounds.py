"""Lower bounds on any schedule's makespan, computed from the cost rules, not the simulator.

Shared by the schedule tests: the makespan is at least the busiest rank's compute and at
least the longest dependency chain of one micro-batch (its forwards, backwards and W).
"""

from ppbook.costs import Costs
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
    per_stage = costs.per_stage(schedule.num_stages)
    busiest = max(sum(step_time(s, per_stage) for s in row) for row in schedule.actions)
    step_of = {part: step for row in schedule.actions for step in row for part in step.parts}
    longest = 0.0
    for j in range(schedule.num_microbatches):
        route = schedule.route(j)
        chain = [Action(s, "F", j) for s in route]
        chain += [
            Action(s, "I", j) if Action(s, "I", j) in step_of else Action(s, "B", j)
            for s in reversed(route)
        ]
        if Action(route[0], "W", j) in step_of:
            chain.append(Action(route[0], "W", j))
        steps = {id(step_of[part]): step_of[part] for part in chain}  # a pair counts once
        longest = max(longest, sum(step_time(s, per_stage) for s in steps.values()))
    return busiest, longest
