"""The activation count against PyTorch: the bytes autograd keeps for a GPT layer.

A small GPT layer, built here with the structure Korthikanti et al. (arXiv:2205.05198,
sec. 4.1) count: LayerNorm, QKV linear, attention with softmax and dropout, output
projection, dropout, residual; LayerNorm, MLP h -> f h with GeLU -> h, dropout, residual.
Its forward runs under ``torch.autograd.graph.saved_tensors_hooks``, which sees every
tensor autograd keeps for the backward. We count the storages those tensors keep alive,
each once (two views of one storage, such as Q, K and V cut from the QKV output, count
one storage), leaving out the parameters, and compare with
:func:`ppbook.symbolic.activations.layer_activation_bytes` at the layer's shape.

How the layer is made to match the paper's assumptions, and what remains:

- Dropout calls ``torch.native_dropout``, which keeps a 1-byte bool mask, as the paper
  assumes and as PyTorch's fused GPU dropout does. (``F.dropout`` on a CPU tensor keeps a
  scaled noise tensor of the activation's dtype instead.)
- The attention scale multiplies by a Python number, which keeps nothing.
- PyTorch's LayerNorm also keeps each token's mean and 1/std: 2 values per token and
  LayerNorm, 4 b s values for the layer (b s of them at most 4 bytes each: 16 b s bytes at
  most, against the layer's 34 b s h). The paper leaves them out; the test finds exactly
  these four tensors of shape (b, s, 1) and checks everything else to the byte.

The same holds in float32 with ``e = 4`` bytes an element, with another MLP width ``f``,
and for one tensor-parallel rank's share of the layer (a/t heads, MLP width f h/t; the
all-reduces keep nothing): sbh(10 + 24/t + 5as/(ht)). Selective recomputation (the core
attention checkpointed) and full recomputation (the whole layer checkpointed) keep what
the count says, to the byte.
"""

import dataclasses
import math

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

from ppbook.symbolic.activations import layer_activation_bytes  # noqa: E402
from ppbook.symbolic.transformer import a, b, e, f, h, s, t  # noqa: E402

BATCH, SEQ, HIDDEN, HEADS = 2, 8, 16, 4
DROPOUT = 0.1


class Layer(torch.nn.Module):
    """A GPT layer with the structure the count assumes (batch first: (b, s, h))."""

    def __init__(self, hidden: int, heads: int, ffn: int, dtype, tp: int = 1) -> None:
        super().__init__()
        kw = {"dtype": dtype}
        self.heads, self.head_dim = heads // tp, hidden // heads
        width = self.heads * self.head_dim  # h / tp: this rank's heads
        self.norm1 = torch.nn.LayerNorm(hidden, **kw)
        self.qkv = torch.nn.Linear(hidden, 3 * width, **kw)  # column-parallel
        self.proj = torch.nn.Linear(width, hidden, **kw)  # row-parallel
        self.norm2 = torch.nn.LayerNorm(hidden, **kw)
        self.fc1 = torch.nn.Linear(hidden, ffn * hidden // tp, **kw)  # column-parallel
        self.fc2 = torch.nn.Linear(ffn * hidden // tp, hidden, **kw)  # row-parallel

    def core_attention(self, q, k, v):
        """softmax(Q K^T / sqrt(d)), dropout, times V: what selective recomputation redoes."""
        scores = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(q.shape[-1]))  # (b, a, s, s)
        probs = torch.native_dropout(torch.softmax(scores, dim=-1), DROPOUT, True)[0]
        return probs @ v  # (b, a, s, d)

    def forward(self, x, selective: bool = False):
        batch, seq, _ = x.shape
        qkv = self.qkv(self.norm1(x))  # (b, s, 3h/tp)
        heads = qkv.view(batch, seq, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = heads[0], heads[1], heads[2]  # (b, a/tp, s, d) each, views of qkv
        if selective:
            ctx = checkpoint(self.core_attention, q, k, v, use_reentrant=True)
        else:
            ctx = self.core_attention(q, k, v)
        ctx = ctx.transpose(1, 2).reshape(batch, seq, self.heads * self.head_dim)  # (b, s, h/tp)
        # (with tensor parallelism an all-reduce of the projection's output, keeping nothing)
        x = x + torch.native_dropout(self.proj(ctx), DROPOUT, True)[0]
        mlp = self.fc2(F.gelu(self.fc1(self.norm2(x))))  # (b, s, h)
        return x + torch.native_dropout(mlp, DROPOUT, True)[0]


def saved_storages(layer: Layer, x, **kwargs) -> list[tuple[tuple[int, ...], int]]:
    """(shape, bytes) of each storage autograd keeps for the backward, once, parameters out."""
    params = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    seen: dict[int, tuple[tuple[int, ...], int]] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            seen.setdefault(storage.data_ptr(), (tuple(tensor.shape), storage.nbytes()))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = layer(x, **kwargs)
    out.float().sum().backward()  # what was kept is enough for the backward
    return list(seen.values())


def run(dtype, ffn: int = 4, tp: int = 1, **kwargs):
    torch.manual_seed(0)
    layer = Layer(HIDDEN, HEADS, ffn, dtype, tp)
    x = torch.randn(BATCH, SEQ, HIDDEN, dtype=dtype, requires_grad=True)
    return saved_storages(layer, x, **kwargs), x.element_size()


def expected(ffn: int, size: int, tp: int = 1, **kwargs) -> int:
    expr = layer_activation_bytes(tensor_parallel=tp > 1, **kwargs)
    at = {s: SEQ, b: BATCH, h: HIDDEN, a: HEADS, f: ffn, e: size, t: tp}
    return int(expr.subs(at))


def split_norm_statistics(storages, size: int):
    """The LayerNorms' per-token mean and 1/std (shape (b, s, 1)) apart from the rest."""
    stats = [n for shape, n in storages if shape == (BATCH, SEQ, 1)]
    rest = sum(n for shape, n in storages if shape != (BATCH, SEQ, 1))
    return stats, rest


@pytest.mark.parametrize(("dtype", "ffn"), [("bfloat16", 4), ("float32", 4), ("bfloat16", 2)])
def test_saved_bytes_match_the_count(dtype, ffn):
    storages, size = run(getattr(torch, dtype), ffn)
    stats, rest = split_norm_statistics(storages, size)
    assert len(stats) == 4  # mean and 1/std of two LayerNorms
    assert all(n <= 4 * BATCH * SEQ for n in stats)  # at most 4 bytes a token each
    assert rest == expected(ffn, size)  # everything else, to the byte


@pytest.mark.parametrize("tp", [2, 4])
def test_one_tensor_parallel_rank_keeps_the_tp_count(tp):
    # one rank's share of the layer: a/tp heads, MLP width f h/tp; LayerNorms, dropouts
    # after attention and MLP, and the first linears' inputs whole (the replicated region)
    storages, size = run(torch.bfloat16, tp=tp)
    stats, rest = split_norm_statistics(storages, size)
    assert len(stats) == 4
    assert (
        rest
        == expected(4, size, tp)
        == SEQ * BATCH * HIDDEN * (10 + 24 / tp + 5 * HEADS * SEQ / (HIDDEN * tp))
    )


def test_paper_form_at_16_bit():
    storages, size = run(torch.bfloat16)
    _, rest = split_norm_statistics(storages, size)
    assert size == 2
    assert rest == SEQ * BATCH * HIDDEN * (34 + 5 * HEADS * SEQ / HIDDEN)  # sbh(34 + 5as/h)


def test_selective_recomputation_keeps_no_attention_scores():
    storages, size = run(torch.bfloat16, selective=True)
    stats, rest = split_norm_statistics(storages, size)
    assert len(stats) == 4
    assert rest == expected(4, size, recompute="selective") == 34 * SEQ * BATCH * HIDDEN
    assert not [shape for shape, _ in storages if shape[-2:] == (SEQ, SEQ)]


def test_full_recomputation_keeps_the_layer_input_only():
    torch.manual_seed(0)
    layer = Layer(HIDDEN, HEADS, 4, torch.bfloat16)
    x = torch.randn(BATCH, SEQ, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    params = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    kept = {}

    def pack(tensor):
        if tensor.untyped_storage().data_ptr() not in params:
            kept[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = checkpoint(layer, x, use_reentrant=True)
    out.float().sum().backward()
    assert list(kept) == [x.untyped_storage().data_ptr()]
    assert sum(kept.values()) == expected(4, 2, recompute="full") == 2 * SEQ * BATCH * HIDDEN


# ----- today's layers: grouped-query attention, SwiGLU, mixture of experts ---------------
#
# The same hook counts what autograd keeps for a Llama-style layer (no dropout, no biases)
# and compares it with ppbook.cost_model.memory_bytes.layer_activation_terms, term by term
# where a term is one tensor. Norms: PyTorch's LayerNorm kernel (without bias) stands for
# RMSNorm; both keep their input and per-token statistics (1/rms, or mean and 1/std), which
# the count leaves out as above. (PyTorch's CPU rms_norm is a composite of fp32 operations
# that keeps fp32 copies; fused RMSNorm kernels, as Megatron-LM and DeepSeek run, keep the
# input and 1/rms.)
#
# FlashAttention: on CPU, scaled_dot_product_attention runs PyTorch's flash kernel for CPU,
# which keeps what FlashAttention-2's backward needs (Dao 2023, arXiv:2307.08691, Algorithms
# 1 and 2): Q, K and
# V (K and V as narrow as grouped-query attention makes them, enable_gqa=True), the output
# and the fp32 logsumexp of each head and token; no s x s tensor.

from ppbook.cost_model import memory_bytes as mb  # noqa: E402
from ppbook.cost_model.model_shape import ModelShape, Parallel  # noqa: E402


class SwiGLU(torch.autograd.Function):
    """silu(gate) * up from the concatenated [gate, up], keeping only that input: what
    Megatron-LM's fused ``bias_swiglu`` keeps (its ``SwiGLUFunction``)."""

    @staticmethod
    def forward(ctx, gate_up):
        ctx.save_for_backward(gate_up)
        gate, up = gate_up.chunk(2, dim=-1)
        return F.silu(gate) * up

    @staticmethod
    def backward(ctx, grad):
        (gate_up,) = ctx.saved_tensors
        with torch.enable_grad():
            x = gate_up.detach().requires_grad_()
            gate, up = x.chunk(2, dim=-1)
            (F.silu(gate) * up).backward(grad)
        return x.grad


class GatedMlp(torch.nn.Module):
    """A SwiGLU MLP of width ``width`` on one of ``tp`` ranks; fused or plain silu(g) * u."""

    def __init__(self, hidden, width, tp, dtype, fused=True):
        super().__init__()
        self.fc1 = torch.nn.Linear(hidden, 2 * width // tp, bias=False, dtype=dtype)
        self.fc2 = torch.nn.Linear(width // tp, hidden, bias=False, dtype=dtype)
        self.fused = fused

    def forward(self, x):
        gate_up = self.fc1(x)
        if self.fused:
            return self.fc2(SwiGLU.apply(gate_up))
        gate, up = gate_up.chunk(2, dim=-1)
        return self.fc2(F.silu(gate) * up)


class Moe(torch.nn.Module):
    """An MoE MLP: a router (softmax in fp32, top-k), each token's k copies sorted by
    expert, each expert a SwiGLU MLP, outputs put back in token order, weighted and summed
    over the k copies; shared experts. It keeps three int64 indices per copy (top-k's, the
    gather's and the un-sort's)."""

    def __init__(self, shape: ModelShape, dtype):
        super().__init__()
        h, width = shape.hidden, shape.moe_ffn_size
        self.k = shape.experts_per_token
        self.router = torch.nn.Linear(h, shape.experts, bias=False, dtype=dtype)
        self.experts = torch.nn.ModuleList(
            GatedMlp(h, width, 1, dtype) for _ in range(shape.experts)
        )
        shared = shape.shared_experts * width
        self.shared = GatedMlp(h, shared, 1, dtype) if shared else None

    def forward(self, x):  # (b, s, h)
        tokens = x.reshape(-1, x.shape[-1])  # (T, h), a view
        probs = torch.softmax(self.router(tokens).float(), dim=-1)  # (T, E) fp32, kept
        weights, chosen = probs.topk(self.k, dim=-1)  # keeps the int64 indices (T, k)
        order = chosen.flatten().argsort(stable=True)  # copies sorted by expert
        token_of = order // self.k  # (T k,) int64, kept by the gather
        routed = tokens[token_of]  # (T k, h): the dispatched copies
        counts = torch.bincount(chosen.flatten(), minlength=len(self.experts)).tolist()
        outs, start = [], 0
        for expert, count in zip(self.experts, counts, strict=True):
            outs.append(expert(routed[start : start + count]))
            start += count
        back = torch.cat(outs)[order.argsort()]  # (T k, h) in token order; keeps the index
        weighted = back.view(-1, self.k, x.shape[-1]) * weights.to(x.dtype)[..., None]
        out = weighted.sum(dim=1)  # (T, h): the multiply keeps the outputs and the weights
        if self.shared is not None:
            out = out + self.shared(tokens)
        return out.view_as(x)


class ModernLayer(torch.nn.Module):
    """A Llama-style layer (Mixtral's with ``moe``): norm, Q/K/V projections, attention
    (grouped-query), output projection, residual; norm, SwiGLU MLP or MoE, residual."""

    def __init__(self, shape: ModelShape, tp: int, dtype, moe=False, fused=True):
        super().__init__()
        h, d = shape.hidden, shape.head_size
        self.heads, self.kv_heads, self.d = shape.heads // tp, shape.num_kv_heads // tp, d
        self.norm1 = torch.nn.LayerNorm(h, bias=False, dtype=dtype)
        self.q = torch.nn.Linear(h, self.heads * d, bias=False, dtype=dtype)
        self.k = torch.nn.Linear(h, self.kv_heads * d, bias=False, dtype=dtype)
        self.v = torch.nn.Linear(h, self.kv_heads * d, bias=False, dtype=dtype)
        self.o = torch.nn.Linear(self.heads * d, h, bias=False, dtype=dtype)
        self.norm2 = torch.nn.LayerNorm(h, bias=False, dtype=dtype)
        if moe:
            self.mlp = Moe(shape, dtype)
        else:
            self.mlp = GatedMlp(h, shape.ffn_size, tp, dtype, fused)

    def attention(self, q, k, v, flash):
        if flash:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        group = self.heads // self.kv_heads  # unfused: K and V repeated to every query head
        batch, _, seq, d = k.shape
        k = k[:, :, None].expand(batch, self.kv_heads, group, seq, d).reshape(q.shape)
        v = v[:, :, None].expand(batch, self.kv_heads, group, seq, d).reshape(q.shape)
        causal = torch.full((seq, seq), -math.inf, dtype=q.dtype).triu(1)  # added: kept by none
        scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(d)) + causal
        return torch.softmax(scores, dim=-1) @ v  # (b, a, s, d)

    def forward(self, x, flash=True):
        batch, seq, _ = x.shape
        xn = self.norm1(x)

        def heads(t, n):  # (b, s, n d) -> (b, n, s, d), a view
            return t.view(batch, seq, n, self.d).transpose(1, 2)

        q = heads(self.q(xn), self.heads)
        k, v = heads(self.k(xn), self.kv_heads), heads(self.v(xn), self.kv_heads)
        ctx = self.attention(q, k, v, flash).transpose(1, 2).reshape(batch, seq, -1)
        x = x + self.o(ctx)
        return x + self.mlp(self.norm2(x))


LLAMA_SMALL = ModelShape(
    2, HIDDEN, HEADS, 32, SEQ, kv_heads=2, ffn_hidden=24, gated_mlp=True, norm="rmsnorm",
    linear_bias=False, position_embeddings=False, tied_embeddings=False, dropout=False,
)  # fmt: skip
MOE_SMALL = dataclasses.replace(
    LLAMA_SMALL, experts=4, experts_per_token=2, shared_experts=1, moe_ffn_hidden=12
)


def modern_storages(shape, tp=1, dtype=torch.bfloat16, moe=False, fused=True, flash=True):
    torch.manual_seed(0)
    layer = ModernLayer(shape, tp, dtype, moe, fused)
    x = torch.randn(BATCH, SEQ, shape.hidden, dtype=dtype, requires_grad=True)
    return saved_storages(layer, x, flash=flash)


def norm_stats(storages):
    """The norms' per-token statistics, (b, s, 1) each, and the bytes of everything else."""
    return split_norm_statistics(storages, 0)


def terms(shape, **parallel):
    return mb.layer_activation_terms(shape, Parallel(microbatch_size=BATCH, **parallel))


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_flash_gqa_swiglu_layer_keeps_the_count(tp, dtype):
    dtype = getattr(torch, dtype)
    shape = dataclasses.replace(LLAMA_SMALL, bytes_per_element=torch.finfo(dtype).bits // 8)
    storages = modern_storages(shape, tp, dtype)
    stats, rest = norm_stats(storages)
    assert len(stats) == 4  # mean and 1/std of two norms
    counted = terms(shape, tp=tp, attention="flash")
    assert rest == mb.layer_activation_bytes(
        shape, Parallel(tp=tp, microbatch_size=BATCH, attention="flash")
    )
    # FlashAttention's fp32 logsumexp: one storage, (b, a/t, s), the softmax_lse term
    lse = [n for shape_, n in storages if shape_ == (BATCH, HEADS // tp, SEQ)]
    assert lse == [counted["softmax_lse"]]
    assert not [s for s, _ in storages if s[-2:] == (SEQ, SEQ)]  # no s x s tensor
    # K and V stay narrow: kv_heads/t heads of d, not the a/t heads of Q
    narrow = [n for s, n in storages if s == (BATCH, 2 // tp, SEQ, shape.head_size)]
    assert narrow == [BATCH * SEQ * (2 // tp) * shape.head_size * shape.bytes_per_element] * 2


def test_unfused_gqa_attention_keeps_k_and_v_repeated_and_the_scores():
    storages = modern_storages(LLAMA_SMALL, flash=False)
    _, rest = norm_stats(storages)
    counted = terms(LLAMA_SMALL)  # attention="standard"
    assert rest == sum(counted.values())
    scores = [n for s, n in storages if s[-2:] == (SEQ, SEQ)]
    assert sum(scores) == counted["scores"] == 2 * HEADS * SEQ**2 * BATCH  # softmax output


def test_plain_swiglu_keeps_one_more_f_wide_tensor_than_the_fused_count():
    fused = norm_stats(modern_storages(LLAMA_SMALL))[1]
    plain = norm_stats(modern_storages(LLAMA_SMALL, fused=False))[1]
    # silu(g) kept as well by the product's backward: e tokens f more
    assert plain - fused == 2 * BATCH * SEQ * LLAMA_SMALL.ffn_size
    assert fused == mb.layer_activation_bytes(
        LLAMA_SMALL, Parallel(microbatch_size=BATCH, attention="flash")
    )


def test_moe_layer_keeps_the_count():
    storages = modern_storages(MOE_SMALL, moe=True)
    stats, rest = norm_stats(storages)
    assert len(stats) == 4
    counted = terms(MOE_SMALL, attention="flash")
    assert {"router", "routing_indices", "dispatched_tokens", "expert_hidden"} <= set(counted)
    assert rest == sum(counted.values())
    tokens, k = BATCH * SEQ, MOE_SMALL.experts_per_token
    probs = [n for s, n in storages if s == (tokens, MOE_SMALL.experts)]
    assert probs == [4 * tokens * MOE_SMALL.experts]  # fp32 router probabilities
    copies = 2 * tokens * k * HIDDEN  # bytes of a (T k, h) tensor: k copies of each token
    dispatched = [n for _, n in storages if n == copies]
    assert len(dispatched) == 2  # the experts' inputs and their outputs
    assert sum(dispatched) == counted["dispatched_tokens"] + counted["expert_outputs"]


class MlaAttention(torch.nn.Module):
    """Multi-head latent attention as DeepSeek-V3's Hugging Face model lays it out (no
    rotary rotation: it keeps only its cos/sin tables): queries through a rank-``rq``
    latent, keys and values through one rank-``rkv`` latent and a shared rotary key."""

    def __init__(self, shape: ModelShape, dtype):
        super().__init__()
        h, a, rq, rkv = shape.hidden, shape.heads, shape.q_lora_rank, shape.kv_lora_rank
        self.shape = shape
        self.q_a = torch.nn.Linear(h, rq, bias=False, dtype=dtype)
        self.q_a_norm = torch.nn.LayerNorm(rq, bias=False, dtype=dtype)
        self.q_b = torch.nn.Linear(rq, a * shape.qk_head_size, bias=False, dtype=dtype)
        self.kv_a = torch.nn.Linear(h, rkv + shape.qk_rope_head_dim, bias=False, dtype=dtype)
        self.kv_a_norm = torch.nn.LayerNorm(rkv, bias=False, dtype=dtype)
        up = a * (shape.head_size + shape.v_head_size)
        self.kv_b = torch.nn.Linear(rkv, up, bias=False, dtype=dtype)
        self.o = torch.nn.Linear(a * shape.v_head_size, h, bias=False, dtype=dtype)

    def forward(self, xn):  # (b, s, h): the norm's output
        shape, (batch, seq, _) = self.shape, xn.shape
        a, nope, rope = shape.heads, shape.head_size, shape.qk_rope_head_dim
        q = self.q_b(self.q_a_norm(self.q_a(xn))).view(batch, seq, a, -1)  # (b, s, a, qk)
        latent, k_rope = self.kv_a(xn).split([shape.kv_lora_rank, rope], dim=-1)  # views
        kv = self.kv_b(self.kv_a_norm(latent)).view(batch, seq, a, -1)
        k_nope, v = kv.split([nope, shape.v_head_size], dim=-1)
        k = torch.cat([k_nope, k_rope[:, :, None].expand(batch, seq, a, rope)], dim=-1)
        v = v.contiguous()  # its own tensor, as a kernel taking separate K and V gets it
        out = F.scaled_dot_product_attention(
            *(x.transpose(1, 2) for x in (q, k, v)), is_causal=True
        )
        return self.o(out.transpose(1, 2).reshape(batch, seq, -1))


def test_mla_attention_keeps_its_latents_and_the_up_projected_heads():
    shape = ModelShape(
        1, HIDDEN, HEADS, 32, SEQ, head_dim=4, q_lora_rank=6, kv_lora_rank=5,
        qk_rope_head_dim=2, v_head_dim=6, dropout=False, norm="rmsnorm", linear_bias=False,
    )  # fmt: skip
    torch.manual_seed(0)
    layer = MlaAttention(shape, torch.bfloat16)
    xn = torch.randn(BATCH, SEQ, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    storages = saved_storages(layer, xn)
    stats, rest = norm_stats(storages)
    assert len(stats) == 4  # mean and 1/std of the two latent norms
    counted = terms(shape, attention="flash")
    attention = ("mla_latents", "mla_latent_norm_outputs", "qkv", "softmax_lse")
    tokens = BATCH * SEQ
    # the norm's output, xn, which both down-projections keep, is the norm_outputs term's half
    assert rest == sum(counted[k] for k in attention) + counted["attention_output"] + (
        2 * tokens * HIDDEN
    )
    assert counted["mla_latents"] == 2 * tokens * (6 + 5 + 2)  # q latent; kv latent + rope key
