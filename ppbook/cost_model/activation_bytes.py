"""Activation bytes: what each layer keeps for its backward, tensor by tensor (chapter 6).

:func:`layer_activation_terms` lists the tensors one layer keeps per micro-batch on one
rank, for the GPT layer of Korthikanti et al. 2022 (arXiv:2205.05198, sec. 4.1 and
Table 2, with tensor and sequence parallelism and recomputation) and for today's layers:
FlashAttention as FlashAttention-2 runs it (Dao 2023, arXiv:2307.08691, Algorithms 1 and
2: Q, K, V, the output and a 4-byte logsumexp per head and token, no s x s scores),
grouped-query attention, SwiGLU, mixture of experts with its router, DeepSeek's
multi-head latent attention, context parallelism, and DeepSeek-V3's recomputed norms and
MLA up-projections. ``tests/test_memory_model.py`` checks the GPT layer against the sympy
count of :mod:`ppbook.symbolic.activations`; ``tests/test_memory_torch.py`` checks each
term against PyTorch's saved tensors. :func:`part_activation_bytes` adds a model part's
layers and its ends. Re-exported by :mod:`ppbook.cost_model.memory_bytes`.
"""

from __future__ import annotations

from ppbook.cost_model.model_shape import ModelShape, Parallel, check_fit
from ppbook.cost_model.parameters import part_layer_kinds


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
            out["mla_latent_norm_outputs"] = e * tokens * (q_rank + shape.kv_lora_rank)
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
    out["attention_output"] = e * tokens * heads * shape.v_head_size  # projection input
    return out


def _mlp_terms(shape: ModelShape, parallel: Parallel, tokens: int, moe: bool) -> dict[str, float]:
    """What the MLP keeps beyond its norm and input (see :func:`layer_activation_terms`)."""
    e, t = shape.bytes_per_element, parallel.tp
    r = t if parallel.sp else 1
    per_token = 3 if shape.gated_mlp else 2  # SwiGLU: gate and up outputs, down input
    if not moe:
        return {"mlp_hidden": e * tokens * per_token * shape.ffn_size / t}
    routed = tokens * shape.experts_per_token * (shape.capacity_factor or 1)
    k_tokens = tokens * shape.experts_per_token
    out = {
        "router": (4.0 * tokens * shape.experts + e * k_tokens) / r,  # fp32 probs, weights
        "routing_indices": 24.0 * k_tokens / r,  # three int64 indices per routed copy
        "dispatched_tokens": e * routed * shape.hidden / r,
        "expert_hidden": e * routed * per_token * shape.moe_ffn_size / t,
        "expert_outputs": e * routed * shape.hidden / r,
    }
    if shape.shared_experts:
        width = shape.shared_experts * shape.moe_ffn_size
        out["shared_expert_hidden"] = e * tokens * per_token * width / t
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
    - dense MLP ``mlp_hidden``: GELU's input and the second matrix's input (2 f), or
      SwiGLU's gate and up outputs and the down projection's input (3 f, as Megatron's
      fused SwiGLU keeps them; an unfused ``silu(g) * u`` keeps silu(g) too);
    - MoE layer: ``router`` (fp32 probabilities over the experts, the top-k weights),
      ``routing_indices`` (three int64 indices per routed copy, as ppbook's reference
      layer keeps them), ``dispatched_tokens`` (each token's top-k copies, the experts'
      inputs), ``expert_hidden``, ``expert_outputs`` (kept by the weighted combine),
      ``shared_expert_hidden``. Routing is taken as balanced: an expert-parallel rank
      receives as many copies as its tokens send (times ``capacity_factor`` when set:
      padded buffers).

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
