"""GPipe's step timed by the closed forms of chapter 1, as a Timeline (chapter 1).

The symbolic layer derives the finish time of every pass of GPipe's timeline
(:func:`ppbook.symbolic.forward_finish`, :func:`ppbook.symbolic.backward_finish`, from
the recurrences of Huang et al. 2019, arXiv:1811.06965, sec. 2.3). This module puts
those times on the schedule built by :func:`ppbook.schedules.gpipe` and returns the same
:class:`~ppbook.timeline.Timeline` type that the simulator and the runtime return, so
plots and metrics work on it. It sits above both the symbolic layer and the schedule
layer, which import nothing of each other.
"""

import sympy as sp

from ppbook.checks import as_count, as_quantity
from ppbook.schedules.basic import gpipe
from ppbook.symbolic.gpipe import backward_finish, forward_finish
from ppbook.symbolic.symbols import c, j, m, p, s, t_b, t_f, u
from ppbook.timeline import Timeline


def gpipe_timeline(
    num_stages: int, num_microbatches: int, t_forward: float = 1.0, t_backward: float = 2.0
) -> Timeline:
    """GPipe's step timed by the derived closed forms (no transfer cost), as a Timeline.

    Every start and end comes from :func:`~ppbook.symbolic.forward_finish` and
    :func:`~ppbook.symbolic.backward_finish`, not from the simulator: the independent way
    to the same timeline. With ``num_microbatches=1`` this is naive model parallelism, one
    device busy at a time.
    """
    name = "gpipe_timeline"
    num_stages = as_count(num_stages, "num_stages p", name)
    num_microbatches = as_count(num_microbatches, "num_microbatches m", name)
    t_forward = as_quantity(t_forward, "t_forward", name, inclusive=False)
    t_backward = as_quantity(t_backward, "t_backward", name, inclusive=False)
    times = {c: 0, t_f: t_forward, t_b: t_backward, p: num_stages, m: num_microbatches}
    fwd = sp.lambdify((s, j), forward_finish().subs(times), "math")
    bwd = sp.lambdify((u, j), backward_finish().subs(times), "math")
    schedule = gpipe(num_stages, num_microbatches)
    starts, ends = [], []
    for rank, row in enumerate(schedule.actions):
        finish = [
            float(
                fwd(rank, a.microbatch)
                if a.kind == "F"
                else bwd(num_stages - 1 - rank, a.microbatch)
            )
            for a in row
        ]
        ends.append(finish)
        starts.append(
            [
                e - (t_forward if a.kind == "F" else t_backward)
                for e, a in zip(finish, row, strict=True)
            ]
        )
    return Timeline.from_arrays(schedule, starts, ends, source="closed form")
