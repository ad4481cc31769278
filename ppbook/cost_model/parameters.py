"""Parameter counts of a :class:`~ppbook.cost_model.model_shape.ModelShape`, whole and on one
tensor-/expert-parallel rank (chapters 6 and 8, ``ppbook size``).

One layer is attention, an MLP and two norms:

- **Attention**: queries ``h x (heads d)``, keys and values ``h x (kv_heads d)`` each
  (grouped-query attention narrows them), the output projection ``(heads d) x h``; biases
  on each when ``linear_bias``. With MLA (DeepSeek-V2/V3) the queries go through a
  rank-``q_lora_rank`` latent (down-projection, RMSNorm, up-projection), keys and values
  through one rank-``kv_lora_rank`` latent plus a shared rotary key of
  ``qk_rope_head_dim`` (down-projection, RMSNorm, up-projection to ``heads`` non-rotary
  keys and values), as in DeepSeek-V3's Hugging Face model (``q_a_proj``, ``q_b_proj``,
  ``kv_a_proj_with_mqa``, ``kv_b_proj``, ``o_proj``).
- **MLP**: two matrices ``h x f`` (GELU), or three with SwiGLU (gate, up, down).
  An MoE layer has a router ``h x experts`` (no bias; DeepSeek-V3's 256-entry score
  correction bias is left out, 15k parameters in all), ``experts`` routed and
  ``shared_experts`` shared expert MLPs of width ``moe_ffn_size``.
- **Norms**: LayerNorm ``2h`` (weight and bias), RMSNorm ``h``.

Outside the layers: word embeddings ``vocab x h`` (learned positions ``seq_len x h`` too
when ``position_embeddings``; none with rotary positions), a final norm, and an output head
``vocab x h`` unless tied to the embeddings.

**On one tensor-parallel rank** (Megatron-LM): column-parallel matrices (Q, K, V, MLP in,
MLA's up-projections) and their biases split over ``tp``; row-parallel matrices (output
projection, MLP out) split, their biases whole; norms, the router and MLA's
down-projections whole. The vocabulary splits into ``ceil(vocab/tp)`` rows (ppbook pads
to a multiple of ``tp``; Megatron-LM pads further, to a multiple of 128 tp).
**On one expert-parallel rank**: ``experts/ep`` of each MoE layer's routed experts, each
split over ``tp`` like a dense MLP; the shared experts and router as in a dense layer.

:func:`active_parameters` counts what one token uses: attention, norms, the router, the
shared and ``experts_per_token`` routed experts, the dense layers' MLPs, and the
embeddings and output head (as Mixtral's 12.9B and DeepSeek-V3's 37B count them).
"""

from __future__ import annotations

from ppbook.checks import as_count
from ppbook.cost_model.model_shape import ModelShape, Parallel, check_fit, layers_of


def _split(shape: ModelShape, tp: int, ep: int, owner: str) -> tuple[int, int]:
    tp = as_count(tp, "tp", owner)
    ep = as_count(ep, "ep", owner)
    check_fit(shape, Parallel(tp=tp, ep=ep, dp=ep))
    return tp, ep


def norm_parameters(shape: ModelShape, width: int | None = None) -> int:
    """One norm over ``width`` (default ``hidden``): LayerNorm 2 per element, RMSNorm 1."""
    width = shape.hidden if width is None else width
    return (2 if shape.norm == "layernorm" else 1) * width


def attention_parameters(shape: ModelShape, tp: int = 1) -> int:
    """The attention block's parameters on one of ``tp`` ranks (its norm not included)."""
    tp, _ = _split(shape, tp, 1, "attention_parameters")
    h, bias = shape.hidden, shape.linear_bias
    if shape.uses_mla:
        heads, qk, v = shape.heads, shape.qk_head_size, shape.v_head_size
        rope, kv_rank = shape.qk_rope_head_dim, shape.kv_lora_rank
        if shape.q_lora_rank is None:
            q = h * heads * qk // tp  # column-parallel q_proj
        else:
            r = shape.q_lora_rank  # q_a_proj and its RMSNorm whole; q_b_proj split
            q = h * r + r + r * heads * qk // tp
        kv = h * (kv_rank + rope) + kv_rank + kv_rank * heads * (shape.head_size + v) // tp
        out = heads * v * h // tp
        biases = (heads * qk + heads * (shape.head_size + v)) // tp + h if bias else 0
        return q + kv + out + biases
    q_width = shape.heads * shape.head_size
    kv_width = shape.num_kv_heads * shape.head_size
    split = h * (q_width + 2 * kv_width) + q_width * h  # Q, K, V and output projection
    if bias:
        split += q_width + 2 * kv_width  # column-parallel biases
    return split // tp + (h if bias else 0)  # + the row-parallel output bias, whole


def mlp_parameters(shape: ModelShape, width: int | None = None, tp: int = 1) -> int:
    """One MLP of ``width`` (default ``ffn_size``) on one of ``tp`` ranks."""
    tp, _ = _split(shape, tp, 1, "mlp_parameters")
    f = shape.ffn_size if width is None else width
    h, matrices = shape.hidden, 3 if shape.gated_mlp else 2
    split = matrices * h * f + ((matrices - 1) * f if shape.linear_bias else 0)
    return split // tp + (h if shape.linear_bias else 0)


def router_parameters(shape: ModelShape) -> int:
    """An MoE layer's router (``hidden x experts``, whole on every rank); 0 when dense."""
    return shape.hidden * shape.experts


def expert_layer_parameters(shape: ModelShape, tp: int = 1, ep: int = 1) -> int:
    """The routed experts' parameters of one MoE layer on one tensor- and expert-parallel
    rank (``experts/ep`` expert MLPs, each split over ``tp``); 0 for a dense model."""
    tp, ep = _split(shape, tp, ep, "expert_layer_parameters")
    if not shape.is_moe:
        return 0
    return shape.experts // ep * mlp_parameters(shape, shape.moe_ffn_size, tp)


def layer_parameters(
    shape: ModelShape, tp: int = 1, *, moe: bool | None = None, ep: int = 1
) -> int:
    """Parameters of one layer on one tensor-parallel (and expert-parallel) rank.

    ``moe``: an MoE layer (True) or one of the dense first layers (False); None: the
    model's MoE layer if it has experts, else its dense layer.
    """
    tp, ep = _split(shape, tp, ep, "layer_parameters")
    moe = shape.is_moe if moe is None else moe
    if moe and not shape.is_moe:
        raise ValueError("layer_parameters(moe=True) needs an MoE model (experts >= 1)")
    common = attention_parameters(shape, tp) + 2 * norm_parameters(shape)
    if not moe:
        return common + mlp_parameters(shape, tp=tp)
    shared = shape.shared_experts * mlp_parameters(shape, shape.moe_ffn_size, tp)
    return common + router_parameters(shape) + shared + expert_layer_parameters(shape, tp, ep)


def embedding_parameters(shape: ModelShape, tp: int = 1) -> int:
    """Word embeddings (``ceil(vocab/tp)`` rows) and learned position embeddings, if any."""
    tp, _ = _split(shape, tp, 1, "embedding_parameters")
    position = shape.seq_len * shape.hidden if shape.position_embeddings else 0
    return -(-shape.vocab // tp) * shape.hidden + position


def head_parameters(shape: ModelShape, tp: int = 1) -> int:
    """The output head's ``ceil(vocab/tp)`` rows, or the tied word embeddings' copy."""
    tp, _ = _split(shape, tp, 1, "head_parameters")
    return -(-shape.vocab // tp) * shape.hidden


def _layers_total(shape: ModelShape, routed_experts: int) -> int:
    attention = attention_parameters(shape) + 2 * norm_parameters(shape)
    dense = shape.layers - shape.moe_layers
    total = shape.layers * attention + dense * mlp_parameters(shape)
    if shape.is_moe:
        expert = mlp_parameters(shape, shape.moe_ffn_size)
        moe = router_parameters(shape) + (shape.shared_experts + routed_experts) * expert
        total += shape.moe_layers * moe
    return total


def total_parameters(shape: ModelShape) -> int:
    """The model's parameter count (tied embeddings once, final norm included)."""
    head = 0 if shape.tied_embeddings else head_parameters(shape)
    outside = embedding_parameters(shape) + norm_parameters(shape) + head
    return _layers_total(shape, shape.experts) + outside


def active_parameters(shape: ModelShape) -> int:
    """Parameters one token uses: everything but the routed experts it is not sent to
    (``experts_per_token`` of them count); embeddings and head included. Equals
    :func:`total_parameters` for a dense model."""
    head = 0 if shape.tied_embeddings else head_parameters(shape)
    outside = embedding_parameters(shape) + norm_parameters(shape) + head
    return _layers_total(shape, shape.experts_per_token) + outside


def part_layer_kinds(shape: ModelShape, layers_per_part) -> list[tuple[int, int]]:
    """(dense layers, MoE layers) in each model part of ``layers_per_part``: the model's
    first ``dense_layers`` layers are dense, the rest MoE (all dense without experts)."""
    out, start = [], 0
    for n in layers_of(shape, layers_per_part):
        dense_end = shape.dense_layers if shape.is_moe else shape.layers
        dense = max(0, min(start + n, dense_end) - start)
        out.append((dense, n - dense))
        start += n
    return out


def part_expert_parameters(
    shape: ModelShape, layers_per_part, tp: int = 1, ep: int = 1
) -> list[int]:
    """Of :func:`part_parameters`, the routed experts' share in each part: the parameters
    whose data-parallel copies number ``dp/ep`` instead of ``dp``."""
    per_layer = expert_layer_parameters(shape, tp, ep)
    return [moe * per_layer for _, moe in part_layer_kinds(shape, layers_per_part)]


def part_parameters(shape: ModelShape, layers_per_part, tp: int = 1, ep: int = 1) -> list[int]:
    """Parameters of each model part on one tensor- (and expert-) parallel rank: its layers
    (the first ``dense_layers`` of the model dense), the embeddings on the first part, the
    final norm and head (or the tied copy) on the last."""
    parts = part_layer_kinds(shape, layers_per_part)
    dense_layer = layer_parameters(shape, tp, moe=False, ep=ep)
    moe_layer = layer_parameters(shape, tp, moe=True, ep=ep) if shape.is_moe else 0
    out = [d * dense_layer + m * moe_layer for d, m in parts]
    out[0] += embedding_parameters(shape, tp)
    out[-1] += norm_parameters(shape)
    if not shape.tied_embeddings or len(out) > 1:
        out[-1] += head_parameters(shape, tp)
    return out
