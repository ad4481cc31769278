"""The registry of chapter 1's closed forms: :func:`formulas`, each a :class:`Formula`.

Each entry says whether it is derived with sympy or a closed form as published, checked
against the simulator (:mod:`.record`), its conditions in words and as checks a call
makes, and its source (REFERENCES.md)::

    >>> from ppbook.symbolic import formulas
    >>> f = formulas()["bubble_fraction"]
    >>> f.latex
    '\\\\frac{p - 1}{m + p - 1}'
    >>> f(p=8, m=32)
    0.1794871794871795
    >>> formulas()["zb_h2_bubble"](p=4, t_f=1, t_i=2, t_w=3)
    Traceback (most recent call last):
    ...
    ValueError: zb_h2_bubble needs t_w <= t_f (W no longer than F), got t_f = 1, t_w = 3

Pass times are those of one micro-batch through one device's share of the model (1/p of
its layers); interleaved 1F1B runs each of its v chunk passes in t_f/v and t_b/v, as the
simulator does under the same :class:`~ppbook.costs.Costs` (ppbook's cost convention).
"""

from functools import cache
from types import MappingProxyType

import sympy as sp

from ppbook.symbolic import activation_peaks as memory
from ppbook.symbolic import bubble_conventions as bubble
from ppbook.symbolic import gpipe, schedules
from ppbook.symbolic import microbatch_target as sizing
from ppbook.symbolic.record import DERIVED, PUBLISHED, Formula
from ppbook.symbolic.symbols import m, p, t_b, t_f, t_fb, t_i, t_w, target, v

_GPIPE = "GPipe, Huang et al. 2019, arXiv:1811.06965, sec. 2.3"
_MEGATRON = "Megatron-LM, Narayanan et al. 2021, arXiv:2104.04473"
_ZB = "Zero Bubble, Qi et al. 2024, arXiv:2401.10241, Table 2"
_DUALPIPE = "DeepSeek-V3, arXiv:2412.19437, Table 2; deepseek-ai/DualPipe README"
_UNIFORM = "uniform pass times on every stage, no transfer cost"
_SHARE = "t_f, t_b for one device's share of the model (a chunk pass takes t_f/v, t_b/v)"
_INTERLEAVED = f"{_UNIFORM}; {_SHARE}; m a multiple of p when v > 1"

_MULTIPLE = (sp.Or(sp.Eq(v, 1), sp.Eq(sp.Mod(m, p), 0)), "m a multiple of p when v > 1")
_W_LE_F = (t_w <= t_f, "t_w <= t_f (W no longer than F)")
_W_LE_I = (t_w <= t_i, "t_w <= t_i (W no longer than I)")
_P_EVEN = (sp.Eq(sp.Mod(p, 2), 0), "an even number of ranks p")
_ZB_H1 = f"{_UNIFORM}; t_w <= t_f and t_w <= t_i; m >= p"
_ZB_H2 = f"{_UNIFORM}; t_w <= t_f; m >= 2p-1 (the schedule's own condition)"
_DUALPIPE_VALID = (
    f"{_UNIFORM}; p even, m even and m >= 2p; the table's B is the full backward with "
    "I = F, so t_b = t_f + t_w; W <= F and F&B >= F + W, that is t_b >= 2 t_w and "
    "t_fb >= t_b; the idle time of the two middle ranks (of every rank when t_fb = t_f + t_b)"
)


@cache
def formulas() -> MappingProxyType[str, Formula]:
    """Every closed form of chapter 1 by name, read-only (built once, on the first call)."""
    entries = [
        Formula(
            "gpipe_makespan",
            gpipe.gpipe_makespan(),
            (p, m, t_f, t_b),
            "time of one GPipe (or 1F1B) step",
            _UNIFORM + "; any m >= 1",
            _GPIPE,
            DERIVED,
        ),
        Formula(
            "bubble_time",
            bubble.gpipe_bubble_time(),
            (p, m, t_f, t_b),
            "idle time of a GPipe step over all p devices",
            _UNIFORM + "; any m >= 1",
            _GPIPE,
            DERIVED,
        ),
        Formula(
            "bubble_fraction",
            bubble.bubble_fraction(),
            (p, m),
            "bubble fraction f = idle / total time, GPipe and 1F1B",
            _UNIFORM + "; any m >= 1",
            _GPIPE,
            DERIVED,
        ),
        Formula(
            "bubble_ratio",
            bubble.bubble_ratio(),
            (p, m),
            "bubble ratio r = idle / ideal compute time, GPipe and 1F1B",
            _UNIFORM + "; any m >= 1",
            _MEGATRON + ", sec. 2.2.1; Ultra-Scale Playbook r_bubble",
            DERIVED,
        ),
        Formula(
            "interleaved_makespan",
            schedules.interleaved_makespan(),
            (p, m, v, t_f, t_b),
            "time of one interleaved 1F1B step, v chunks",
            _INTERLEAVED,
            _MEGATRON + ", sec. 2.2.2",
            PUBLISHED,
            (_MULTIPLE,),
        ),
        Formula(
            "interleaved_bubble_fraction",
            schedules.interleaved_bubble_fraction(),
            (p, m, v),
            "bubble fraction f of interleaved 1F1B",
            _INTERLEAVED,
            _MEGATRON + ", sec. 2.2.2",
            PUBLISHED,
            (_MULTIPLE,),
        ),
        Formula(
            "interleaved_bubble_ratio",
            schedules.interleaved_bubble_ratio(),
            (p, m, v),
            "bubble ratio r of interleaved 1F1B",
            _INTERLEAVED,
            _MEGATRON + ", sec. 2.2.2; Ultra-Scale Playbook",
            PUBLISHED,
            (_MULTIPLE,),
        ),
        Formula(
            "zb_h1_makespan",
            schedules.zb_h1_makespan(),
            (p, m, t_f, t_i, t_w),
            "time of one ZB-H1 step (t_i: input-gradient pass, the paper's B)",
            _ZB_H1,
            _ZB,
            PUBLISHED,
            (_W_LE_F, _W_LE_I, (m >= p, "m >= p")),
        ),
        Formula(
            "zb_h1_bubble",
            schedules.zb_h1_bubble(),
            (p, t_f, t_i, t_w),
            "idle time of each device in one ZB-H1 step",
            _ZB_H1,
            _ZB,
            PUBLISHED,
            (_W_LE_F, _W_LE_I),
        ),
        Formula(
            "zb_h2_makespan",
            schedules.zb_h2_makespan(),
            (p, m, t_f, t_i, t_w),
            "time of one ZB-H2 step; Table 2's when t_i >= 2 t_w",
            _ZB_H2,
            _ZB + "; one step when t_i < 2 t_w: ppbook.schedules.zero_bubble",
            PUBLISHED,
            (_W_LE_F, (m >= 2 * p - 1, "m >= 2p-1")),
        ),
        Formula(
            "zb_h2_bubble",
            schedules.zb_h2_bubble(),
            (p, t_f, t_i, t_w),
            "idle time of each device in one ZB-H2 step; Table 2's when t_i >= 2 t_w",
            _ZB_H2,
            _ZB + "; one step when t_i < 2 t_w: ppbook.schedules.zero_bubble",
            PUBLISHED,
            (_W_LE_F,),
        ),
        Formula(
            "dualpipe_bubble",
            schedules.dualpipe_bubble(),
            (p, t_fb, t_b, t_w),
            "DualPipe's bubble (t_b: full backward; t_fb: overlapped F&B pair)",
            _DUALPIPE_VALID,
            _DUALPIPE,
            PUBLISHED,
            (_P_EVEN, (t_b >= 2 * t_w, "t_b >= 2 t_w (W <= F)"), (t_fb >= t_b, "t_fb >= t_b")),
        ),
        Formula(
            "gpipe_peak_activations",
            memory.gpipe_peak_activations(),
            (m,),
            "peak in-flight micro-batches on the first stage, GPipe",
            "any m >= 1",
            _GPIPE,
            PUBLISHED,
        ),
        Formula(
            "one_f_one_b_peak_activations",
            memory.one_f_one_b_peak_activations(),
            (p, m),
            "peak in-flight micro-batches on the first stage, 1F1B",
            "any m >= 1",
            "PipeDream-Flush, arXiv:2006.09503",
            PUBLISHED,
        ),
        Formula(
            "interleaved_peak_activations",
            memory.interleaved_peak_activations(),
            (p, m, v),
            "peak in-flight activations, first device, in micro-batches of a full stage",
            "v >= 2; m a multiple of p",
            _MEGATRON + ", sec. 2.2.2",
            PUBLISHED,
            ((v >= 2, "v >= 2 (with v = 1, 1F1B's)"), _MULTIPLE),
        ),
        Formula(
            "zb_h1_peak_activations",
            memory.zb_h1_peak_activations(),
            (p,),
            "peak in-flight micro-batches per device, ZB-H1",
            "m >= p",
            _ZB,
            PUBLISHED,
        ),
        Formula(
            "zb_h2_peak_activations",
            memory.zb_h2_peak_activations(),
            (p,),
            "peak in-flight micro-batches per device, ZB-H2",
            "m >= 2p-1",
            _ZB,
            PUBLISHED,
        ),
        Formula(
            "dualpipe_peak_activations",
            memory.dualpipe_peak_activations(),
            (p,),
            "activations per device, DualPipe, in micro-batches of one model part",
            "p even, m even and m >= 2p",
            _DUALPIPE,
            PUBLISHED,
            (_P_EVEN,),
        ),
        Formula(
            "bubble_fraction_at_4p",
            sizing.bubble_at_microbatches_per_stage(),
            (p,),
            "bubble fraction at GPipe's m = 4p",
            _UNIFORM,
            _GPIPE,
            DERIVED,
        ),
        Formula(
            "min_microbatches_fraction",
            sizing.min_microbatches_expr("fraction"),
            (p, target, v),
            "smallest m with bubble fraction <= b",
            "at least 1; with v > 1 round up to a multiple of p",
            _GPIPE,
            DERIVED,
        ),
        Formula(
            "min_microbatches_ratio",
            sizing.min_microbatches_expr("ratio"),
            (p, target, v),
            "smallest m with bubble ratio <= b",
            "at least 1; with v > 1 round up to a multiple of p",
            _MEGATRON,
            DERIVED,
        ),
    ]
    return MappingProxyType({f.name: f for f in entries})
