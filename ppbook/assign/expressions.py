"""A sympy expression as plain data, and back: how assignment 1's answers leave the kernel.

The grader trusts nothing a submission returns for more than data, and sympy's own text
forms (``srepr``, ``sympify``) are read back with ``eval``: a submission could hide any code
in them. So :func:`to_tree`, run in the submission's kernel, writes an expression as nested
lists (``["Add", ["Symbol", "p"], ["Integer", -1]]``), and :func:`from_tree`, run by the
grader, rebuilds it from a short list of node types, only over the glossary's symbols
(:mod:`ppbook.symbolic.symbols`), within bounds on size, depth and numbers.
:mod:`ppbook.assign.equality` then decides whether two such expressions are the same.
"""

from __future__ import annotations

import math

import sympy as sp

from ppbook.checks import shown
from ppbook.symbolic import symbols

SYMBOLS = {
    s.name: s for s in (symbols.p, symbols.m, symbols.v, symbols.t_f, symbols.t_b, symbols.c)
}
"""The symbols an answer may use, by name: the glossary's, with their assumptions."""

NODES = {"Add": sp.Add, "Mul": sp.Mul, "Pow": sp.Pow, "Max": sp.Max, "Min": sp.Min}
"""The operations an answer may use."""

MAX_NODES = 400
MAX_DEPTH = 40
MAX_INTEGER = 10**9
MAX_BASE = 1000


def to_tree(expr: object) -> list:
    """``expr`` (a sympy expression) as nested lists of strings and numbers."""
    if isinstance(expr, int | float) and not isinstance(expr, bool):
        expr = sp.sympify(expr)
    if not isinstance(expr, sp.Basic):
        raise ValueError(f"expected a sympy expression, got {shown(expr)}")
    if expr.is_Symbol:
        return ["Symbol", expr.name]
    if expr.is_Integer:
        return ["Integer", int(expr)]
    if expr.is_Rational:
        return ["Rational", int(expr.p), int(expr.q)]
    if expr.is_Float:
        return ["Float", float(expr)]
    name = type(expr).__name__
    if name not in NODES:
        raise ValueError(
            f"the expression uses {name}, which this answer does not need: write it with "
            "+, -, *, / and ** (and Max if you must)"
        )
    return [name, *(to_tree(arg) for arg in expr.args)]


def from_tree(data: object) -> sp.Expr:
    """The expression :func:`to_tree` wrote; ValueError saying what is wrong with ``data``."""
    count = [0]

    def build(node: object, depth: int) -> sp.Expr:
        count[0] += 1
        if count[0] > MAX_NODES or depth > MAX_DEPTH:
            raise ValueError(
                f"the expression is too large (more than {MAX_NODES} parts or {MAX_DEPTH} "
                "levels deep); the answer fits in one line"
            )
        if not isinstance(node, list) or not node or not isinstance(node[0], str):
            raise ValueError(f"not an expression written by to_tree: {shown(node)}")
        head, args = node[0], node[1:]
        if head == "Symbol":
            if len(args) != 1 or args[0] not in SYMBOLS:
                raise ValueError(
                    f"the expression uses the symbol {shown(args[0] if args else None)}; use "
                    f"only {', '.join(SYMBOLS)} from ppbook.symbolic.symbols"
                )
            return SYMBOLS[args[0]]
        if head in ("Integer", "Rational"):
            if not 1 <= len(args) <= 2 or not all(_small_int(a) for a in args) or args[-1] == 0:
                if len(args) == 1 and args[0] == 0:
                    return sp.S.Zero
                raise ValueError(f"not a small whole number or fraction: {shown(node)}")
            return sp.Rational(*args)
        if head == "Float":
            if len(args) != 1 or not _small_float(args[0]):
                raise ValueError(f"not a number between 1e-9 and 1e9 in size (or 0): {shown(node)}")
            return sp.Float(args[0])
        if head not in NODES or not args:
            raise ValueError(f"the expression uses {shown(head)}; use +, -, *, / and **")
        parts = [build(arg, depth + 1) for arg in args]
        if head == "Pow" and (
            len(parts) != 2
            or not _small_power(parts[1])
            or (parts[0].is_Number and abs(parts[0]) > MAX_BASE)
        ):
            raise ValueError(
                "a power needs an exponent between -8 and 8 (a whole number or a fraction), "
                f"and a number raised to it at most {MAX_BASE}"
            )
        built = NODES[head](*parts)
        if built.is_Pow and not _small_power(built.exp):
            raise ValueError("a power needs an exponent between -8 and 8")
        return built

    return build(data, 0)


def _small_int(value: object) -> bool:
    return type(value) is int and abs(value) <= MAX_INTEGER


def _small_float(value: object) -> bool:
    return (
        type(value) is float
        and math.isfinite(value)
        and (value == 0 or 1e-9 <= abs(value) <= MAX_INTEGER)
    )


def _small_power(exponent: sp.Expr) -> bool:
    return bool(exponent.is_Rational) and abs(exponent) <= 8
