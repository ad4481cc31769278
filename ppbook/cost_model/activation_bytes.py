"""Activation bytes: what each layer keeps for its backward, tensor by tensor (chapter 6).

:func:`layer_activation_terms` lists the tensors one layer keeps per micro-batch on one
rank, for the GPT layer of Korthikanti et al. 2022 (arXiv:2205.05198, sec. 4.1 and
Table 2, with tensor and sequence parallelism and recomputation) and for today's layers:
FlashAttention as FlashAttention-2 runs it (Dao 2023, arXiv:2307.08691, Algorithms 1 and
2: Q, K, V, the output and a 4-byte logsumexp per head and token, no s x s scores),
grouped-query attention, SwiGLU, mixture of experts with its router, DeepSeek's
multi-head latent attention, context parallelism, and DeepSeek-V3's recomputed norms and
MLA up-projections, FP8 activations and recomputed MoE SwiGLU (its report, arXiv:2412.19437,
sec. 3.2.3 and 3.3.3). ``tests/test_memory_model.py`` checks the GPT layer against the sympy
count of :mod:`ppbook.symbolic.activations`; ``tests/test_memory_torch.py`` checks each
term against PyTorch's saved tensors (``tests/test_memory_fp8.py`` the FP8 and recomputed
SwiGLU terms). :func:`part_activation_bytes` adds a model part's
layers and its ends. Re-exported by :mod:`ppbook.cost_model.memory_bytes`.
"""

from __future__ import annotations

import math

from ppbook.cost_model.model_shape import ModelShape, Parallel, check_fit
from ppbook.cost_model.parameters import part_layer_kinds

FP8_TILE = 128
"""Elements that share one fp32 scale in an FP8 activation: a 1 x 128 tile of a row (per
token, per 128 channels; DeepSeek-V3 report sec. 3.3.2, "Fine-Grained Quantization")."""
E5M6_BYTES = 1.5
"""Bytes an element of the E5M6 format (1 sign, 5 exponent and 6 mantissa bits, packed),
which DeepSeek-V3 keeps for the inputs of the linear layer after attention (sec. 3.3.3)."""


def _kept(rows: float, width: int, size: float, scaled: bool) -> float:
    """Bytes of ``rows`` rows of ``width`` elements of ``size`` bytes, plus one 4-byte
    scale per :data:`FP8_TILE`-element tile of each row when ``scaled`` (quantised)."""
    scales = 4 * math.ceil(width / FP8_TILE) if scaled else 0
    return rows * (size * width + scales)


def _linear_input(rows: float, width: int, e: int, fp8: bool) -> float:
    """A linear layer's cached input: ``e`` bytes an element, or FP8 (1 byte and a scale
    per tile) with ``fp8_activations``."""
    return _kept(rows, width, 1 if fp8 else e, fp8)


def _attention_terms(shape: ModelShape, parallel: Parallel, tokens: int) -> dict[str, float]:
    """What the attention block keeps beyond its norm (see :func:`layer_activation_terms`)."""
    e, t, b = shape.bytes_per_element, parallel.tp, parallel.microbatch_size
    heads, d = shape.heads // t, shape.head_size
    flash = parallel.attention == "flash"
    out: dict[str, float] = {}
    if shape.uses_mla:  # latents whole on every tensor-parallel rank (down-projections)
        q_rank = shape.q_lora_rank or 0
        out["mla_latents"] = e * tokens * (q_rank + shape.kv_lora_rank + shape.qk_rope_head_dim)
        if not parallel.recompute_norm:  # the latents' RMSNorm outputs, up-projection inputs
            fp8 = parallel.fp8_activations
            widths = (q_rank, shape.kv_lora_rank)
            out["mla_latent_norm_outputs"] = sum(_linear_input(tokens, w, e, fp8) for w in widths)
        qkv = heads * (2 * shape.qk_head_size + shape.v_head_size)
        if not parallel.recompute_mla_up:
            out["qkv"] = e * tokens * qkv
    elif flash:  # FlashAttention keeps K and V as narrow as grouped-query attention makes them
        out["qkv"] = e * tokens * (heads + 2 * shape.num_kv_heads // t) * d
    else:  # unfused attention multiplies by K and V repeated to every query head
        out["qkv"] = e * tokens * 3 * heads * d
    if parallel.recompute == "none":
        if flash:
            out["softmax_lse"] = 4.0 * tokens * heads  # fp32 logsumexp, a head and token
        else:  # softmax output; with dropout its 1-byte mask and output too
            keep = 2 * e + 1 if shape.dropout else e
            out["scores"] = keep * heads * shape.seq_len**2 * b
    width = heads * shape.v_head_size  # the output projection's input, FlashAttention's output
    if parallel.fp8_activations:  # E5M6, as it also feeds attention's backward (sec. 3.3.3)
        out["attention_output"] = _kept(tokens, width, E5M6_BYTES, True)
    else:
        out["attention_output"] = e * tokens * width
    return out


def _mlp_terms(shape: ModelShape, parallel: Parallel, tokens: int, moe: bool) -> dict[str, float]:
    """What the MLP keeps beyond its norm and input (see :func:`layer_activation_terms`)."""
    e, t, fp8 = shape.bytes_per_element, parallel.tp, parallel.fp8_activations
    r = t if parallel.sp else 1
    act = 2 if shape.gated_mlp else 1  # the activation's input: SwiGLU's gate and up; GELU's
    if not moe:  # the activation's input in e bytes, the down projection's input a linear's
        width = shape.ffn_size // t
        return {"mlp_hidden": e * tokens * act * width + _linear_input(tokens, width, e, fp8)}
    routed = tokens * shape.experts_per_token * (shape.capacity_factor or 1)
    k_tokens = tokens * shape.experts_per_token
    width = shape.moe_ffn_size // t
    recompute = parallel.recompute_swiglu

    def hidden(rows: float, width: int) -> float:
        """An expert's activation input (FP8 with fp8_activations, sec. 3.3.3 (2)) and,
        unless recomputed, its output, the down projection's input."""
        kept = _linear_input(rows, act * width, e, fp8)
        return kept if recompute else kept + _linear_input(rows, width, e, fp8)

    out = {
        # fp32 probabilities; the top-k weights that the combine multiplies by
        "router": (4.0 * tokens * shape.experts + (0 if recompute else e * k_tokens)) / r,
        "routing_indices": 24.0 * k_tokens / r,  # three int64 indices per routed copy
        "dispatched_tokens": _linear_input(routed / r, shape.hidden, e, fp8),
        "expert_hidden": hidden(routed, width),
    }
    if recompute:  # each copy's fp32 weight, which the weighted SwiGLU keeps
        out["expert_weights"] = 4.0 * routed
    else:  # the weighted combine keeps the experts' outputs for the weights' gradient
        out["expert_outputs"] = e * routed * shape.hidden / r
    if shape.shared_experts:
        out["shared_expert_hidden"] = hidden(tokens, shape.shared_experts * width)
    return out


def layer_activation_terms(
    shape: ModelShape, parallel: Parallel, *, moe: bool | None = None
) -> dict[str, float]:
    """The bytes one layer keeps per micro-batch on one rank, term by term.

    ``tokens`` below is ``microbatch_size * seq_len / cp`` (context parallelism splits the
    sequence), ``r`` is ``tp`` with sequence parallelism, else 1, ``e`` bytes an element.

    - ``norm_inputs`` 2 e tokens h / r; ``norm_outputs`` (the attention's and MLP's
      inputs) 2 e tokens h / r, unless ``recompute_norm``; ``dropout_masks`` 2 tokens h / r
      (1 byte an element) when the model drops out;
    - attention: ``qkv`` Q, K and V per tensor-parallel rank (standard attention: K and V
      repeated to all query heads; FlashAttention: as narrow as ``kv_heads``; MLA: after
      the up-projections, none with ``recompute_mla_up``), ``mla_latents`` and
      ``mla_latent_norm_outputs``, ``attention_output`` (the projection's input, which is
      also what FlashAttention keeps as its output), and either ``scores`` (standard: the
      softmax output, with dropout its mask and output, a s^2 per sample, Korthikanti et
      al. 2022 sec. 4.1) or ``softmax_lse`` (FlashAttention: 4 bytes a head and token,
      FlashAttention-2's Algorithm 1); neither with selective recomputation;
    - dense MLP ``mlp_hidden``: GELU's input and the second matrix's input (2 d_ff), or
      SwiGLU's gate and up outputs and the down projection's input (3 d_ff, as Megatron's
      fused SwiGLU keeps them; an unfused ``silu(g) * u`` keeps silu(g) too);
    - MoE layer: ``router`` (fp32 probabilities over the experts, the top-k weights),
      ``routing_indices`` (three int64 indices per routed copy, as ppbook's reference
      layer keeps them), ``dispatched_tokens`` (each token's top-k copies, the experts'
      inputs), ``expert_hidden``, ``expert_outputs`` (kept by the weighted combine),
      ``shared_expert_hidden``. Routing is taken as balanced: an expert-parallel rank
      receives as many copies as its tokens send (times ``capacity_factor`` when set:
      padded buffers).

    DeepSeek-V3's choices (its report, arXiv:2412.19437):

    - ``fp8_activations`` (sec. 3.3.1 and 3.3.3, "Low-Precision Activation" and
      "Low-Precision Communication"): what a linear layer caches for its backward is kept
      in FP8, 1 byte an element and a 4-byte scale per 1 x 128 tile of a row: the
      dispatched tokens (quantised before the dispatch), the down projections' inputs,
      MLA's latent norm outputs (the up-projections' inputs, when kept), and the MoE
      SwiGLU's inputs (in ``expert_hidden`` and ``shared_expert_hidden``); the
      inputs of the projection after attention (``attention_output``) in E5M6, 1.5 bytes
      an element and a scale. The norms, attention (``qkv``, ``mla_latents``), the router
      and the combine keep ``e`` bytes (sec. 3.3.1 keeps them in their precision), and
      ``norm_outputs`` (when kept) stays at ``e`` bytes too, an upper bound: the MLP's
      norm output also feeds the router;
    - ``recompute_swiglu`` (sec. 3.3.3 (2)): the MoE layers' experts, routed and shared,
      keep only their SwiGLU's input (gate and up, 2 f; GELU's input, f) and recompute its
      output for the down projection's weight gradient. The report does not say where the
      router's weights are applied; ppbook applies them inside the SwiGLU, as Megatron-Core's
      ``WeightedSwiGLUFunction`` does (megatron/core/fusions/fused_bias_swiglu.py; DeepEP's
      dispatch hands the weights to the expert side and its combine sums without them):
      with y = g W_down h, the weight's gradient (W_down^T dy) . h comes from the down
      projection's input gradient and the recomputed h, so no expert output is kept
      (``expert_outputs`` goes) and each routed copy keeps its fp32 weight
      (``expert_weights``) in place of the router's top-k weights.

    With full recomputation only the layer's input, e tokens h / r.
    """
    check_fit(shape, parallel)
    moe = shape.is_moe if moe is None else moe
    if moe and not shape.is_moe:
        raise ValueError("layer_activation_terms(moe=True) needs an MoE model (experts >= 1)")
    e, h = shape.bytes_per_element, shape.hidden
    tokens = shape.seq_len // parallel.cp * parallel.microbatch_size
    r = parallel.tp if parallel.sp else 1
    if parallel.recompute == "full":
        return {"layer_input": e * tokens * h / r}
    out = {"norm_inputs": 2 * e * tokens * h / r}
    if not parallel.recompute_norm:
        out["norm_outputs"] = 2 * e * tokens * h / r
    if shape.dropout:
        out["dropout_masks"] = 2 * tokens * h / r
    return (
        out | _attention_terms(shape, parallel, tokens) | _mlp_terms(shape, parallel, tokens, moe)
    )


def layer_activation_bytes(
    shape: ModelShape, parallel: Parallel, *, moe: bool | None = None
) -> float:
    """Bytes one layer keeps per micro-batch on one rank: the sum of
    :func:`layer_activation_terms` (for the GPT layer with standard attention,
    Korthikanti et al. 2022's sbh(34 + 5as/h) and its tensor-parallel forms)."""
    return sum(layer_activation_terms(shape, parallel, moe=moe).values())


def part_activation_bytes(shape: ModelShape, parallel: Parallel, layers_per_part) -> list[float]:
    """Bytes each model part keeps per micro-batch: its layers (dense or MoE), the embedding
    dropout's 1-byte mask on the first part, the final norm's and output layer's inputs and
    the 32-bit logits on the last."""
    dense = layer_activation_bytes(shape, parallel, moe=False)
    moe = layer_activation_bytes(shape, parallel, moe=True) if shape.is_moe else 0.0
    tokens = shape.seq_len // parallel.cp * parallel.microbatch_size
    r = parallel.tp if parallel.sp else 1
    out = [d * dense + m * moe for d, m in part_layer_kinds(shape, layers_per_part)]
    if shape.dropout:
        out[0] += tokens * shape.hidden / r
    out[-1] += 2 * shape.bytes_per_element * tokens * shape.hidden / r
    out[-1] += 4 * tokens * -(-shape.vocab // parallel.tp)
    return out
