"""A derived result in three forms: sympy expression, LaTeX, fast numeric function.

:func:`formulas` is the registry of every result chapter 1 derives, by name, each a
:class:`Formula` with its conditions of validity and its source. A formula is called
with numbers for its arguments, by position (in the order of ``args``) or by symbol
name::

    >>> from ppbook.symbolic import formulas
    >>> f = formulas()["bubble_fraction"]
    >>> f.latex
    '\\\\frac{p - 1}{m + p - 1}'
    >>> f(p=8, m=32)
    0.1794871794871795

Calls do no input checking: :mod:`ppbook.symbolic.numeric` has the checked entry points.
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property
from types import MappingProxyType

import sympy as sp

from ppbook.symbolic import bubble, gpipe, memory, schedules, sizing
from ppbook.symbolic.symbols import m, p, t_b, t_f, t_fb, t_i, t_w, target, v


@dataclass(frozen=True)
class Formula:
    """One derived result: ``expr`` in the symbols ``args``, with its meaning and source."""

    name: str
    expr: sp.Expr
    args: tuple[sp.Symbol, ...]
    meaning: str
    conditions: str
    source: str

    @property
    def latex(self) -> str:
        """The expression as LaTeX, for a notebook's Markdown or a plot label."""
        return sp.latex(self.expr)

    @cached_property
    def function(self) -> Callable[..., float]:
        """The expression compiled by :func:`sympy.lambdify` to plain Python (``math``)."""
        return sp.lambdify(self.args, self.expr, modules="math")

    def __call__(self, *values, **named):
        """Evaluate at numbers given by position (order of ``args``) or by symbol name."""
        names = [a.name for a in self.args]
        unknown = sorted(set(named) - set(names))
        if len(values) > len(names) or unknown:
            raise TypeError(f"{self.name} takes {names}, got {values} and {sorted(named)}")
        given = dict(zip(names, values, strict=False)) | named
        missing = [n for n in names if n not in given]
        if missing:
            raise TypeError(f"{self.name} takes {names}, missing {missing}")
        return self.function(*(given[n] for n in names))


_GPIPE = "GPipe, Huang et al. 2019, arXiv:1811.06965, sec. 2.3"
_MEGATRON = "Megatron-LM, Narayanan et al. 2021, arXiv:2104.04473"
_ZB = "Zero Bubble, Qi et al. 2024, arXiv:2401.10241, Table 2"
_DUALPIPE = "DeepSeek-V3, arXiv:2412.19437, Table 2; deepseek-ai/DualPipe README"
_UNIFORM = "uniform pass times on every stage, no transfer cost"
_INTERLEAVED = _UNIFORM + "; m a multiple of p"
_ZB_VALID = _UNIFORM + "; t_w <= t_f and t_w <= t_i"


@cache
def formulas() -> MappingProxyType[str, Formula]:
    """Every result of chapter 1 by name, read-only (derived on first call, under a second)."""
    entries = [
        Formula(
            "gpipe_makespan",
            gpipe.gpipe_makespan(),
            (p, m, t_f, t_b),
            "time of one GPipe (or 1F1B) step",
            _UNIFORM + "; any m >= 1",
            _GPIPE,
        ),
        Formula(
            "bubble_time",
            bubble.gpipe_bubble_time(),
            (p, m, t_f, t_b),
            "idle time of a GPipe step over all p devices",
            _UNIFORM,
            _GPIPE,
        ),
        Formula(
            "bubble_fraction",
            bubble.bubble_fraction(),
            (p, m),
            "bubble fraction f = idle / total time, GPipe and 1F1B",
            _UNIFORM,
            _GPIPE + "; Zero Bubble's bubble rate",
        ),
        Formula(
            "bubble_ratio",
            bubble.bubble_ratio(),
            (p, m),
            "bubble ratio r = idle / ideal compute time, GPipe and 1F1B",
            _UNIFORM,
            _MEGATRON + ", sec. 2.2.1; Ultra-Scale Playbook r_bubble",
        ),
        Formula(
            "interleaved_makespan",
            schedules.interleaved_makespan(),
            (p, m, v, t_f, t_b),
            "time of one interleaved 1F1B step, v chunks",
            _INTERLEAVED,
            _MEGATRON + ", sec. 2.2.2",
        ),
        Formula(
            "interleaved_bubble_fraction",
            schedules.interleaved_bubble_fraction(),
            (p, m, v),
            "bubble fraction f of interleaved 1F1B",
            _INTERLEAVED,
            _MEGATRON + ", sec. 2.2.2",
        ),
        Formula(
            "interleaved_bubble_ratio",
            schedules.interleaved_bubble_ratio(),
            (p, m, v),
            "bubble ratio r of interleaved 1F1B",
            _INTERLEAVED,
            _MEGATRON + ", sec. 2.2.2; Ultra-Scale Playbook",
        ),
        Formula(
            "zb_h1_makespan",
            schedules.zb_h1_makespan(),
            (p, m, t_f, t_i, t_w),
            "time of one ZB-H1 step (t_i: input-gradient pass, the paper's B)",
            _ZB_VALID + "; m >= p",
            _ZB,
        ),
        Formula(
            "zb_h1_bubble",
            schedules.zb_h1_bubble(),
            (p, t_f, t_i, t_w),
            "idle time of one device under ZB-H1",
            _ZB_VALID + "; m >= p",
            _ZB,
        ),
        Formula(
            "zb_h2_makespan",
            schedules.zb_h2_makespan(),
            (p, m, t_f, t_i, t_w),
            "time of one ZB-H2 step",
            _UNIFORM + "; t_w <= t_f and t_i >= 2 t_w; m >= 2p-1",
            _ZB,
        ),
        Formula(
            "zb_h2_bubble",
            schedules.zb_h2_bubble(),
            (p, t_f, t_i, t_w),
            "idle time of one device under ZB-H2",
            _UNIFORM + "; t_w <= t_f and t_i >= 2 t_w; m >= 2p-1",
            _ZB,
        ),
        Formula(
            "dualpipe_bubble",
            schedules.dualpipe_bubble(),
            (p, t_fb, t_b, t_w),
            "DualPipe's bubble (t_b: full backward; t_fb: overlapped F&B pair)",
            "p even; as published, not derived",
            _DUALPIPE,
        ),
        Formula(
            "gpipe_peak_activations",
            memory.gpipe_peak_activations(),
            (m,),
            "peak in-flight micro-batches on the first stage, GPipe",
            "any m",
            _GPIPE,
        ),
        Formula(
            "one_f_one_b_peak_activations",
            memory.one_f_one_b_peak_activations(),
            (p, m),
            "peak in-flight micro-batches on the first stage, 1F1B",
            "any m",
            "PipeDream-Flush, arXiv:2006.09503",
        ),
        Formula(
            "interleaved_peak_activations",
            memory.interleaved_peak_activations(),
            (p, m, v),
            "peak in-flight activations, first device, in full-stage units",
            "v >= 2; m a multiple of p",
            _MEGATRON + ", sec. 2.2.2",
        ),
        Formula(
            "zb_h1_peak_activations",
            memory.zb_h1_peak_activations(),
            (p,),
            "peak in-flight micro-batches per device, ZB-H1",
            "m >= p",
            _ZB,
        ),
        Formula(
            "zb_h2_peak_activations",
            memory.zb_h2_peak_activations(),
            (p,),
            "peak in-flight micro-batches per device, ZB-H2",
            "m >= 2p-1",
            _ZB,
        ),
        Formula(
            "dualpipe_peak_activations",
            memory.dualpipe_peak_activations(),
            (p,),
            "activations per device, DualPipe (table's units)",
            "p even",
            _DUALPIPE,
        ),
        Formula(
            "bubble_fraction_at_4p",
            sizing.bubble_at_microbatches_per_stage(),
            (p,),
            "bubble fraction at GPipe's m = 4p",
            _UNIFORM,
            _GPIPE,
        ),
        Formula(
            "min_microbatches_fraction",
            sizing.min_microbatches_expr("fraction"),
            (p, target, v),
            "smallest m with bubble fraction <= b",
            "at least 1; with v > 1 round up to a multiple of p",
            _GPIPE,
        ),
        Formula(
            "min_microbatches_ratio",
            sizing.min_microbatches_expr("ratio"),
            (p, target, v),
            "smallest m with bubble ratio <= b",
            "at least 1; with v > 1 round up to a multiple of p",
            _MEGATRON,
        ),
    ]
    return MappingProxyType({f.name: f for f in entries})
