"""One stage per rank: GPipe and 1F1B.

- GPipe (Huang et al. 2019, arXiv:1811.06965): every forward, then every backward
  ("all-forward-all-backward"). Makespan (m+p-1)(F+B); a rank holds all m activations.
- 1F1B, PipeDream-Flush (Narayanan et al. 2021, arXiv:2006.09503; Megatron-LM,
  arXiv:2104.04473): a warm-up of p-1-r forwards on rank r, then one forward and one
  backward in turn, then the remaining backwards. Same makespan as GPipe, but rank 0 holds
  at most min(p, m) activations. Works for any m >= 1, also m < p.
"""

from __future__ import annotations

from ppbook.pipeline_schedule import Action, Schedule
from ppbook.schedules.rules import check_counts


def gpipe(num_stages: int, num_microbatches: int) -> Schedule:
    """GPipe: all forwards, then all backwards (arXiv:1811.06965)."""
    p, m = check_counts("gpipe", num_stages, num_microbatches)
    actions = []
    for rank in range(p):
        row = [Action(rank, "F", j) for j in range(m)]
        row += [Action(rank, "B", j) for j in range(m)]
        actions.append(row)
    return Schedule(actions, tuple(range(p)), m, name="gpipe")


def one_f_one_b(num_stages: int, num_microbatches: int) -> Schedule:
    """1F1B (PipeDream-Flush): warm-up, one forward one backward, cool-down (arXiv:2006.09503)."""
    p, m = check_counts("1f1b", num_stages, num_microbatches)
    actions = []
    for rank in range(p):
        warmup = min(p - 1 - rank, m)
        row = [Action(rank, "F", j) for j in range(warmup)]  # warm-up
        for j in range(m - warmup):  # steady state: one forward, one backward
            row.append(Action(rank, "F", warmup + j))
            row.append(Action(rank, "B", j))
        row += [Action(rank, "B", j) for j in range(m - warmup, m)]  # cool-down
        actions.append(row)
    return Schedule(actions, tuple(range(p)), m, name="1f1b")
