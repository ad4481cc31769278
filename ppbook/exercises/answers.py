"""Reading a reader's symbolic answer, once for every exercise that asks for a formula.

:func:`expression` takes a sympy expression, or a string sympy reads (``"(p - 1)*t_f"``,
with ``Min`` and ``Max``), checks that it uses only the symbols the question defines, read
by name so that the reader's own ``sp.Symbol("p")`` counts whatever its assumptions, and
returns it written in the question's symbols. A wrong answer raises a one-line ValueError,
which :func:`ppbook.exercises.check` shows as "not yet".
"""

from __future__ import annotations

from collections.abc import Mapping

import sympy as sp

from ppbook.checks import shown


def expression(answer: object, names: Mapping[str, sp.Symbol], what: str | None = None) -> sp.Expr:
    """``answer`` as a sympy expression in the symbols ``names`` (name: symbol); ``what``
    says them in messages (default: their names)."""
    what = what or ", ".join(names)
    if isinstance(answer, str):
        try:
            answer = sp.sympify(answer, locals={**names, "Min": sp.Min, "Max": sp.Max})
        except (sp.SympifyError, SyntaxError, TypeError, ValueError) as error:
            raise ValueError(f"sympy cannot read {shown(answer)}: {error}") from None
    if not isinstance(answer, sp.Expr):
        raise ValueError(f"this exercise wants a sympy expression in {what}, got {shown(answer)}.")
    unknown = sorted(str(x) for x in answer.free_symbols if str(x) not in names)
    if unknown:
        raise ValueError(
            f"the expression uses {', '.join(unknown)}, which the question does not define; "
            f"write it in {what} only."
        )
    return answer.xreplace({x: names[str(x)] for x in answer.free_symbols})
