"""Argument checks shared by the schedule builders: errors say the rule and what was given."""

from __future__ import annotations

import numbers

from ppbook import limits
from ppbook.checks import shown


def check_int(schedule: str, name: str, value: object, minimum: int = 1) -> int:
    """Return ``value`` as an int, or raise a ValueError naming the schedule and the rule."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{schedule} needs an integer {name}, got {shown(value)}")
    if value < minimum:
        raise ValueError(f"{schedule} needs {name} >= {minimum}, got {value}")
    return int(value)


def check_counts(
    schedule: str,
    num_stages: object,
    num_microbatches: object,
    num_chunks: int = 1,
    passes: int = 2,
) -> tuple[int, int]:
    """Check p >= 1 and m >= 1 as integers within :mod:`ppbook.limits`; return them.

    The schedule will have p * ``num_chunks`` stages and ``passes`` actions (F and B, or F,
    I and W) for each stage and micro-batch; all are checked before anything is built.
    """
    p = check_int(schedule, "num_stages", num_stages)
    m = check_int(schedule, "num_microbatches", num_microbatches)
    stages = p * num_chunks
    limits.current().check(
        schedule, stages=stages, microbatches=m, actions=passes * stages * m, ranks=p
    )
    return p, m
