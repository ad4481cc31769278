"""The sympy symbols of ppbook's glossary, shared by every derivation (chapter 1).

=========  ==========================================================================
symbol     meaning
=========  ==========================================================================
``p``      num_stages: pipeline stages, one per device
``m``      num_microbatches: micro-batches per training step
``v``      num_chunks: model chunks per device (interleaved schedules)
``t_f``    time of one forward pass of one micro-batch through one device's share of
           the model (1/p of its layers, a stage); an interleaved schedule runs each
           of its v chunk passes in t_f/v (ppbook's cost convention, as the simulator)
``t_b``    the same for one full backward pass (B in GPipe, Megatron-LM, PyTorch and
           the DualPipe table)
``t_i``    the same for the input-gradient part of the backward (PyTorch's ``I``; the
           Zero Bubble paper calls it B)
``t_w``    the same for the weight-gradient part of the backward (W); ``t_b = t_i + t_w``
           when the backward splits without overhead
``t_fb``   time of one overlapped forward-and-backward chunk pair (DualPipe's F&B)
``c``      time of one point-to-point transfer between neighbouring devices
``s``      a stage index, ``0 <= s < p``
``u``      a stage index counted from the last stage, ``u = p - 1 - s``
``j``      a micro-batch index, ``0 <= j < m``
``k``      a summation index
=========  ==========================================================================

The assumptions (integers for counts and indices, positive times, ``c >= 0``) are what
let sympy decide the ``Max`` in a recurrence and cancel factors in a ratio.
"""

import sympy as sp

p = sp.Symbol("p", integer=True, positive=True)
m = sp.Symbol("m", integer=True, positive=True)
v = sp.Symbol("v", integer=True, positive=True)

t_f = sp.Symbol("t_f", positive=True)
t_b = sp.Symbol("t_b", positive=True)
t_i = sp.Symbol("t_i", positive=True)
t_w = sp.Symbol("t_w", positive=True)
t_fb = sp.Symbol("t_fb", positive=True)
c = sp.Symbol("c", nonnegative=True)

s = sp.Symbol("s", integer=True, nonnegative=True)
u = sp.Symbol("u", integer=True, nonnegative=True)
j = sp.Symbol("j", integer=True, nonnegative=True)
k = sp.Symbol("k", integer=True)

#: A target bubble (fraction or ratio) a reader wants to stay under, for the sizing inverses.
target = sp.Symbol("b", positive=True)

#: Idle time and ideal compute time of a whole step, for identities that hold for any schedule.
idle = sp.Symbol("T_idle", nonnegative=True)
compute = sp.Symbol("T_comp", positive=True)
