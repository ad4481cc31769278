"""Fast, checked numeric versions of chapter 1's formulas, for sliders and sizing a job.

Each function evaluates a sympy expression of :func:`ppbook.symbolic.formulas`, compiled
once by ``lambdify``, after checking its input on ppbook's one rule for numbers
(:mod:`ppbook.checks`): counts are integers ``>= 1`` (``int`` or a numpy integer; not
``bool``, not ``2.5``), pass times finite and ``> 0`` (int, float, Fraction, Decimal or a
numpy scalar), a target bubble lies in (0, 1). A bad input raises ``ValueError`` saying
what was wrong and what would be right. Every other formula is checked the same way when
called through its record: ``formulas()["zb_h2_makespan"](p=4, m=8, t_f=1, t_i=1, t_w=1)``
also refuses inputs outside the formula's conditions.

Conventions (REFERENCES.md): the bubble **fraction** f = idle/total is GPipe's
(arXiv:1811.06965); the bubble **ratio**
r = idle/compute is Megatron-LM's (arXiv:2104.04473) and the Ultra-Scale Playbook's.
With ``v > 1`` chunks (interleaved 1F1B) ``m`` must be a multiple of ``p``.
"""

from ppbook.symbolic.checks import check_count, check_share, check_time
from ppbook.symbolic.formula import formulas


def _check_chunks(func: str, p, m, v) -> tuple[int, int, int]:
    p = check_count(func, "num_stages p", p)
    m = check_count(func, "num_microbatches m", m)
    v = check_count(func, "num_chunks v", v)
    if v > 1 and m % p:
        raise ValueError(
            f"{func} with num_chunks v = {v} (interleaved 1F1B) needs num_microbatches m "
            f"to be a multiple of num_stages p = {p}, got m = {m}"
        )
    return p, m, v


def bubble_fraction(p: int, m: int, v: int = 1) -> float:
    """Bubble fraction f = idle/total = (p-1)/(v m + p - 1); GPipe and 1F1B at v = 1."""
    p, m, v = _check_chunks("bubble_fraction", p, m, v)
    return formulas()["interleaved_bubble_fraction"].function(p, m, v)


def bubble_ratio(p: int, m: int, v: int = 1) -> float:
    """Bubble ratio r = idle/ideal compute = (p-1)/(v m); GPipe and 1F1B at v = 1."""
    p, m, v = _check_chunks("bubble_ratio", p, m, v)
    return formulas()["interleaved_bubble_ratio"].function(p, m, v)


def fraction_from_ratio(r: float) -> float:
    """The bubble fraction f = r/(1+r) of a bubble ratio r >= 0."""
    exact = check_share("fraction_from_ratio", "a bubble ratio r", r, open_unit_interval=False)
    if exact < 0:
        raise ValueError(f"fraction_from_ratio needs a bubble ratio r >= 0, got {r!r}")
    return float(exact / (1 + exact))


def ratio_from_fraction(f: float) -> float:
    """The bubble ratio r = f/(1-f) of a bubble fraction 0 <= f < 1."""
    exact = check_share("ratio_from_fraction", "a bubble fraction f", f, open_unit_interval=False)
    if not 0 <= exact < 1:
        raise ValueError(f"ratio_from_fraction needs a bubble fraction 0 <= f < 1, got {f!r}")
    return float(exact / (1 - exact))


def min_microbatches(p: int, target: float, convention: str = "fraction", v: int = 1) -> int:
    """Smallest m whose bubble, in ``convention``, is at most ``target``.

    ``convention`` is ``"fraction"`` (f = idle/total) or ``"ratio"`` (r = idle/compute);
    ``target`` lies in (0, 1) and is read as the decimal it was typed as (0.3 is 3/10).
    With ``v > 1`` the answer is rounded up to a multiple of ``p``, where the interleaved
    formula holds. Example: ``min_microbatches(8, 0.1, "ratio")`` is 70.
    """
    func = "min_microbatches"
    if convention not in ("fraction", "ratio"):
        raise ValueError(f'{func} needs convention "fraction" or "ratio", got {convention!r}')
    p = check_count(func, "num_stages p", p)
    v = check_count(func, "num_chunks v", v)
    exact = check_share(func, "a target bubble", target, open_unit_interval=True)
    smallest = max(1, formulas()[f"min_microbatches_{convention}"].function(p, exact, v))
    if v > 1:
        smallest = -(-smallest // p) * p
    return int(smallest)


def gpipe_makespan(p: int, m: int, t_f: float = 1.0, t_b: float = 2.0) -> float:
    """Time of one GPipe (or 1F1B) step: (m+p-1)(t_f+t_b), no transfer cost."""
    func = "gpipe_makespan"
    p = check_count(func, "num_stages p", p)
    m = check_count(func, "num_microbatches m", m)
    t_f = check_time(func, "forward time t_f", t_f)
    t_b = check_time(func, "backward time t_b", t_b)
    return float(formulas()["gpipe_makespan"].function(p, m, t_f, t_b))
