"""ppbook.critical_path's exact cones, checked by hand, and its answers to bad input."""

import pytest
import sympy as sp

from ppbook.critical_path import critical_path, formula_conditions, simplify_under
from ppbook.critical_path.cones import Cone, hull
from ppbook.schedules import one_f_one_b, zb_h1
from ppbook.symbolic.symbols import c, t_f, t_i, t_w

# ----- the cones ----------------------------------------------------------------------


def test_cone_rays_and_facets_by_hand():
    # x >= y >= 2z >= 0 (x, y, z): rays x-axis, x = y, and x = y = 2z
    cone = Cone(3, [(1, -1, 0), (0, 1, -2), (1, 0, -2)])  # the last is implied
    assert set(cone.rays) == {(1, 0, 0), (1, 1, 0), (2, 2, 1)}
    assert set(cone.facets()) == {(1, -1, 0), (0, 1, -2), (0, 0, 1)}
    assert set(hull(3, cone.rays).facets()) == set(cone.facets())
    with pytest.raises(ValueError, match="force an equality"):
        Cone(2, [(1, -1), (-1, 1)]).facets()


# ----- bad input ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        ("W less than F", "cannot read the condition"),
        ("W != F", "cannot read the condition"),
        ("W <= F**2", "must compare multiples of the costs"),
        ("W <= F + 1", "must compare multiples of the costs"),
        ("FB <= F", "must compare multiples of the costs"),
        (["F <= W", "W <= F"], "force an equality"),
        ("F + I + W + c <= 0", "holds for no positive costs"),
        (sp.Le(t_f + t_i + t_w + c, 0, evaluate=False), "leave no positive costs"),
    ],
)
def test_bad_conditions_say_what_would_be_right(conditions, message):
    with pytest.raises(ValueError, match=message) as error:
        critical_path(zb_h1(2, 2), conditions)
    assert "\n" not in str(error.value)


def test_bad_arguments_say_what_would_be_right():
    with pytest.raises(ValueError, match="expected a ppbook.schedule.Schedule"):
        critical_path("zb-h1")
    with pytest.raises(ValueError, match="overlap must be"):
        critical_path(zb_h1(2, 2), overlap="FB+")
    with pytest.raises(ValueError, match="split_backward=True"):
        critical_path(one_f_one_b(2, 2), "W <= F")
    with pytest.raises(ValueError, match="unknown formula"):
        formula_conditions("zb_h3", zb_h1(2, 2))
    with pytest.raises(ValueError, match="maximum of linear forms"):
        simplify_under(sp.Min(t_f, t_w))
    with pytest.raises(ValueError, match="constant term"):
        simplify_under(t_f + 1)
