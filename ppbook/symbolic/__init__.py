"""ppbook's symbolic layer: pipeline-parallel closed forms in sympy (chapter 1).

Two kinds of result live here, and each says which it is (:mod:`.record`):

- **derived** with sympy: the GPipe makespan from the recurrences of its timeline
  (:mod:`.gpipe`), the two bubble conventions from that makespan and the identities
  between them (:mod:`.bubble`), the sizing inverses by solving for ``m`` (:mod:`.sizing`);
- **closed forms as published, checked against the simulator**: 1F1B, interleaved 1F1B,
  ZB-H1, ZB-H2 and DualPipe (:mod:`.schedules`) and the peak activations (:mod:`.memory`),
  which the code adds up from each schedule's known structure; the tests compare every
  one with :func:`ppbook.simulate.simulate` on a grid within its conditions.

Every function returns a sympy expression in the glossary's symbols (:mod:`.symbols`:
``p`` stages, ``m`` micro-batches, ``v`` chunks, ``t_f``, ``t_b``, ``t_i``, ``t_w`` pass
times of one device's share of the model). :func:`formulas` gives each result with its
LaTeX, its conditions (stated, and checked when it is called with numbers), its source
and how it was obtained; :mod:`.numeric` has checked numeric entry points such as
``numeric.bubble_fraction(p, m, v=1)``. :func:`ppbook.closed_form.gpipe_timeline` puts the
derived GPipe times on a schedule as a Timeline.

Sources (REFERENCES.md): GPipe, arXiv:1811.06965; Megatron-LM, arXiv:2104.04473;
PipeDream-Flush, arXiv:2006.09503; Zero Bubble, arXiv:2401.10241; DeepSeek-V3 /
DualPipe, arXiv:2412.19437; the Hugging Face Ultra-Scale Playbook. This layer imports
sympy and, of ppbook, only :mod:`ppbook.checks`: never torch, never matplotlib, never
the schedules or the simulator.
"""

from ppbook.symbolic.activation_peaks import (
    dualpipe_peak_activations,
    gpipe_peak_activations,
    interleaved_peak_activations,
    one_f_one_b_peak_activations,
    zb_h1_peak_activations,
    zb_h2_peak_activations,
)
from ppbook.symbolic.activations import activation_formulas
from ppbook.symbolic.bubble_conventions import (
    bubble_fraction,
    bubble_fraction_of,
    bubble_ratio,
    bubble_ratio_of,
    convention_identity_residuals,
    fraction_from_ratio,
    gpipe_bubble_time,
    gpipe_compute_time,
    per_device_bubble_time,
    ratio_from_fraction,
)
from ppbook.symbolic.formula import formulas
from ppbook.symbolic.gpipe import (
    backward_finish,
    backward_recurrence_residuals,
    first_microbatch_forwards_by_rsolve,
    first_stage_forwards_by_rsolve,
    forward_finish,
    forward_recurrence_residuals,
    gpipe_makespan,
    gpipe_makespan_with_transfer,
)
from ppbook.symbolic.microbatch_target import (
    bubble_at_microbatches_per_stage,
    bubble_at_rule_of_thumb_limit,
    bubble_expr,
    bubble_limit,
    min_microbatches_expr,
)
from ppbook.symbolic.record import DERIVED, PUBLISHED, Formula
from ppbook.symbolic.schedules import (
    dualpipe_bubble,
    interleaved_bubble,
    interleaved_bubble_fraction,
    interleaved_bubble_ratio,
    interleaved_makespan,
    one_f_one_b_bubble,
    one_f_one_b_makespan,
    pipeline_makespan,
    zb1p_bubble_dualpipe_notation,
    zb_h1_bubble,
    zb_h1_makespan,
    zb_h2_bubble,
    zb_h2_makespan,
)

__all__ = [
    "DERIVED",
    "PUBLISHED",
    "Formula",
    "activation_formulas",
    "backward_finish",
    "backward_recurrence_residuals",
    "bubble_at_microbatches_per_stage",
    "bubble_at_rule_of_thumb_limit",
    "bubble_expr",
    "bubble_fraction",
    "bubble_fraction_of",
    "bubble_limit",
    "bubble_ratio",
    "bubble_ratio_of",
    "convention_identity_residuals",
    "dualpipe_bubble",
    "dualpipe_peak_activations",
    "first_microbatch_forwards_by_rsolve",
    "first_stage_forwards_by_rsolve",
    "formulas",
    "forward_finish",
    "forward_recurrence_residuals",
    "fraction_from_ratio",
    "gpipe_bubble_time",
    "gpipe_compute_time",
    "gpipe_makespan",
    "gpipe_makespan_with_transfer",
    "gpipe_peak_activations",
    "interleaved_bubble",
    "interleaved_bubble_fraction",
    "interleaved_bubble_ratio",
    "interleaved_makespan",
    "interleaved_peak_activations",
    "min_microbatches_expr",
    "one_f_one_b_bubble",
    "one_f_one_b_makespan",
    "one_f_one_b_peak_activations",
    "per_device_bubble_time",
    "pipeline_makespan",
    "ratio_from_fraction",
    "zb1p_bubble_dualpipe_notation",
    "zb_h1_bubble",
    "zb_h1_makespan",
    "zb_h1_peak_activations",
    "zb_h2_bubble",
    "zb_h2_makespan",
    "zb_h2_peak_activations",
]
