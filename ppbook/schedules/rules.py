"""Argument checks shared by the schedule builders: errors say the rule and what was given."""

from __future__ import annotations

import numbers


def check_int(schedule: str, name: str, value: object, minimum: int = 1) -> int:
    """Return ``value`` as an int, or raise a ValueError naming the schedule and the rule."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{schedule} needs an integer {name}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{schedule} needs {name} >= {minimum}, got {value}")
    return int(value)


def check_counts(schedule: str, num_stages: object, num_microbatches: object) -> tuple[int, int]:
    """Check p >= 1 and m >= 1 as integers; return them."""
    return (
        check_int(schedule, "num_stages", num_stages),
        check_int(schedule, "num_microbatches", num_microbatches),
    )
