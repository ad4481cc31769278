"""Small hand-written schedules that reach the runtime's corners (tests and chapter 3).

Every one is plain data, checked by the simulator like any other schedule:

- :func:`reordered_backward`: rank 0 takes its gradients in the reverse of the order in
  which rank 1 sends them. Messages without identity would pair up wrongly here.
- :func:`split_one_f_one_b`: 1F1B with every backward split into ``I`` then ``W`` one
  action later, the zero-bubble idea (Qi et al. 2024, arXiv:2401.10241) in its smallest form.
- :func:`overlapped_pair`: one overlapped forward-and-backward pair, as DualPipe runs them.
- :func:`two_routes`: micro-batches enter from both ends of the pipeline, so each rank
  holds a copy of two model parts, as in DualPipe (DeepSeek-V3, arXiv:2412.19437).
"""

from __future__ import annotations

from ppbook.pipeline_schedule import Action, OverlapFB, Schedule
from ppbook.schedules import one_f_one_b


def reordered_backward() -> Schedule:
    """p = 2, m = 2: rank 1 sends the gradients of micro-batch 0 then 1; rank 0 wants 1 first."""
    return Schedule.from_strings(
        [["0F0", "0F1", "0B1", "0B0"], ["1F0", "1F1", "1B0", "1B1"]], name="reordered-backward"
    )


def split_one_f_one_b(num_stages: int, num_microbatches: int) -> Schedule:
    """1F1B with each ``B`` replaced by ``I``, and its ``W`` run one action later."""
    rows = []
    for row in one_f_one_b(num_stages, num_microbatches).actions:
        out: list[Action] = []
        deferred: list[Action] = []
        for action in row:
            if action.kind == "B":
                out.append(Action(action.stage, "I", action.microbatch))
                out += deferred
                deferred = [Action(action.stage, "W", action.microbatch)]
            else:
                out.append(action)
                out += deferred
                deferred = []
        rows.append(out + deferred)
    return Schedule(rows, tuple(range(num_stages)), num_microbatches, name="1f1b-split")


def overlapped_pair() -> Schedule:
    """p = 2, m = 2: rank 1 runs the forward of micro-batch 1 and the backward of 0 as a pair."""
    pair = OverlapFB(Action(1, "F", 1), Action(1, "B", 0))
    rows = [
        [Action(0, "F", 0), Action(0, "F", 1), Action(0, "B", 0), Action(0, "B", 1)],
        [Action(1, "F", 0), pair, Action(1, "B", 1)],
    ]
    return Schedule(rows, (0, 1), 2, name="overlapped-pair")


def two_routes() -> Schedule:
    """p = 2, m = 2, stages 0..3: micro-batch 0 goes 0 -> 1, micro-batch 1 goes 2 -> 3.

    Stage 2 (rank 1) runs model part 0 and stage 3 (rank 0) part 1: each rank holds both
    parts, and the gradients of the two copies of a part add up to the model's gradient.
    """
    rows = [["0F0", "3F1", "3B1", "0B0"], ["2F1", "1F0", "1B0", "2B1"]]
    actions = Schedule.from_strings(rows).actions
    return Schedule(actions, (0, 1, 1, 0), 2, name="two-routes", routes=((0, 1), (2, 3)))
