"""The cost model: one rule for numbers, duplicate keys, the cost of a chunk, overflow."""

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from ppbook.costs import Costs
from ppbook.links import Link, Topology
from ppbook.schedules import gpipe, one_f_one_b
from ppbook.simulate import simulate


def test_duplicate_keys_are_refused():
    with pytest.raises(ValueError, match="cost F is given twice"):
        Costs.parse("F=1,F=5")
    with pytest.raises(ValueError, match="cost B is given twice"):
        Costs.parse("B=2, F=1, B=2")


@pytest.mark.parametrize(
    "number",
    [np.int64(3), np.int32(3), np.float64(3.0), np.float32(3.0), Fraction(6, 2), Decimal("3")],
    ids=repr,
)
def test_numbers_the_numeric_functions_accept_are_costs(number):
    resolved = Costs(F=number, B=[number, 2 * number], comm=number).per_stage(2)
    assert resolved == {
        "F": [3.0, 3.0],
        "B": [3.0, 6.0],
        "I": [1.5, 3.0],
        "W": [1.5, 3.0],
        "FB": None,
    }
    assert all(type(x) is float for x in resolved["F"] + resolved["B"])
    assert Costs(F=1, comm=number).transfer == 3.0


@pytest.mark.parametrize(
    "value",
    [True, "1", math.nan, math.inf, -math.inf, np.float64("nan"), Decimal("Infinity")],
    ids=repr,
)
def test_bool_text_nan_and_infinity_are_refused(value):
    with pytest.raises(ValueError, match="Costs needs F to be a"):
        Costs(F=value)
    with pytest.raises(ValueError, match=r"Costs needs B\[1\] to be a"):
        Costs(B=[1, value])


@pytest.mark.parametrize("text", ["F=nan", "F=inf", "B=-inf"])
def test_parse_refuses_non_finite_costs(text):
    with pytest.raises(ValueError, match="to be a finite number"):
        Costs.parse(text)


def test_derived_costs_that_overflow_are_refused():
    # B defaults to 2F: 2e308 is not a float.
    with pytest.raises(ValueError, match="cost B is not a finite number"):
        Costs(F=1e308).per_stage(1)


def test_share_scales_every_compute_cost_but_not_the_transfer():
    costs = Costs(F=1, B=3, W=1, FB=5, comm=0.5, activation_bytes=[100, 300])
    assert costs.per_stage(2, share=0.5) == {
        "F": [0.5, 0.5],
        "B": [1.5, 1.5],
        "I": [1.0, 1.0],  # (B - W) / 2
        "W": [0.5, 0.5],
        "FB": [2.5, 2.5],
    }
    assert costs.transfer == 0.5
    assert costs.activation_bytes_per_stage(2, share=0.25) == [25.0, 75.0]
    with pytest.raises(ValueError, match="share"):
        costs.per_stage(2, share=0)


def test_a_makespan_too_large_for_a_float_is_refused():
    # Each pass is a float, but (m + p - 1) (F + B) = 201 * 3e306 is not.
    timeline = simulate(gpipe(2, 200), Costs(F=1e306, B=2e306))
    with pytest.raises(ValueError, match="makespan .* is not a finite number"):
        timeline.metrics()


def test_parse_reads_what_the_constructor_takes():
    assert Costs.parse("F=1, B=2,W=0.5", comm=0.1) == Costs(F=1, B=2, W=0.5, comm=0.1)
    assert simulate(one_f_one_b(2, 2), Costs.parse("F=1")).makespan == 9  # (m+p-1)(F+2F)


def test_peak_bytes_too_large_for_a_float_are_refused():
    timeline = simulate(gpipe(1, 2), Costs(activation_bytes=1e308))  # holds 2e308 bytes
    with pytest.raises(ValueError, match="peak activation bytes is not a finite number"):
        timeline.metrics()


def test_copies_are_checked_and_switch_on_the_device_model():
    assert not Costs().device_model
    assert Costs(send_copy=0.5).device_model and Costs(input_copy=0.1).device_model
    shared = Topology(Link(), ranks_per_device=2)
    assert Costs(topology=shared).device_model and not Costs(topology=Topology(Link())).device_model
    with pytest.raises(ValueError, match="recv_copy"):
        Costs(recv_copy=-1)
    with pytest.raises(ValueError, match="send_copy"):
        Costs(send_copy=float("nan"))
