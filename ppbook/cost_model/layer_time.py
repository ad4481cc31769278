"""Pass times of a transformer layer from a model of the GPU (chapter 8, ``ppbook layer``).

One pre-norm layer in 16-bit, one micro-batch of ``b`` sequences of ``s`` tokens on one
of ``t`` tensor-parallel ranks (``T = b s / cp`` tokens with ``cp``-way context
parallelism). The GPT-3 layer (LayerNorm, multi-head attention, LayerNorm, a 4h GELU MLP)
is the one measured; today's layers (grouped-query attention, SwiGLU, mixture of experts,
DeepSeek's MLA) are timed from the matrices their shape gives
(:func:`ppbook.cost_model.flops.layer_gemms`), with the same constants. Its passes are built
from three kinds of work, each timed on the GPU's datasheet figures
(:mod:`ppbook.cost_model.gpu_cards`: dense BF16 peak ``P``, HBM bandwidth ``M``):

- **matrix multiplies** (GEMMs), the weight multiplies of Megatron-LM's layer split (for
  GPT: QKV h x 3h/t, projection h/t x h, MLP h x 4h/t and 4h/t x h; GQA's narrower QKV,
  SwiGLU's fused gate and up, the router, each local expert's MLP as a grouped GEMM over
  its ``ep T k / E`` rows, MLA's down- and up-projections) over the tokens. A GEMM of
  m x k by k x n runs ``2 m n k`` FLOPs and moves at least ``2 (m k + k n + m n)`` bytes;
  its arithmetic intensity ``x`` is their ratio. It runs at an efficiency that saturates
  with the intensity, ``eff(x) = GEMM_EFFICIENCY * x / (x + GEMM_HALF_RIDGE * P / M)``, a
  curve whose half-point is a fixed share of the card's ridge point ``P / M``; its time is
  ``max(flops / (P eff(x)), bytes / M)`` (a roofline). Small or thin GEMMs (few tokens, a
  narrow ``h / t``, attention's head dimension, an expert's few rows) run far below peak,
  large ones near ``GEMM_EFFICIENCY``. The forward runs ``Y = X W``; the input-gradient
  pass ``I`` the same shapes as ``dX = dY W^T``; the weight-gradient pass ``W`` runs
  ``dW = X^T dY``, whose inner dimension is the tokens.
- **attention**: ``"flash"`` (the default, the measured block): causal flash attention
  computes half of the ``2 T s a (d_qk + d_v) / t`` FLOPs of QK^T and attention over V
  (4 b s^2 h / t for GPT), at ``FLASH_EFFICIENCY`` of peak, without writing the s x s
  scores; its backward recomputes the scores and runs five multiplies where the forward
  ran two: ``FLASH_BACKWARD`` (2.5) times the forward's work, all in ``I``.
  ``"standard"`` materialises the scores: two batched GEMMs of head dimension d over the
  full s x s (the causal mask only masks), timed by the GEMM curve, and a fused
  scale-mask-softmax that reads and writes the scores in HBM (memory-bound); its
  backward runs four such GEMMs and a softmax backward (reads two s x s tensors, writes
  one).
- **element-wise work**, memory-bound: norms, the MLP's activation, residual adds, the copy
  that lays the attention's heads back side by side, an MoE layer's token permutation;
  its bytes over ``HBM_EFFICIENCY * M``. Forward, in elements per token: 10 h (two norms,
  two residual adds; on every tensor-parallel rank unless sequence parallelism splits
  them) + (2 a d_v + 2 f) / t (the head copy; GELU over the MLP's width f, 3 f for
  SwiGLU, :data:`ACTIVATION_ELEMENTS`); ``I``: 12 h (norm and residual backward) +
  (2 a d_v + 3 f) / t (5 f for SwiGLU); ``W``: 6 h (norm weights, bias gradients of h-wide
  outputs) + (3h + f) / t (the other bias gradients; none without ``linear_bias``). For
  GPT that is 10 h + 10 h / t, 12 h + 14 h / t and 6 h + 7 h / t. On an MoE layer f is the
  experts' rows, ``(k c + n_s) f_e``, and routing each token's k copies there and back
  adds :data:`DISPATCH_ELEMENTS` ``k h`` each way.

``I`` adds recomputation: all of ``F`` again (full) or the attention's forward (selective);
DeepSeek-V3's finer choices (``recompute_norm``, ``recompute_mla_up``) add the norms'
forward or MLA's up-projections. ``B = I + W``. The last model part adds the output head
(a GEMM of h x V/t, its loss over fp32 logits: 12 bytes a logit forward, 10 backward) and
the final norm. Dropout (``dropout``; by default with standard attention only,
:data:`DROPOUT_DEFAULT`) adds :data:`DROPOUT_ELEMENTS` of traffic per element dropped: the
attention probabilities with standard attention, and the outputs of attention and the
MLP. What a training step adds beyond the passes measured (each micro-batch's gradient
accumulation, the embedding on the first part, the collectives, the optimizer step) is
added by the sizing search (:mod:`ppbook.cost_model.step_work`,
:mod:`ppbook.cost_model.search_costs`). The four constants were fitted to one GPT layer
timed on an NVIDIA H200 (``data/h200_layer_times.jsonl``) by
``benchmarks/bench_layer.py --fit``; the other layers' times are the same model applied to
their matrices, not measured.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from ppbook.cost_model.flops import (
    FLASH_BACKWARD,
    attention_flops,
    layer_gemms,
    layer_kinds,
    tokens_per_rank,
)
from ppbook.cost_model.memory_bytes import part_activation_bytes, parts_of
from ppbook.cost_model.model_shape import ModelShape, Parallel

GEMM_EFFICIENCY = 0.7677
"""Share of peak a large GEMM reaches (the efficiency curve's saturation)."""
GEMM_HALF_RIDGE = 0.4184
"""The efficiency curve's half-point: the arithmetic intensity (FLOPs per byte) at which a
GEMM runs at half of :data:`GEMM_EFFICIENCY`, as a share of the card's ridge point P / M."""
FLASH_EFFICIENCY = 0.45
"""Share of peak causal flash attention's forward reaches."""
FLASH_BACKWARD_EFFICIENCY = 0.2568
"""Share of peak causal flash attention's backward reaches (it also writes dQ, dK, dV and
accumulates dQ across key blocks: slower than the forward)."""
GEMM_BACKWARD = 0.9359
"""The backward's GEMMs (``dX = dY W^T`` and ``dW = X^T dY``, transposed operands) run at
this share of the forward's efficiency."""
HBM_EFFICIENCY = 0.8
"""Share of the datasheet's HBM bandwidth element-wise kernels reach (fixed, not fitted)."""
FITTED = (
    "fitted by benchmarks/bench_layer.py --fit: least squares of log(model / measured) over "
    "F, I and W of the four H200 layers (data/h200_layer_times.jsonl)"
)
ATTENTION = ("flash", "standard")
"""Attention kernels: causal flash attention, or attention that materialises its scores."""
BYTES = 2
"""Bytes of a 16-bit element."""
DROPOUT_ELEMENTS = 2.5
"""HBM traffic of one dropout, in 16-bit elements per element dropped: read, write and a
one-byte mask forward; read, mask and write backward."""
DROPOUT_DEFAULT = {"flash": False, "standard": True}
"""Whether the block drops out when not told (``dropout=None``). ``"standard"`` stands for
the GPT block of Megatron-LM's and GPT-3's time, attention that materialises its scores,
trained with dropout 0.1 on the attention probabilities and after attention and the MLP
(Megatron-LM's defaults, which its 2021 runs kept; ppbook's activation memory, after
Korthikanti et al., counts those masks too). ``"flash"`` stands for the block timed on the
H200, trained as recent recipes train it, without dropout."""


def dropout_of(attention: str, dropout: bool | None) -> bool:
    """``dropout``, or when it is ``None`` the attention's default (:data:`DROPOUT_DEFAULT`)."""
    if attention not in ATTENTION:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION)}, got {attention!r}")
    return DROPOUT_DEFAULT[attention] if dropout is None else bool(dropout)


class Device(NamedTuple):
    """What the model needs of a GPU: peak FLOP/s and HBM bytes per second."""

    peak_flops: float
    hbm_bytes_per_s: float

    @classmethod
    def of(cls, tflops: float, hbm_gbps: float) -> Device:
        return cls(tflops * 1e12, hbm_gbps * 1e9)


class Constants(NamedTuple):
    """The model's fitted constants (the module's defaults unless a fit tries others)."""

    gemm_efficiency: float = GEMM_EFFICIENCY
    gemm_half_ridge: float = GEMM_HALF_RIDGE
    flash_efficiency: float = FLASH_EFFICIENCY
    flash_backward_efficiency: float = FLASH_BACKWARD_EFFICIENCY
    hbm_efficiency: float = HBM_EFFICIENCY
    gemm_backward: float = GEMM_BACKWARD


DEFAULTS = Constants()
"""The stored constants."""


def gemm_seconds(
    m: int, n: int, k: int, device: Device, batch: int = 1, c: Constants = DEFAULTS
) -> float:
    """One (batched) GEMM of m x k by k x n: the roofline of the module's docstring."""
    flops = 2.0 * m * n * k * batch
    nbytes = BYTES * (m * k + k * n + m * n) * batch
    ridge = device.peak_flops / device.hbm_bytes_per_s
    intensity = flops / nbytes
    efficiency = c.gemm_efficiency * intensity / (intensity + c.gemm_half_ridge * ridge)
    return max(flops / (device.peak_flops * efficiency), nbytes / device.hbm_bytes_per_s)


def _memory_s(elements: float, device: Device, c: Constants) -> float:
    return BYTES * elements / (c.hbm_efficiency * device.hbm_bytes_per_s)


def _attention(shape, parallel, device, attention, dropout, c) -> tuple[float, float]:
    """Attention's forward and input-gradient seconds (the weights' multiplies apart)."""
    b, s, t = parallel.microbatch_size, shape.seq_len, parallel.tp
    queries = s // parallel.cp  # context parallelism: this rank's queries, all s keys
    a, kv, dqk, dv = shape.heads, shape.num_kv_heads, shape.qk_head_size, shape.v_head_size
    if attention == "flash":
        flops = 0.5 * attention_flops(shape, parallel)  # causal: half of the full s x s
        moved = b * queries * (a + kv) * (dqk + dv) / t  # q, k, v read, the output written
        least = BYTES * moved / device.hbm_bytes_per_s
        forward = max(flops / (device.peak_flops * c.flash_efficiency), least)
        backward = FLASH_BACKWARD * flops / (device.peak_flops * c.flash_backward_efficiency)
        return forward, max(backward, 2 * least)
    heads = b * a // t
    scores = gemm_seconds(queries, s, dqk, device, heads, c)  # QK^T (and dO V^T backward)
    over_values = gemm_seconds(queries, dv, s, device, heads, c)  # P V (dV, dQ, dK backward)
    drop = DROPOUT_ELEMENTS if dropout else 0.0  # on the probabilities, before P V
    forward = scores + over_values + _memory_s((2.0 + drop) * heads * queries * s, device, c)
    backward = scores + 3 * over_values + _memory_s((3.0 + drop) * heads * queries * s, device, c)
    return forward, backward


class LayerParts(NamedTuple):
    """One layer's passes before recomputation, in seconds, by kind of work: each of
    ``F``, ``I`` and ``W`` a dict with ``gemm``, ``attention`` and ``elementwise``."""

    F: dict[str, float]
    I: dict[str, float]  # noqa: E741 (the pass's name)
    W: dict[str, float]


ACTIVATION_ELEMENTS = {False: (2, 3), True: (3, 5)}
"""HBM traffic of the MLP's activation, in elements per element of its width, forward and
backward: GELU reads and writes (2), its backward reads input and gradient and writes one
(3); SwiGLU (``gated_mlp``, fused) reads gate and up and writes their product (3), its
backward reads gate, up and the gradient and writes two gradients (5)."""
DISPATCH_ELEMENTS = 4
"""HBM traffic of routing one token's copy to one expert and back, in elements per element
of ``h``, in each pass: the permutation reads and writes it, the weighted combine reads
and writes it."""


@lru_cache(maxsize=4096)
def layer_parts(
    shape: ModelShape,
    parallel: Parallel,
    device: Device,
    attention: str = "flash",
    dropout: bool | None = None,
    c: Constants = DEFAULTS,
    *,
    moe: bool | None = None,
) -> LayerParts:
    """One layer's ``F``, ``I`` and ``W`` by kind of work (see the module's docstring);
    ``dropout`` ``None``: the attention's default (:func:`dropout_of`); ``moe`` ``None``:
    an MoE layer when the model has experts (False: one of its dense first layers)."""
    dropout = dropout_of(attention, dropout)
    gemms = layer_gemms(shape, parallel, moe=moe)  # checks the fit
    moe = any(g.name == "router" for g in gemms)
    forward = sum(gemm_seconds(g.tokens, g.n, g.k, device, g.count, c) for g in gemms)
    inputs = sum(gemm_seconds(g.tokens, g.k, g.n, device, g.count, c) for g in gemms)
    weights = sum(gemm_seconds(g.k, g.n, g.tokens, device, g.count, c) for g in gemms)
    inputs, weights = inputs / c.gemm_backward, weights / c.gemm_backward
    attention_f, attention_i = _attention(shape, parallel, device, attention, dropout, c)
    h, t = shape.hidden, parallel.tp
    tokens = tokens_per_rank(shape, parallel)
    whole = 1 / t if parallel.sp else 1.0  # norms and residual adds: split only with sp
    heads_out = shape.heads * shape.v_head_size  # the head copy of attention's output
    if moe:
        factor = 1.0 if shape.capacity_factor is None else shape.capacity_factor
        k = shape.experts_per_token
        width = (k * factor + shape.shared_experts) * shape.moe_ffn_size
        routed = DISPATCH_ELEMENTS * k * h * whole
    else:
        width, routed = shape.ffn_size, 0.0
    act_f, act_i = ACTIVATION_ELEMENTS[shape.gated_mlp]
    drop = 2 * DROPOUT_ELEMENTS * h * whole if dropout else 0.0  # after attention and MLP
    gate = 2 if shape.gated_mlp else 1
    qkv = next((g.n for g in gemms if g.name == "qkv"), heads_out // t) * t
    bias = (qkv + gate * width) / t if shape.linear_bias else 0.0
    per_token = {
        "F": 10 * h * whole + (2 * heads_out + act_f * width) / t + routed + drop,
        "I": 12 * h * whole + (2 * heads_out + act_i * width) / t + routed + drop,
        "W": 6 * h * whole + bias,
    }
    memory = {k: _memory_s(tokens * x, device, c) for k, x in per_token.items()}
    return LayerParts(
        {"gemm": forward, "attention": attention_f, "elementwise": memory["F"]},
        {"gemm": inputs, "attention": attention_i, "elementwise": memory["I"]},
        {"gemm": weights, "attention": 0.0, "elementwise": memory["W"]},
    )


def layer_times(
    shape: ModelShape,
    parallel: Parallel,
    device: Device,
    attention: str = "flash",
    dropout: bool | None = None,
    c: Constants = DEFAULTS,
    *,
    moe: bool | None = None,
) -> dict[str, float]:
    """One layer's ``F``, ``I``, ``W`` and ``B = I + W`` in seconds, with ``parallel``'s
    recomputation in ``I`` (all of ``F`` for full, the attention's forward for selective;
    ``recompute_norm``: the two norms' forward, 4 h elements a token; ``recompute_mla_up``:
    MLA's two up-projections' forward GEMMs); ``dropout`` ``None``: the attention's
    default (:func:`dropout_of`); ``moe`` as in :func:`layer_parts`."""
    parts = layer_parts(shape, parallel, device, attention, dropout, c, moe=moe)
    out = {key: sum(getattr(parts, key).values()) for key in ("F", "I", "W")}
    out["I"] += {"none": 0.0, "selective": parts.F["attention"], "full": out["F"]}[
        parallel.recompute
    ]
    if parallel.recompute != "full":
        out["I"] += _recomputed_pieces(shape, parallel, device, c)
    out["B"] = out["I"] + out["W"]
    return out


def _recomputed_pieces(shape: ModelShape, parallel: Parallel, device: Device, c) -> float:
    """DeepSeek-V3's finer recomputation (its report, sec. 3.2.3), seconds added to ``I``."""
    extra = 0.0
    if parallel.recompute_norm:
        whole = 1 / parallel.tp if parallel.sp else 1.0
        extra += _memory_s(tokens_per_rank(shape, parallel) * 4 * shape.hidden * whole, device, c)
    if parallel.recompute_mla_up and shape.uses_mla:
        ups = [g for g in layer_gemms(shape, parallel, moe=False) if g.name in ("q_up", "kv_up")]
        extra += sum(gemm_seconds(g.tokens, g.n, g.k, device, g.count, c) for g in ups)
    return extra


@lru_cache(maxsize=1024)
def head_times(
    shape: ModelShape, parallel: Parallel, device: Device, c: Constants = DEFAULTS
) -> dict[str, float]:
    """The last part's extra work, in seconds: the final norm, the output head's GEMM
    (h x V/t, ceil(V/t) columns) and its loss over fp32 logits."""
    h, t = shape.hidden, parallel.tp
    tokens = tokens_per_rank(shape, parallel)
    vocab = -(-shape.vocab // t)
    whole = 1 / t if parallel.sp else 1.0
    logits = tokens * vocab
    out = {
        "F": gemm_seconds(tokens, vocab, h, device, 1, c)
        + _memory_s(2 * tokens * h * whole + 6 * logits, device, c),
        "I": gemm_seconds(tokens, h, vocab, device, 1, c)
        + _memory_s(3 * tokens * h * whole + 5 * logits, device, c),
        "W": gemm_seconds(h, vocab, tokens, device, 1, c)
        + _memory_s(2 * tokens * h * whole, device, c),
    }
    out["B"] = out["I"] + out["W"]
    return out


def part_times(
    shape: ModelShape,
    parallel: Parallel,
    device: Device,
    layers_per_part,
    attention: str = "flash",
    dropout: bool | None = None,
) -> list[dict[str, float]]:
    """Each model part's ``F``, ``I``, ``W``, ``B`` in seconds: its dense and MoE layers'
    :func:`layer_times` (:func:`ppbook.cost_model.flops.layer_kinds`), the last part
    adding :func:`head_times`."""
    kinds = layer_kinds(shape, layers_per_part)
    dense = layer_times(shape, parallel, device, attention, dropout, moe=False)
    moe = layer_times(shape, parallel, device, attention, dropout) if shape.is_moe else dense
    times = [{k: nd * dense[k] + nm * moe[k] for k in dense} for nd, nm in kinds]
    head = head_times(shape, parallel, device)
    for key in ("F", "I", "W", "B"):
        times[-1][key] += head[key]
    return times


def stage_values(
    schedule,
    shape: ModelShape,
    parallel: Parallel,
    device: Device,
    attention: str = "flash",
    layers_per_part=None,
    dropout: bool | None = None,
) -> dict[str, list[float]]:
    """:func:`ppbook.cost_model.flops.stage_values` with the passes timed by this model: per
    stage ``F``, ``B``, ``I``, ``W`` in seconds (one device's share, a part's time divided
    by ``schedule.chunk_share``) and ``activation_bytes``. Each part runs its layers'
    :func:`layer_times` (dense and MoE layers each at their own); the last adds
    :func:`head_times` (:func:`part_times`)."""
    layers = parts_of(schedule, shape, layers_per_part)
    times = part_times(shape, parallel, device, layers, attention, dropout)
    sizes = part_activation_bytes(shape, parallel, layers)
    share = schedule.chunk_share
    parts = [schedule.model_part(k) for k in range(schedule.num_stages)]
    values = {key: [times[k][key] / share for k in parts] for key in ("F", "B", "I", "W")}
    values["activation_bytes"] = [sizes[k] / share for k in parts]
    return values
