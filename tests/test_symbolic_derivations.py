"""The derived sympy results against the published formulas of REFERENCES.md.

The published formulas are typed in here, on purpose and only here: they are the
independent answer the derivations in ppbook.symbolic must reach.
"""

import sympy as sp

import ppbook.symbolic as S
from ppbook.symbolic.symbols import c, j, m, p, s, t_b, t_f, t_fb, t_i, t_w, u, v


def same(a, b) -> bool:
    return sp.simplify(a - b) == 0


def test_forward_finish_is_s_plus_j_plus_one_forwards_plus_s_hops():
    assert same(S.forward_finish(), (s + j + 1) * t_f + s * c)


def test_forward_closed_form_solves_the_recurrence_and_its_boundaries():
    assert S.forward_recurrence_residuals() == [0, 0, 0, 0]


def test_forward_residuals_reject_wrong_candidates():
    # one pass short: the interior still holds, the first pass does not
    residuals = S.forward_recurrence_residuals((s + j) * t_f + s * c)
    assert residuals[0] == 0
    assert residuals[3] != 0
    # hops counted twice: the interior max hides it, the first column does not
    residuals = S.forward_recurrence_residuals((s + j + 1) * t_f + 2 * s * c)
    assert residuals[0] == 0
    assert residuals[2] != 0


def test_rsolve_boundaries_agree_with_the_critical_path_sum():
    assert same(S.first_stage_forwards_by_rsolve(), S.forward_finish().subs(s, 0))
    assert same(S.first_microbatch_forwards_by_rsolve(), S.forward_finish().subs(j, 0))


def test_backward_closed_form_solves_the_recurrence():
    assert S.backward_recurrence_residuals() == [0, 0, 0, 0]
    assert S.backward_recurrence_residuals(S.backward_finish() + t_b * u) != [0, 0, 0, 0]
    assert S.backward_recurrence_residuals(S.backward_finish() - t_f) != [0, 0, 0, 0]


def test_backward_finish_starts_after_the_last_forward():
    expected = (m + p - 1) * t_f + (p - 1) * c + (u + j + 1) * t_b + u * c
    assert same(S.backward_finish(), expected)


def test_gpipe_makespan_is_m_plus_p_minus_one_times_f_plus_b():
    assert same(S.gpipe_makespan(), (m + p - 1) * (t_f + t_b))
    assert same(S.gpipe_makespan_with_transfer(), (m + p - 1) * (t_f + t_b) + 2 * (p - 1) * c)


def test_bubble_time_fraction_and_ratio():
    assert same(S.gpipe_bubble_time(), p * (p - 1) * (t_f + t_b))
    assert same(S.per_device_bubble_time(), (p - 1) * (t_f + t_b))
    assert same(S.bubble_fraction(), (p - 1) / (m + p - 1))
    assert same(S.bubble_ratio(), (p - 1) / m)
    assert not same(S.bubble_fraction(), S.bubble_ratio())


def test_the_two_conventions_describe_the_same_idle_time():
    assert S.convention_identity_residuals() == [0, 0]
    assert same(S.fraction_from_ratio(S.bubble_ratio()), S.bubble_fraction())
    assert same(S.ratio_from_fraction(S.bubble_fraction()), S.bubble_ratio())


def test_worked_example_p8_m32():
    at = {p: 8, m: 32}
    assert S.bubble_ratio().subs(at) == sp.Rational(7, 32)
    assert S.bubble_fraction().subs(at) == sp.Rational(7, 39)
    assert float(S.bubble_ratio().subs(at)) == 0.21875
    assert round(float(S.bubble_fraction().subs(at)), 4) == 0.1795


def test_gpipe_rule_of_thumb_m_equals_4p():
    assert same(S.bubble_at_microbatches_per_stage("fraction"), (p - 1) / (5 * p - 1))
    assert same(S.bubble_at_microbatches_per_stage("ratio"), (p - 1) / (4 * p))
    assert S.bubble_at_microbatches_per_stage("fraction").subs(p, 8) == sp.Rational(7, 39)
    assert round(float(S.bubble_at_microbatches_per_stage().subs(p, 8)), 2) == 0.18
    assert S.bubble_at_rule_of_thumb_limit("fraction") == sp.Rational(1, 5)
    assert S.bubble_at_rule_of_thumb_limit("ratio") == sp.Rational(1, 4)


def test_bubble_vanishes_as_m_grows():
    assert S.bubble_limit("fraction") == 0
    assert S.bubble_limit("ratio") == 0


def test_min_microbatches_expressions():
    b = sp.Symbol("b", positive=True)
    assert same(S.min_microbatches_expr("ratio"), sp.ceiling((p - 1) / (v * b)))
    assert same(S.min_microbatches_expr("fraction"), sp.ceiling((p - 1) * (1 - b) / (v * b)))


def test_one_f_one_b_has_gpipes_makespan():
    assert same(S.one_f_one_b_makespan(), S.gpipe_makespan())
    assert same(S.one_f_one_b_bubble(), (p - 1) * (t_f + t_b))


def test_interleaved_formulas():
    assert same(S.interleaved_makespan(), m * (t_f + t_b) + (p - 1) * (t_f + t_b) / v)
    assert same(S.interleaved_bubble_ratio(), (p - 1) / (v * m))
    assert same(S.interleaved_bubble_fraction(), (p - 1) / (v * m + p - 1))
    assert same(S.interleaved_bubble_fraction().subs(v, 1), S.bubble_fraction())
    assert same(S.interleaved_makespan().subs(v, 1), S.gpipe_makespan())
    # the Playbook's p = 8 plot: r = 7/(v m)
    assert same(S.interleaved_bubble_ratio().subs(p, 8), 7 / (v * m))


def test_zero_bubble_formulas():
    compute = m * (t_f + t_i + t_w)
    assert same(S.zb_h1_makespan(), compute + (p - 1) * (t_f + t_i - t_w))
    assert same(S.zb_h1_bubble(), (p - 1) * (t_f + t_i - t_w))
    assert same(S.zb_h2_bubble(), (p - 1) * (t_f + t_i - 2 * t_w))
    assert same(S.zb_h2_makespan(), compute + (p - 1) * (t_f + t_i - 2 * t_w))
    equal_passes = {t_i: t_f, t_w: t_f}
    assert S.zb_h2_bubble().subs(equal_passes) == 0
    # ZB-H1 cuts 1F1B's bubble (p-1)(F+B+W) to a third when F = B = W (paper, sec. 3)
    one_f_one_b = S.one_f_one_b_bubble().subs(t_b, t_i + t_w)
    assert same(S.zb_h1_bubble().subs(equal_passes) * 3, one_f_one_b.subs(equal_passes))


def test_zero_bubble_and_dualpipe_tables_agree_once_b_means_the_same():
    # DualPipe's table writes B for the full backward, t_i + t_w
    zb1p = S.zb1p_bubble_dualpipe_notation().subs(t_b, t_i + t_w)
    assert same(zb1p, S.zb_h1_bubble())
    assert same(S.dualpipe_bubble(), (p / 2 - 1) * (t_fb + t_b - 3 * t_w))
    assert S.dualpipe_bubble().subs(p, 2) == 0


def test_peak_activations():
    assert S.gpipe_peak_activations() == m
    assert S.one_f_one_b_peak_activations() == sp.Min(p, m)
    interleaved = S.interleaved_peak_activations()
    assert isinstance(interleaved, sp.Min)
    cap, warmup = sorted(interleaved.args, key=lambda a: a != m)
    assert cap == m
    assert same(warmup, p + (p - 1) / v)
    assert S.zb_h1_peak_activations() == p
    assert S.zb_h2_peak_activations() == 2 * p - 1
    assert S.dualpipe_peak_activations() == p + 1


def test_formula_registry_gives_expression_latex_and_number():
    table = S.formulas()
    f = table["bubble_fraction"]
    assert f.latex == r"\frac{p - 1}{m + p - 1}"
    assert f(8, 32) == f(p=8, m=32) == 7 / 39
    assert table["bubble_ratio"](m=32, p=8) == 0.21875
    assert table["gpipe_makespan"](4, 8, 1.0, 2.0) == 33.0
    assert table["min_microbatches_ratio"](8, sp.Rational(1, 10), 1) == 70
    for formula in table.values():
        assert formula.source and formula.conditions and formula.meaning
        assert formula.expr.free_symbols <= set(formula.args), formula.name


def test_formula_call_rejects_wrong_arguments():
    import pytest

    f = S.formulas()["bubble_ratio"]
    with pytest.raises(TypeError, match=r"missing \['m'\]"):
        f(p=8)
    with pytest.raises(TypeError, match="takes"):
        f(8, 32, q=1)
    with pytest.raises(TypeError, match="takes"):
        f(8, 32, 1)
