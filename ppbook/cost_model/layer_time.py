"""Pass times of a transformer layer from a model of the GPU (chapter 8, ``ppbook layer``).

One pre-norm GPT layer (LayerNorm, multi-head attention, LayerNorm, a 4h GELU MLP) in
16-bit, one micro-batch of ``b`` sequences of ``s`` tokens on one of ``t`` tensor-parallel
ranks. Its passes are built from three kinds of work, each timed on the GPU's datasheet
figures (:mod:`ppbook.cost_model.gpu_cards`: dense BF16 peak ``P``, HBM bandwidth ``M``):

- **matrix multiplies** (GEMMs), the four weight multiplies of Megatron-LM's layer split
  (QKV: h x 3h/t, projection: h/t x h, MLP: h x 4h/t and 4h/t x h) over the ``b s``
  tokens. A GEMM of m x k by k x n runs ``2 m n k`` FLOPs and moves at least
  ``2 (m k + k n + m n)`` bytes; its arithmetic intensity ``x`` is their ratio. It runs at
  an efficiency that saturates with the intensity,
  ``eff(x) = GEMM_EFFICIENCY * x / (x + GEMM_HALF_RIDGE * P / M)``, a curve whose half-point
  is a fixed share of the card's ridge point ``P / M``; its time is
  ``max(flops / (P eff(x)), bytes / M)`` (a roofline). Small or thin GEMMs (few tokens, a
  narrow ``h / t``, attention's head dimension) run far below peak, large ones near
  ``GEMM_EFFICIENCY``. The forward runs ``Y = X W``; the input-gradient pass ``I`` the
  same shapes as ``dX = dY W^T``; the weight-gradient pass ``W`` runs ``dW = X^T dY``,
  whose inner dimension is the ``b s`` tokens.
- **attention**: ``"flash"`` (the default, the measured block): causal flash attention
  computes half of the 4 b s^2 h / t FLOPs of QK^T and attention over V, at
  ``FLASH_EFFICIENCY`` of peak, without writing the s x s scores; its backward recomputes
  the scores and runs five multiplies where the forward ran two: ``FLASH_BACKWARD`` (2.5)
  times the forward's work, all in ``I``. ``"standard"`` materialises the scores: two
  batched GEMMs of head dimension d = h / a over the full s x s (the causal mask only
  masks), timed by the GEMM curve, and a fused scale-mask-softmax that reads and writes
  the scores in HBM (memory-bound); its backward runs four such GEMMs and a softmax
  backward (reads two s x s tensors, writes one).
- **element-wise work**, memory-bound: LayerNorms, GELU, residual adds, the copy that
  lays the attention's heads back side by side; its bytes over ``HBM_EFFICIENCY * M``.
  Forward, in elements per token: 10 h (two LayerNorms, two residual adds; on every
  tensor-parallel rank unless sequence parallelism splits them) + 10 h / t (GELU over
  4h / t, the head copy); ``I``: 12 h (LayerNorm and residual backward) + 14 h / t;
  ``W``: 6 h (LayerNorm weights, bias gradients of h-wide outputs) + 7 h / t (the other
  bias gradients).

``I`` adds recomputation: all of ``F`` again (full) or the attention's forward (selective).
``B = I + W``. The last model part adds the output head (a GEMM of h x V/t, its loss over
fp32 logits: 12 bytes a logit forward, 10 backward) and the final LayerNorm. Dropout
(``dropout``; by default with standard attention only, :data:`DROPOUT_DEFAULT`) adds
:data:`DROPOUT_ELEMENTS` of traffic per element dropped: the attention probabilities with
standard attention, and the outputs of attention and the MLP. What a training step adds
beyond the passes measured (each micro-batch's gradient accumulation, the embedding on the
first part, tensor parallelism's all-reduces, the optimizer step) is added by the sizing
search (:mod:`ppbook.cost_model.step_work`, :mod:`ppbook.cost_model.search_costs`). The four
constants were
fitted to one GPT layer timed on an NVIDIA H200 (``data/h200_layer_times.jsonl``) by
``benchmarks/bench_layer.py --fit``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from ppbook.cost_model.memory_bytes import (
    ModelShape,
    Parallel,
    check_fit,
    part_activation_bytes,
    parts_of,
)

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
FLASH_BACKWARD = 2.5
"""Causal flash attention's backward work over its forward's: it recomputes QK^T and the
softmax, then runs dV, dP, dQ and dK: five multiplies against the forward's two."""
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


def _weights(h: int, t: int, ffn: int) -> list[tuple[int, int]]:
    """(k, n) of the layer's weight multiplies on one tensor-parallel rank."""
    return [(h, 3 * h // t), (h // t, h), (h, ffn * h // t), (ffn * h // t, h)]


def _attention(shape, parallel, device, attention, dropout, c) -> tuple[float, float]:
    """Attention's forward and input-gradient seconds (the weights' multiplies apart)."""
    b, s, h, t = parallel.microbatch_size, shape.seq_len, shape.hidden, parallel.tp
    if attention == "flash":
        flops = 0.5 * 4.0 * b * s * s * h / t  # causal: half of QK^T and attention over V
        moved = 4 * b * s * h / t  # q, k, v read, the output written
        least = BYTES * moved / device.hbm_bytes_per_s
        forward = max(flops / (device.peak_flops * c.flash_efficiency), least)
        backward = FLASH_BACKWARD * flops / (device.peak_flops * c.flash_backward_efficiency)
        return forward, max(backward, 2 * least)
    heads, d = b * shape.heads // t, h // shape.heads
    scores = gemm_seconds(s, s, d, device, heads, c)  # QK^T (and dO V^T backward)
    over_values = gemm_seconds(s, d, s, device, heads, c)  # P V (and dV, dQ, dK backward)
    drop = DROPOUT_ELEMENTS if dropout else 0.0  # on the probabilities, before P V
    forward = scores + over_values + _memory_s((2.0 + drop) * heads * s * s, device, c)
    backward = scores + 3 * over_values + _memory_s((3.0 + drop) * heads * s * s, device, c)
    return forward, backward


class LayerParts(NamedTuple):
    """One layer's passes before recomputation, in seconds, by kind of work: each of
    ``F``, ``I`` and ``W`` a dict with ``gemm``, ``attention`` and ``elementwise``."""

    F: dict[str, float]
    I: dict[str, float]  # noqa: E741 (the pass's name)
    W: dict[str, float]


@lru_cache(maxsize=4096)
def layer_parts(
    shape: ModelShape,
    parallel: Parallel,
    device: Device,
    attention: str = "flash",
    dropout: bool | None = None,
    c: Constants = DEFAULTS,
) -> LayerParts:
    """One layer's ``F``, ``I`` and ``W`` by kind of work (see the module's docstring);
    ``dropout`` ``None``: the attention's default (:func:`dropout_of`)."""
    check_fit(shape, parallel)
    dropout = dropout_of(attention, dropout)
    h, t = shape.hidden, parallel.tp
    tokens = parallel.microbatch_size * shape.seq_len
    forward = sum(
        gemm_seconds(tokens, n, k, device, 1, c) for k, n in _weights(h, t, shape.ffn_multiple)
    )
    inputs = (
        sum(gemm_seconds(tokens, k, n, device, 1, c) for k, n in _weights(h, t, shape.ffn_multiple))
        / c.gemm_backward
    )
    weights = (
        sum(gemm_seconds(k, n, tokens, device, 1, c) for k, n in _weights(h, t, shape.ffn_multiple))
        / c.gemm_backward
    )
    attention_f, attention_i = _attention(shape, parallel, device, attention, dropout, c)
    whole = 1 / t if parallel.sp else 1.0  # LayerNorms and residual adds: split only with sp
    ffn = shape.ffn_multiple / 4  # GELU's elements scale with the MLP's width
    drop = 2 * DROPOUT_ELEMENTS * h * whole if dropout else 0.0  # after attention and MLP
    per_token = {
        "F": 10 * h * whole + (2 + 8 * ffn) * h / t + drop,
        "I": 12 * h * whole + (2 + 12 * ffn) * h / t + drop,
        "W": 6 * h * whole + (3 + 4 * ffn) * h / t,
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
) -> dict[str, float]:
    """One layer's ``F``, ``I``, ``W`` and ``B = I + W`` in seconds, with ``parallel``'s
    recomputation in ``I`` (all of ``F`` for full, the attention's forward for selective);
    ``dropout`` ``None``: the attention's default (:func:`dropout_of`)."""
    parts = layer_parts(shape, parallel, device, attention, dropout, c)
    out = {key: sum(getattr(parts, key).values()) for key in ("F", "I", "W")}
    out["I"] += {"none": 0.0, "selective": parts.F["attention"], "full": out["F"]}[
        parallel.recompute
    ]
    out["B"] = out["I"] + out["W"]
    return out


@lru_cache(maxsize=1024)
def head_times(
    shape: ModelShape, parallel: Parallel, device: Device, c: Constants = DEFAULTS
) -> dict[str, float]:
    """The last part's extra work, in seconds: the final LayerNorm, the output head's GEMM
    (h x V/t, ceil(V/t) columns) and its loss over fp32 logits."""
    h, t = shape.hidden, parallel.tp
    tokens = parallel.microbatch_size * shape.seq_len
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


def stage_values(
    schedule,
    shape: ModelShape,
    parallel: Parallel,
    device: Device,
    attention: str = "flash",
    layers_per_part=None,
    dropout: bool | None = None,
) -> dict[str, list[float]]:
    """:func:`ppbook.cost_model.flops.stage_values` with the passes timed by this model: per stage
    ``F``, ``B``, ``I``, ``W`` in seconds (one device's share, a part's time divided by
    ``schedule.chunk_share``) and ``activation_bytes``. Each part runs its layers'
    :func:`layer_times`; the last adds :func:`head_times`."""
    layers = parts_of(schedule, shape, layers_per_part)
    one = layer_times(shape, parallel, device, attention, dropout)
    head = head_times(shape, parallel, device)
    times = [{k: n * x for k, x in one.items()} for n in layers]
    for key in ("F", "I", "W", "B"):
        times[-1][key] += head[key]
    sizes = part_activation_bytes(shape, parallel, layers)
    share = schedule.chunk_share
    parts = [schedule.model_part(k) for k in range(schedule.num_stages)]
    values = {key: [times[k][key] / share for k in parts] for key in ("F", "B", "I", "W")}
    values["activation_bytes"] = [sizes[k] / share for k in parts]
    return values
