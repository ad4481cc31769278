"""The typical step of a measured run, one rule for live runs and GPU recordings."""

from types import SimpleNamespace

from ppbook.runtime.result import typical_step


def steps(*makespans):
    return [SimpleNamespace(makespan=t) for t in makespans]


def test_the_warm_up_step_is_left_out_and_the_lower_median_kept():
    assert typical_step(steps(9.0, 3.0, 5.0, 4.0)).makespan == 4.0  # median of 3, 5, 4
    assert typical_step(steps(9.0, 3.0, 5.0, 4.0, 6.0)).makespan == 4.0  # lower of 4 and 5


def test_a_single_step_is_its_own_typical_step():
    assert typical_step(steps(7.0)).makespan == 7.0
