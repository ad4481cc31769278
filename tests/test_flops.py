"""FLOPs of today's layers (ppbook.cost_model.flops) against what they were not built from:
PyTorch's own FLOP counter (torch.utils.flop_counter.FlopCounterMode) on tiny torch layers
written here by hand (GQA, SwiGLU, an MoE layer with its router and a shared expert), its
count of a fused attention kernel's backward, and the 6 N rule with published parameter
counts (Llama 3 8B, Mixtral 8x7B, DeepSeek-V3)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from ppbook.cost_model.flops import (
    attention_flops,
    layer_flops,
    layer_gemms,
    layer_kinds,
    model_flops,
    part_flops,
)
from ppbook.cost_model.model_shape import ModelShape, Parallel

B, S, H, HEADS, KV, FFN = 2, 16, 64, 8, 2, 96


class Attention(nn.Module):
    """Grouped-query attention written out: K and V of ``kv`` heads, repeated to ``heads``."""

    def __init__(self, hidden, heads, kv_heads, bias):
        super().__init__()
        self.heads, self.kv, self.d = heads, kv_heads, hidden // heads
        self.q = nn.Linear(hidden, heads * self.d, bias=bias)
        self.k = nn.Linear(hidden, kv_heads * self.d, bias=bias)
        self.v = nn.Linear(hidden, kv_heads * self.d, bias=bias)
        self.o = nn.Linear(heads * self.d, hidden, bias=bias)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.d).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv, self.d).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv, self.d).transpose(1, 2)
        k = k.repeat_interleave(self.heads // self.kv, dim=1)
        v = v.repeat_interleave(self.heads // self.kv, dim=1)
        scores = (q @ k.transpose(-1, -2)) / self.d**0.5
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        probs = scores.masked_fill(mask, float("-inf")).softmax(-1)
        return self.o((probs @ v).transpose(1, 2).reshape(b, s, -1))


class SwiGLU(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoE(nn.Module):
    """A router, top-k of ``experts`` SwiGLU experts per token (dropless), a shared expert."""

    def __init__(self, hidden, experts, top, ffn, shared):
        super().__init__()
        self.top = top
        self.router = nn.Linear(hidden, experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(hidden, ffn) for _ in range(experts))
        self.shared = SwiGLU(hidden, shared * ffn) if shared else None

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        weights, chosen = self.router(flat).softmax(-1).topk(self.top, dim=-1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            if len(rows):
                out = out.index_add(0, rows, expert(flat[rows]) * weights[rows, slot, None])
        if self.shared is not None:
            out = out + self.shared(flat)
        return out.view_as(x)


class Layer(nn.Module):
    def __init__(self, attention, mlp, hidden):
        super().__init__()
        self.n1, self.n2 = nn.RMSNorm(hidden), nn.RMSNorm(hidden)
        self.attention, self.mlp = attention, mlp

    def forward(self, x):
        x = x + self.attention(self.n1(x))
        return x + self.mlp(self.n2(x))


def counted(layer) -> tuple[float, float]:
    """(forward, backward) FLOPs PyTorch counts for one micro-batch of B x S tokens; the
    input needs its gradient, as a pipeline stage's does."""
    torch.manual_seed(0)
    x = torch.randn(B, S, H, requires_grad=True)
    with FlopCounterMode(display=False) as forward:
        out = layer(x)
    with FlopCounterMode(display=False) as backward:
        out.square().sum().backward()
    return forward.get_total_flops(), backward.get_total_flops()


def standard(**kw) -> Parallel:
    return Parallel(microbatch_size=B, attention="standard", **kw)


def test_gqa_with_a_gelu_mlp_matches_pytorchs_count():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(H, FFN), nn.GELU(), nn.Linear(FFN, H))
    forward, backward = counted(Layer(Attention(H, HEADS, KV, True), mlp, H))
    shape = ModelShape(1, H, HEADS, 100, S, kv_heads=KV, ffn_hidden=FFN)
    ours = layer_flops(shape, standard())
    assert (ours["F"], ours["B"]) == (forward, backward)
    # Narrower K and V: fewer FLOPs than full multi-head attention, by 2 * 2 T h (h - kv d).
    full = layer_flops(ModelShape(1, H, HEADS, 100, S, ffn_hidden=FFN), standard())
    assert full["F"] - ours["F"] == 2 * 2 * B * S * H * (H - KV * H // HEADS)


def test_swiglu_matches_pytorchs_count():
    forward, backward = counted(Layer(Attention(H, HEADS, HEADS, False), SwiGLU(H, FFN), H))
    shape = ModelShape(
        1, H, HEADS, 100, S, ffn_hidden=FFN, gated_mlp=True, norm="rmsnorm", linear_bias=False
    )
    ours = layer_flops(shape, standard())
    assert (ours["F"], ours["B"]) == (forward, backward)
    assert ours["W"] == ours["F"] - attention_flops(shape, standard())


@pytest.mark.parametrize(("experts", "top", "shared"), [(4, 2, 0), (8, 2, 1), (6, 1, 2)])
def test_an_moe_layer_matches_pytorchs_count(experts, top, shared):
    torch.manual_seed(1)
    moe = MoE(H, experts, top, 32, shared)
    forward, backward = counted(Layer(Attention(H, HEADS, KV, False), moe, H))
    shape = ModelShape(
        2,
        H,
        HEADS,
        100,
        S,
        kv_heads=KV,
        ffn_hidden=FFN,
        gated_mlp=True,
        norm="rmsnorm",
        linear_bias=False,
        experts=experts,
        experts_per_token=top,
        shared_experts=shared,
        moe_ffn_hidden=32,
        dense_layers=1,
    )
    ours = layer_flops(shape, standard())
    assert ours["F"] == pytest.approx(forward, rel=1e-12)
    assert ours["B"] == pytest.approx(backward, rel=1e-12)
    # Expert parallelism moves the same rows to fewer experts per rank: same FLOPs.
    if experts % 2 == 0:
        assert layer_flops(shape, standard(dp=2, ep=2)) == pytest.approx(ours, rel=1e-12)
    # The dense first layer is a SwiGLU of ffn_hidden, as counted in the SwiGLU test.
    dense = layer_flops(shape, standard(), moe=False)
    assert dense["F"] - attention_flops(shape, standard()) == sum(
        g.flops for g in layer_gemms(shape, standard(), moe=False)
    )
    assert {g.name for g in layer_gemms(shape, standard(), moe=False)} >= {"mlp_in", "mlp_out"}


def test_flash_attentions_backward_is_pytorchs_fused_kernel_count():
    # PyTorch counts its fused attention kernels' backward with the scores recomputed
    # (meta tensors: nothing runs). Ours: 2.5 times the forward, in I.
    d, heads = H // HEADS, HEADS
    q, k, v = (torch.randn(B, heads, S, d, device="meta") for _ in range(3))
    with FlopCounterMode(display=False) as fwd:
        out = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, True)
    with FlopCounterMode(display=False) as bwd:
        torch.ops.aten._scaled_dot_product_efficient_attention_backward(
            torch.ones_like(out[0]),
            q,
            k,
            v,
            None,
            out[0],
            out[1],
            out[2],
            out[3],
            0.0,
            [True, True, True, False],
            True,
        )
    shape = ModelShape(1, H, HEADS, 100, S)
    flash = Parallel(microbatch_size=B, attention="flash")
    core = attention_flops(shape, flash)
    assert core == fwd.get_total_flops()
    plain, fused = layer_flops(shape, standard()), layer_flops(shape, flash)
    assert fused["I"] - plain["I"] == bwd.get_total_flops() - 2 * core
    assert fused["F"] == plain["F"] and fused["W"] == plain["W"]


def llama3_8b(seq=8192):
    return ModelShape(
        32,
        4096,
        32,
        128256,
        seq,
        kv_heads=8,
        ffn_hidden=14336,
        gated_mlp=True,
        norm="rmsnorm",
        linear_bias=False,
        tied_embeddings=False,
        position_embeddings=False,
    )


def test_six_n_rule_for_llama3_8b_within_the_attention_term():
    # 6 N FLOPs a token (Kaplan et al. 2020), N the multiplied weights: the published 8.03B
    # less the input embedding table (a lookup). What remains is attention's 3 x 4 s h.
    shape, parallel = llama3_8b(), Parallel(attention="standard")
    tokens = shape.seq_len
    total = model_flops(shape, parallel)
    attention = 3 * shape.layers * attention_flops(shape, parallel)
    n = 8.03e9 - 128256 * 4096
    assert (total["F"] + total["B"] - attention) / (6 * tokens) == pytest.approx(n, rel=0.005)
    assert attention / (total["F"] + total["B"]) > 0.1  # at 8K tokens, not negligible


@pytest.mark.parametrize(
    ("card", "active"),
    [
        (  # Mixtral 8x7B: 12.9B active a token (Mistral AI, "Mixtral of experts", 2023)
            ModelShape(
                32,
                4096,
                32,
                32000,
                4096,
                kv_heads=8,
                ffn_hidden=14336,
                gated_mlp=True,
                norm="rmsnorm",
                linear_bias=False,
                experts=8,
                experts_per_token=2,
                tied_embeddings=False,
                position_embeddings=False,
            ),
            12.9e9,
        ),
        (  # DeepSeek-V3: 37B activated a token (arXiv:2412.19437, abstract), MTP left out
            ModelShape(
                61,
                7168,
                128,
                129280,
                4096,
                head_dim=128,
                ffn_hidden=18432,
                gated_mlp=True,
                norm="rmsnorm",
                linear_bias=False,
                experts=256,
                experts_per_token=8,
                shared_experts=1,
                moe_ffn_hidden=2048,
                dense_layers=3,
                q_lora_rank=1536,
                kv_lora_rank=512,
                qk_rope_head_dim=64,
                v_head_dim=128,
                tied_embeddings=False,
                position_embeddings=False,
            ),
            37e9,
        ),
    ],
    ids=["mixtral-8x7b", "deepseek-v3"],
)
def test_forward_flops_a_token_are_twice_the_published_active_parameters(card, active):
    parallel = Parallel(attention="flash")
    total = model_flops(card, parallel)
    core = card.layers * attention_flops(card, parallel)
    embedding = card.vocab * card.hidden  # looked up, not multiplied
    per_token = (total["F"] - core) / card.seq_len / 2
    assert per_token + embedding == pytest.approx(active, rel=0.02)
    assert total["W"] == pytest.approx(total["F"] - core, rel=1e-12)


def test_parts_count_dense_first_layers_and_tp_splits_the_work():
    shape = ModelShape(
        4,
        H,
        HEADS,
        100,
        S,
        ffn_hidden=FFN,
        gated_mlp=True,
        experts=4,
        experts_per_token=2,
        moe_ffn_hidden=32,
        dense_layers=1,
    )
    assert layer_kinds(shape, [1, 1, 2]) == [(1, 0), (0, 1), (0, 2)]
    assert layer_kinds(shape, [2, 2]) == [(1, 1), (0, 2)]
    par = standard()
    parts = part_flops(shape, par, [2, 2])
    dense, moe = layer_flops(shape, par, moe=False), layer_flops(shape, par)
    logits = 2 * B * S * H * 100
    assert parts[0]["F"] == dense["F"] + moe["F"]
    assert parts[1]["F"] == 2 * moe["F"] + logits and parts[1]["B"] == 2 * moe["B"] + 2 * logits
    # tp = 2 halves everything but the router (kept whole on every rank).
    half = layer_flops(shape, standard(tp=2))
    router = 2 * B * S * H * 4
    assert half["F"] == pytest.approx((moe["F"] - router) / 2 + router, rel=1e-12)


def test_context_parallelism_splits_queries_not_keys():
    shape = ModelShape(1, H, HEADS, 100, 64)
    one, four = Parallel(attention="flash"), Parallel(attention="flash", cp=4)
    assert layer_flops(shape, four)["F"] == pytest.approx(layer_flops(shape, one)["F"] / 4)
    assert attention_flops(shape, four) == 2 * 16 * 64 * HEADS * 2 * (H // HEADS)


def test_recomputation_and_bad_input():
    shape = ModelShape(1, H, HEADS, 100, S)
    flash = Parallel(attention="flash")
    none, sel = (
        layer_flops(shape, flash),
        layer_flops(shape, Parallel(attention="flash", recompute="selective")),
    )
    assert sel["I"] - none["I"] == attention_flops(shape, flash)
    with pytest.raises(ValueError, match="attention must be one of flash, standard"):
        layer_flops(shape, flash, attention="sparse")
    with pytest.raises(ValueError, match="moe=True needs an MoE model"):
        layer_flops(shape, flash, moe=True)


def test_mla_multiplies_are_deepseek_v3s_projections():
    # DeepSeek-V3's config.json: q_lora_rank 1536, kv_lora_rank 512, 128 heads,
    # qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, hidden 7168. Under tp = 8
    # the down-projections stay whole (Megatron-Core's MLA), the rest split 8 ways.
    shape = ModelShape(
        61,
        7168,
        128,
        129280,
        4096,
        head_dim=128,
        ffn_hidden=18432,
        gated_mlp=True,
        linear_bias=False,
        experts=256,
        experts_per_token=8,
        shared_experts=1,
        moe_ffn_hidden=2048,
        dense_layers=3,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        v_head_dim=128,
    )
    gemms = {g.name: (g.k, g.n) for g in layer_gemms(shape, Parallel(tp=8, dp=8, ep=8))}
    assert gemms["q_down"] == (7168, 1536)
    assert gemms["q_up"] == (1536, 128 * (128 + 64) // 8)
    assert gemms["kv_down"] == (7168, 512 + 64)
    assert gemms["kv_up"] == (512, 128 * (128 + 128) // 8)
    assert gemms["proj"] == (128 * 128 // 8, 7168)
    assert gemms["router"] == (7168, 256)
    assert gemms["experts_in"] == (7168, 2 * 2048 // 8) and gemms["shared_in"] == (7168, 512)
    experts = next(g for g in layer_gemms(shape, Parallel(tp=8, dp=8, ep=8)) if g.count > 1)
    assert experts.count == 256 // 8 and experts.tokens == 8 * 4096 * 8 / 256  # ep T k / E
