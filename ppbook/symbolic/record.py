"""A closed form in three forms: sympy expression, LaTeX, checked numeric function.

A :class:`Formula` says how it was obtained (``provenance``): :data:`DERIVED` with sympy
(GPipe's recurrences, the two bubble conventions, the sizing inverses) or a
:data:`PUBLISHED` closed form, checked against the simulator (1F1B, interleaved 1F1B,
ZB-H1, ZB-H2, DualPipe: the code adds them up from the schedule's known structure, and
the tests compare them with :func:`ppbook.simulate.simulate` on a grid within their
conditions). It states its conditions of validity, in words (``conditions``) and as
checks on its arguments (``requires``), and its source. Calling it with numbers, by
position (in the order of ``args``) or by symbol name, checks them first:

- counts (``p``, ``m``, ``v``) are integers >= 1, pass times finite and > 0, a transfer
  time ``c`` >= 0, a target bubble ``b`` strictly between 0 and 1 (:mod:`.checks`, on
  ppbook's one rule for numbers); exact inputs (int, Fraction, Decimal) give exact results;
- then each condition in ``requires``: a value outside them is refused with a one-line
  ValueError that names the condition.

``Formula.function`` is the same expression compiled without any checks, for callers
that have checked their input. The registry of chapter 1's formulas is
:func:`ppbook.symbolic.formulas`.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import sympy as sp

from ppbook.checks import shown
from ppbook.symbolic.checks import check_count, check_share, check_time
from ppbook.symbolic.symbols import c, m, p, t_b, t_f, t_fb, t_i, t_w, target, v

DERIVED = "derived with sympy"
PUBLISHED = "closed form as published, checked against the simulator"

_LABELS = {
    p: "num_stages p",
    m: "num_microbatches m",
    v: "num_chunks v",
    t_f: "forward time t_f",
    t_b: "backward time t_b",
    t_i: "input-gradient time t_i",
    t_w: "weight-gradient time t_w",
    t_fb: "overlapped pair time t_fb",
    c: "transfer time c",
    target: "a target bubble b",
}


def _checked(func: str, symbol: sp.Symbol, value):
    """One argument checked by the rule for its kind of symbol (count, time, share)."""
    label = _LABELS[symbol]
    if symbol in (p, m, v):
        return check_count(func, label, value)
    if symbol is target:
        return check_share(func, label, value, open_unit_interval=True)
    return check_time(func, label, value, positive=symbol is not c)


@dataclass(frozen=True)
class Formula:
    """One closed form: ``expr`` in the symbols ``args``, with its meaning and source.

    ``requires`` holds the conditions a call checks, each a sympy condition in ``args``
    with the words a refusal says; ``conditions`` says in words everything the formula
    assumes, including what its arguments cannot show (uniform pass times, the schedule's
    own limits on ``m``).
    """

    name: str
    expr: sp.Expr
    args: tuple[sp.Symbol, ...]
    meaning: str
    conditions: str
    source: str
    provenance: str
    requires: tuple[tuple[sp.Basic, str], ...] = field(default=())

    @property
    def latex(self) -> str:
        """The expression as LaTeX, for a notebook's Markdown or a plot label."""
        return sp.latex(self.expr)

    @cached_property
    def function(self) -> Callable[..., float]:
        """The expression compiled by :func:`sympy.lambdify` to plain Python; no checks."""
        return sp.lambdify(self.args, self.expr, modules="math")

    def __call__(self, *values, **named):
        """Evaluate at numbers given by position (order of ``args``) or by symbol name.

        Raises ValueError, naming the condition, for a value outside the formula's
        conditions; TypeError for missing or unknown arguments.
        """
        names = [a.name for a in self.args]
        unknown = sorted(set(named) - set(names))
        twice = sorted(set(named) & set(names[: len(values)]))
        if len(values) > len(names) or unknown or twice:
            raise TypeError(
                f"{self.name} takes {names} once each, got {shown(values)} and {sorted(named)}"
            )
        given = dict(zip(names, values, strict=False)) | named
        missing = [n for n in names if n not in given]
        if missing:
            raise TypeError(f"{self.name} takes {names}, missing {missing}")
        at = {a: _checked(self.name, a, given[a.name]) for a in self.args}
        for condition, words in self.requires:
            if not bool(condition.subs(at)):
                values_shown = ", ".join(
                    f"{a.name} = {shown(given[a.name])}"
                    for a in self.args
                    if a in condition.free_symbols
                )
                raise ValueError(f"{self.name} needs {words}, got {values_shown}")
        return self.function(*(at[a] for a in self.args))
