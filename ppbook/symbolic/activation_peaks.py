"""Peak in-flight activations on the first stage, per schedule (chapter 1, REFERENCES.md).

Closed forms as published, checked against the simulator (not derived): the tests
compare each with :meth:`ppbook.timeline.Timeline.peak_activations` on a grid within its
conditions. The unit is the activations of one micro-batch on one full stage (one
device's share of the model); a chunk of an interleaved schedule holds 1/v of that. A micro-batch's
activations are in flight on a device from the start of its forward until its backward
(or, with the backward split, its weight-gradient pass W) has run. The first stage holds
the most: it starts the most forwards before the first backward comes back.

Sources: GPipe, arXiv:1811.06965; 1F1B, arXiv:2006.09503; interleaved 1F1B, Megatron-LM
arXiv:2104.04473 sec. 2.2.2 (warm-up count as in Megatron-LM and
``torch.distributed.pipelining``); ZB-H1 and ZB-H2, arXiv:2401.10241 Table 2; DualPipe,
arXiv:2412.19437 Table 2.
"""

from functools import cache

import sympy as sp

from ppbook.symbolic.symbols import m, p, v


@cache
def gpipe_peak_activations() -> sp.Expr:
    """GPipe: all m forwards run before the first backward, so m micro-batches."""
    return m


@cache
def one_f_one_b_peak_activations() -> sp.Expr:
    """1F1B: p-1 warm-up forwards plus the steady state's first, at most m: min(p, m)."""
    warmup = sp.Min(p - 1, m)
    plus_first_steady = sp.Min(*(a + 1 for a in warmup.args))  # min(p-1, m) + 1
    return sp.Min(plus_first_steady, m)


@cache
def interleaved_peak_activations() -> sp.Expr:
    """Interleaved 1F1B: min(m, p + (p-1)/v) micro-batches of a full stage.

    The first device runs (v-1)p + 2(p-1) warm-up chunk forwards and one more before
    its first chunk backward; each chunk holds 1/v of a stage's activations. Valid for
    ``v >= 2`` and ``m`` a multiple of ``p`` (with ``v = 1`` Megatron-LM runs plain 1F1B).
    """
    chunks_in_flight = (v - 1) * p + 2 * (p - 1) + 1
    return sp.Min(m, sp.apart(chunks_in_flight / v, v))


@cache
def zb_h1_peak_activations() -> sp.Expr:
    """ZB-H1: p micro-batches, as 1F1B (W passes are deferred on later stages only)."""
    return p


@cache
def zb_h2_peak_activations() -> sp.Expr:
    """ZB-H2: 2p-1 micro-batches; needs m >= 2p-1."""
    return 2 * p - 1


@cache
def dualpipe_peak_activations() -> sp.Expr:
    """DualPipe: p+1 micro-batches' activations per device, in its table's units (2x parameters)."""
    return p + 1
