"""Makespans and bubbles of 1F1B, interleaved 1F1B, ZB-H1, ZB-H2 and DualPipe.

These are closed forms as published, checked against the simulator, not derived: the
code adds each makespan up from the schedule's known structure, as seen by its busiest
device (its compute, the warm-up chain it waits for before its first backward, the
cool-down chain of backwards it waits for at the end, minus the passes the schedule
moves into those waits), and the tests compare every one with
:func:`ppbook.simulate.simulate` on a grid of p, m and pass times within its conditions.
Outside its conditions a formula is wrong, not approximate: its :class:`~.record.Formula`
record refuses such inputs.

The "bubble" of these functions is a bubble *time*: the makespan minus the compute, per
device (Table 2 of the Zero Bubble paper and the DualPipe table report this idle time,
not one of the two ratios; divide by the makespan for the bubble fraction f, by the
compute for the bubble ratio r). No transfer cost; uniform pass times on every stage.
Pass times are those of one micro-batch through one device's share of the model (1/p of
its layers): ppbook's cost convention, under which the simulator runs an interleaved
chunk pass in t_f/v (REFERENCES.md).

Sources:

- 1F1B (PipeDream-Flush): Narayanan et al. 2021, arXiv:2006.09503; Megatron-LM,
  arXiv:2104.04473, sec. 2.2.1. Same makespan as GPipe, (m+p-1)(t_f+t_b).
- Interleaved 1F1B: Megatron-LM, arXiv:2104.04473, sec. 2.2.2; Ultra-Scale Playbook,
  ``r_bubble = (p-1)/(v m)``.
- ZB-H1, ZB-H2: Qi et al. 2024, "Zero Bubble Pipeline Parallelism", arXiv:2401.10241,
  Table 2. Their B is the input-gradient pass only: ppbook writes it ``t_i`` (PyTorch's
  ``I``), so the paper's (p-1)(F+B-W) reads (p-1)(t_f+t_i-t_w) here.
- DualPipe: DeepSeek-V3 technical report, arXiv:2412.19437, Table 2, and the
  deepseek-ai/DualPipe README. There B is the full backward (``t_b``) and F&B is one
  overlapped forward-and-backward chunk pair (``t_fb``).
"""

from functools import cache

import sympy as sp

from ppbook.symbolic.bubble_conventions import bubble_fraction_of, bubble_ratio_of
from ppbook.symbolic.symbols import k, m, p, t_b, t_f, t_fb, t_i, t_w, v


def pipeline_makespan(
    compute: sp.Expr, warmup: sp.Expr, cooldown: sp.Expr, filled: sp.Expr = sp.S.Zero
) -> sp.Expr:
    """Makespan of the busiest device: compute + warm-up wait + cool-down wait - filled.

    ``filled`` is the work the schedule moves into the waits (deferred W passes). The
    result is kept as compute plus bubble, each factored: m(t_f + t_b) + (p-1)(t_f + t_b).
    """
    return sp.factor(compute) + sp.factor(warmup + cooldown - filled)


@cache
def one_f_one_b_makespan() -> sp.Expr:
    """1F1B: m(t_f+t_b) of compute, (p-1) forwards of warm-up, (p-1) backwards of cool-down.

    As published (equal to GPipe's), checked against the simulator for any ``m >= 1``
    (PyTorch's Schedule1F1B asks ``m >= p``).
    """
    warmup = sp.summation(t_f, (k, 1, p - 1))
    cooldown = sp.summation(t_b, (k, 1, p - 1))
    return sp.factor(pipeline_makespan(m * (t_f + t_b), warmup, cooldown))


@cache
def one_f_one_b_bubble() -> sp.Expr:
    """Idle time of one device under 1F1B (or GPipe): (p-1)(t_f+t_b)."""
    return sp.factor(one_f_one_b_makespan() - m * (t_f + t_b))


@cache
def interleaved_makespan() -> sp.Expr:
    """Interleaved 1F1B with v chunks per device: m(t_f+t_b) + (p-1)(t_f+t_b)/v.

    ``t_f`` and ``t_b`` are the passes of one device's share of the model; each of its v
    chunks holds 1/v of that share, so a chunk pass lasts t_f/v or t_b/v (the simulator
    runs it so under the same costs). The compute is unchanged (v chunks, m micro-batches
    each); the warm-up and cool-down chains are still p-1 steps long, but each step is one
    chunk pass. As published (Megatron-LM, sec. 2.2.2), checked against the simulator for
    ``v >= 1`` and, when ``v > 1``, ``m`` a multiple of ``p`` (Megatron-LM's condition). It
    holds as well for every ``m >= p`` that PyTorch's ScheduleInterleaved1F1B runs (``m`` a
    multiple of max(1, m // p)); below p the simulator gives p(t_f+t_b) + (m-1)(t_f+t_b)/v
    (tests/test_schedules_pytorch_orders.py).
    """
    compute = sp.summation(m * (t_f + t_b) / v, (k, 1, v))
    warmup = sp.summation(t_f / v, (k, 1, p - 1))
    cooldown = sp.summation(t_b / v, (k, 1, p - 1))
    return pipeline_makespan(compute, warmup, cooldown)


@cache
def interleaved_bubble() -> sp.Expr:
    """Idle time of one device under interleaved 1F1B: (p-1)(t_f+t_b)/v."""
    return sp.factor(interleaved_makespan() - m * (t_f + t_b))


@cache
def interleaved_bubble_fraction() -> sp.Expr:
    """Interleaved bubble fraction f = (p-1)/(v m + p - 1); ``m`` a multiple of ``p``."""
    return bubble_fraction_of(interleaved_bubble(), m * (t_f + t_b))


@cache
def interleaved_bubble_ratio() -> sp.Expr:
    """Interleaved bubble ratio r = (p-1)/(v m) (Megatron-LM, the Playbook); ``p | m``."""
    return bubble_ratio_of(interleaved_bubble(), m * (t_f + t_b))


@cache
def zb_h1_makespan() -> sp.Expr:
    """ZB-H1: m(t_f+t_i+t_w) + (p-1)(t_f+t_i-t_w), backward split into I (t_i) and W (t_w).

    Structure: the warm-up chain is p-1 forwards; the cool-down chain carries only the
    input gradients, p-1 passes of t_i, because W passes leave the critical path; p-1
    deferred W passes fill that wait. As published (Table 2), checked against the
    simulator when ``t_w <= t_f``, ``t_w <= t_i`` (so the deferred W passes fit the gaps
    they fill) and ``m >= p``. Peak activations as 1F1B.
    """
    compute = m * (t_f + t_i + t_w)
    warmup = sp.summation(t_f, (k, 1, p - 1))
    cooldown = sp.summation(t_i, (k, 1, p - 1))
    filled = sp.summation(t_w, (k, 1, p - 1))
    return pipeline_makespan(compute, warmup, cooldown, filled)


@cache
def zb_h1_bubble() -> sp.Expr:
    """Idle time of each device in one ZB-H1 step: (p-1)(t_f+t_i-t_w); same conditions."""
    return sp.factor(zb_h1_makespan() - m * (t_f + t_i + t_w))


@cache
def zb_h2_makespan() -> sp.Expr:
    """ZB-H2, one step: m(t_f+t_i+t_w) + (p-1)(t_f + max(0, t_i-2t_w)).

    Structure: as ZB-H1, with more warm-up forwards (up to 2p-1 in flight) so that two W
    passes, not one, can follow each input gradient of the cool-down; they fill each of
    its p-1 waits of t_i up to the whole of it. When ``t_i >= 2 t_w`` this
    is Table 2's m(t_f+t_i+t_w) + (p-1)(t_f+t_i-2t_w). When ``t_i < 2 t_w`` one step
    takes (p-1) t_f beyond its compute (the two triangles at the ends of the
    parallelogram: the last device cannot start before (p-1) t_f); Table 2's zero bubble
    at F = I = W counts them as overlapped with the neighbouring steps, which the paper's
    optimizer post-validation allows (sec. 4). Checked against the simulator when
    ``t_w <= t_f`` and ``m >= 2p-1`` (ZB-H2's own condition).
    """
    compute = m * (t_f + t_i + t_w)
    warmup = sp.summation(t_f, (k, 1, p - 1))
    # each cool-down wait t_i, less the two W passes that fill it
    unfilled = sp.summation(sp.Max(0, t_i - 2 * t_w), (k, 1, p - 1))
    return pipeline_makespan(compute, warmup, unfilled)


@cache
def zb_h2_bubble() -> sp.Expr:
    """Idle time of each device in one ZB-H2 step: (p-1)(t_f + max(0, t_i-2t_w)).

    Table 2's (p-1)(t_f+t_i-2t_w) when ``t_i >= 2 t_w``; same conditions as the makespan.
    """
    return sp.factor(zb_h2_makespan() - m * (t_f + t_i + t_w))


@cache
def dualpipe_bubble() -> sp.Expr:
    """DualPipe's bubble (p/2-1)(t_fb+t_b-3t_w), as published, checked against the simulator.

    From the DeepSeek-V3 report (arXiv:2412.19437, Table 2) and the DualPipe README,
    where B is the full backward (t_b) and F&B the overlapped forward-and-backward chunk
    pair (t_fb). It is the idle time of the two middle ranks when p is even, m even and
    m >= 2p, the table's B is I + W with I = F (so t_b = t_f + t_w), W <= F and
    F&B >= F + W (so t_b >= 2 t_w and t_fb >= t_b); every rank idles that long when
    F&B = F + B. Outside these conditions the simulated idle time differs, either way
    (:mod:`ppbook.schedules.dualpipe`). DualPipeV on p ranks has the table's PP = 2p: its
    bottom rank idles (p-1)(t_fb+t_b-3t_w) in chunk pass times, which under ppbook's cost
    convention are half of one device's share.
    """
    return (p / 2 - 1) * (t_fb + t_b - 3 * t_w)


@cache
def zb1p_bubble_dualpipe_notation() -> sp.Expr:
    """The DualPipe table's ZB1P row, (p-1)(t_f+t_b-2t_w), with B the full backward.

    As published; with t_b = t_i + t_w it is ZB-H1's bubble, and so holds under its
    conditions.
    """
    return (p - 1) * (t_f + t_b - 2 * t_w)
