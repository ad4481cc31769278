"""FLOPs and pass times of a transformer split into pipeline stages (chapters 6 and 8).

Per micro-batch and tensor-parallel rank, matrix multiplies only (element-wise work is
left to :mod:`ppbook.cost_model.layer_time`). For the GPT-3-style layer this is the Zero
Bubble paper's Table 1 (Qi et al. 2024, arXiv:2401.10241): a layer's forward ``F`` is
24 b s h^2 + 4 b s^2 h FLOPs, its input-gradient pass ``I`` (the paper's B)
24 b s h^2 + 8 b s^2 h, its weight-gradient pass ``W`` 24 b s h^2 (MLP width 4h), and
``B = I + W``; the tests check it against :func:`ppbook.symbolic.transformer.layer_flops`,
where the multiplies are listed. Every weight multiply of m tokens by a k x n matrix costs
``2 m k n`` in the forward, the same again in ``I`` (``dX = dY W^T``) and in ``W``
(``dW = X^T dY``). Today's layers change which matrices there are
(:func:`layer_gemms`, read from the :class:`~ppbook.cost_model.model_shape.ModelShape`):

- **grouped-query attention**: the fused QKV projection is ``h x (a + 2 a_kv) d``, the
  output projection ``a d x h`` (``a`` query heads, ``a_kv`` key/value heads of width d);
- **SwiGLU** (``gated_mlp``): gate and up, ``h x 2f`` fused, then down, ``f x h``;
- **mixture of experts**, on an MoE layer: the router ``h x E``, whole on every rank;
  each token through ``k`` of the ``E`` routed experts' MLPs (width ``f_e``) and through
  the shared experts' (``n_s`` of width ``f_e``, fused as one MLP of ``n_s f_e``). Under
  expert parallelism a rank holds ``E / ep`` experts and, with balanced routing, gets
  ``ep T k / E`` tokens for each (its ``ep`` group's ``T`` tokens each): ``T k`` expert
  rows in all, the same FLOPs as without ``ep``. A ``capacity_factor`` c pads every
  expert to c times its even share, and the padding is computed: expert FLOPs times c.
  The first ``dense_layers`` layers keep a dense MLP (DeepSeek-V3: three);
- **MLA** (DeepSeek's multi-head latent attention): queries through ``h x r_q`` then
  ``r_q x a (d + d_r)``, keys and values through ``h x (r_kv + d_r)`` then
  ``r_kv x a (d + d_v)``, the output ``a d_v x h``. The two down-projections are kept whole
  on every tensor-parallel rank (as Megatron-Core's MLA does); the rest are split over
  ``tp``.

**Attention itself** (QK^T and the probabilities times V) costs
``2 T s a (d_qk + d_v)`` per rank and forward, counted over the full s x s as papers count
it (a causal kernel skips about half, which :mod:`~ppbook.cost_model.layer_time` times):
4 b s^2 h for the GPT layer. Its backward depends on the kernel (``parallel.attention``):
``"standard"`` keeps the probabilities and runs four multiplies (dP, dV, dQ, dK), twice
the forward; ``"flash"`` (FlashAttention-2, Dao 2023, arXiv:2307.08691) keeps only its
output and log-sum-exp, recomputes the scores in the backward, and runs five:
:data:`FLASH_BACKWARD` = 2.5 times the forward, all in ``I``, as FlashAttention-2 counts
its backward's FLOPs in its benchmarks (sec. 4.1) and PyTorch's FLOP counter counts its
fused kernels' backward.

Context parallelism (``cp`` ranks) gives each rank ``T = b s / cp`` tokens, whose queries
meet all ``s`` keys (ring attention). Recomputation runs its forward again before the
backward: ``I`` grows by all of ``F`` (full) or by attention's forward (selective). The
last part adds the logits' 2 T h V / t per pass; the embedding lookup counts none.

:func:`stage_costs` turns them into :class:`~ppbook.costs.Costs` in seconds for a
schedule, with the activation bytes of :mod:`ppbook.cost_model.memory_bytes`, ready for the
simulator.
"""

from __future__ import annotations

from typing import NamedTuple

from ppbook.checks import as_quantity, shown
from ppbook.cost_model.memory_bytes import part_activation_bytes, parts_of
from ppbook.cost_model.model_shape import (
    ATTENTION,
    ModelShape,
    Parallel,
    check_fit,
    layers_of,
)
from ppbook.costs import Costs
from ppbook.pipeline_schedule import Schedule

FLASH_BACKWARD = 2.5
"""Flash attention's backward FLOPs over its forward's: it recomputes QK^T, then runs dV,
dP, dQ and dK: five multiplies against the forward's two (FlashAttention-2, arXiv:2307.08691,
sec. 4.1, counts its backward so)."""
STANDARD_BACKWARD = 2.0
"""Attention that keeps its probabilities: dP, dV, dQ and dK, four multiplies against two."""


class Gemm(NamedTuple):
    """``count`` weight multiplies on one rank, each of ``tokens`` rows by a ``k x n``
    matrix (``tokens`` may be fractional: an expert's average share)."""

    name: str
    tokens: float
    k: int
    n: int
    count: int = 1

    @property
    def flops(self) -> float:
        """Forward FLOPs: ``2 tokens k n`` per multiply."""
        return 2.0 * self.tokens * self.k * self.n * self.count


def tokens_per_rank(shape: ModelShape, parallel: Parallel) -> float:
    """Tokens of one micro-batch on one rank: ``b s / cp`` (sequence parallelism gathers
    its ``1/tp`` slices back before each multiply)."""
    return parallel.microbatch_size * shape.seq_len / parallel.cp


def _moe_of(shape: ModelShape, moe: bool | None) -> bool:
    if moe is None:
        return shape.is_moe
    if not isinstance(moe, bool):
        raise ValueError(f"moe must be True, False or None, got {shown(moe)}")
    if moe and not shape.is_moe:
        raise ValueError("moe=True needs an MoE model (experts >= 1)")
    return moe


def attention_of(parallel: Parallel, attention: str | None) -> str:
    """``attention``, or ``parallel.attention`` when it is ``None``."""
    kind = parallel.attention if attention is None else attention
    if kind not in ATTENTION:
        raise ValueError(f"attention must be one of flash, standard, got {shown(kind)}")
    return kind


def expert_tokens(shape: ModelShape, parallel: Parallel) -> float:
    """Rows each of a rank's ``E / ep`` routed experts multiplies per micro-batch:
    ``ep T k / E`` with balanced routing, times the capacity factor when experts are
    padded to one (dropless: 1)."""
    factor = 1.0 if shape.capacity_factor is None else float(shape.capacity_factor)
    tokens = tokens_per_rank(shape, parallel)
    return parallel.ep * tokens * shape.experts_per_token / shape.experts * factor


def layer_gemms(shape: ModelShape, parallel: Parallel, *, moe: bool | None = None) -> list[Gemm]:
    """The weight multiplies of one layer's forward on one rank (module docstring); ``moe``
    ``None``: an MoE layer when the model has experts."""
    check_fit(shape, parallel)
    moe = _moe_of(shape, moe)
    T, h, t = tokens_per_rank(shape, parallel), shape.hidden, parallel.tp
    a, d, dv = shape.heads, shape.head_size, shape.v_head_size
    if shape.uses_mla:
        rope, r_kv = shape.qk_rope_head_dim, shape.kv_lora_rank
        out = []
        if shape.q_lora_rank:
            out += [Gemm("q_down", T, h, shape.q_lora_rank)]
            out += [Gemm("q_up", T, shape.q_lora_rank, a * (d + rope) // t)]
        else:
            out += [Gemm("q", T, h, a * (d + rope) // t)]
        out += [Gemm("kv_down", T, h, r_kv + rope), Gemm("kv_up", T, r_kv, a * (d + dv) // t)]
    else:
        out = [Gemm("qkv", T, h, (a + 2 * shape.num_kv_heads) * d // t)]
    out.append(Gemm("proj", T, a * dv // t, h))
    gate = 2 if shape.gated_mlp else 1
    if not moe:
        f = shape.ffn_size
        return [*out, Gemm("mlp_in", T, h, gate * f // t), Gemm("mlp_out", T, f // t, h)]
    fe, local = shape.moe_ffn_size, shape.experts // parallel.ep
    rows = expert_tokens(shape, parallel)
    out.append(Gemm("router", T, h, shape.experts))
    out += [Gemm("experts_in", rows, h, gate * fe // t, local)]
    out += [Gemm("experts_out", rows, fe // t, h, local)]
    if shape.shared_experts:
        fs = shape.shared_experts * fe
        out += [Gemm("shared_in", T, h, gate * fs // t), Gemm("shared_out", T, fs // t, h)]
    return out


def attention_flops(shape: ModelShape, parallel: Parallel) -> float:
    """Attention's own forward FLOPs on one rank (QK^T and over V, the full s x s):
    ``2 T s a (d_qk + d_v) / t``; 4 b s^2 h / t for the GPT layer."""
    T, s = tokens_per_rank(shape, parallel), shape.seq_len
    return 2.0 * T * s * shape.heads * (shape.qk_head_size + shape.v_head_size) / parallel.tp


def layer_flops(
    shape: ModelShape,
    parallel: Parallel,
    *,
    moe: bool | None = None,
    attention: str | None = None,
) -> dict[str, float]:
    """FLOPs of one micro-batch through one layer on one rank: ``F``, ``I``, ``W``, ``B``.

    ``moe`` ``None``: an MoE layer when the model has experts (False: one of its dense
    first layers); ``attention`` ``None``: ``parallel.attention`` (flash attention's
    backward recomputes the scores: 2.5 times attention's forward in ``I``, against 2)."""
    kind = attention_of(parallel, attention)
    linear = sum(g.flops for g in layer_gemms(shape, parallel, moe=moe))
    core = attention_flops(shape, parallel)
    backward = (FLASH_BACKWARD if kind == "flash" else STANDARD_BACKWARD) * core
    again = {"none": 0.0, "selective": core, "full": linear + core}[parallel.recompute]
    out = {"F": linear + core, "I": linear + backward + again, "W": linear}
    out["B"] = out["I"] + out["W"]
    return out


def layer_kinds(shape: ModelShape, layers_per_part) -> list[tuple[int, int]]:
    """For each model part, (dense layers, MoE layers): the model's first
    ``dense_layers`` layers (all of a dense model's) are dense."""
    layers = layers_of(shape, layers_per_part)
    out, start = [], 0
    for n in layers:
        dense = 0 if shape.is_moe else n
        if shape.is_moe:
            dense = max(0, min(start + n, shape.dense_layers) - start)
        out.append((dense, n - dense))
        start += n
    return out


def logits_flops(shape: ModelShape, parallel: Parallel) -> float:
    """The output head's FLOPs per pass on one rank: ``2 T h ceil(V / t)``."""
    return 2.0 * tokens_per_rank(shape, parallel) * shape.hidden * -(-shape.vocab // parallel.tp)


def part_flops(
    shape: ModelShape, parallel: Parallel, layers_per_part, *, attention: str | None = None
) -> list[dict[str, float]]:
    """FLOPs of one micro-batch through each model part (``F``, ``I``, ``W``, ``B = I + W``);
    MoE layers and dense first layers each at their own count; the last part adds the
    logits' 2 T h V / t per pass (the embedding lookup counts none)."""
    kinds = layer_kinds(shape, layers_per_part)
    dense = layer_flops(shape, parallel, moe=False, attention=attention)
    moe = layer_flops(shape, parallel, attention=attention) if shape.is_moe else dense
    out = [{k: nd * dense[k] + nm * moe[k] for k in dense} for nd, nm in kinds]
    logits = logits_flops(shape, parallel)
    for key, times in (("F", 1), ("I", 1), ("W", 1), ("B", 2)):
        out[-1][key] += times * logits
    return out


def model_flops(shape: ModelShape, parallel: Parallel | None = None) -> dict[str, float]:
    """One micro-batch through the whole model on one rank, ``F``, ``I``, ``W``, ``B``
    (every layer and the logits): ``part_flops`` of a single part."""
    parallel = Parallel() if parallel is None else parallel
    return part_flops(shape, parallel, [shape.layers])[0]


def stage_costs(
    schedule: Schedule,
    shape: ModelShape,
    parallel: Parallel,
    flops_per_second: float,
    layers_per_part=None,
    **kwargs,
) -> Costs:
    """:class:`~ppbook.costs.Costs` in seconds for ``schedule``: ``F``, ``I``, ``W`` and
    ``B = I + W`` from :func:`part_flops` at ``flops_per_second``, and ``activation_bytes``
    (:func:`stage_values`).

    Values are per stage in ppbook's cost convention (one device's share: a part's own
    time divided by ``schedule.chunk_share``, which the simulator multiplies back).
    ``kwargs`` go to ``Costs`` (``comm``, ``comm_bytes``, ``bandwidth``). Times are in
    seconds (``time_unit="s"``, which simulated timelines then carry).
    """
    kwargs.setdefault("time_unit", "s")
    return Costs(
        **stage_values(schedule, shape, parallel, flops_per_second, layers_per_part), **kwargs
    )


def stage_values(
    schedule: Schedule,
    shape: ModelShape,
    parallel: Parallel,
    flops_per_second: float,
    layers_per_part=None,
) -> dict[str, list[float]]:
    """What :func:`stage_costs` puts in its ``Costs``, per stage: ``F``, ``B``, ``I`` and
    ``W`` in seconds and ``activation_bytes``, without building the ``Costs`` (a sizing
    search needs the times of every option, and the ``Costs`` of the few it simulates)."""
    speed = as_quantity(flops_per_second, "flops_per_second", "stage_costs", inclusive=False)
    layers = parts_of(schedule, shape, layers_per_part)
    flops = part_flops(shape, parallel, layers)
    sizes = part_activation_bytes(shape, parallel, layers)
    share = schedule.chunk_share
    parts = [schedule.model_part(k) for k in range(schedule.num_stages)]
    values = {key: [flops[k][key] / speed / share for k in parts] for key in ("F", "B", "I", "W")}
    values["activation_bytes"] = [sizes[k] / share for k in parts]
    return values
