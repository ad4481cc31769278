"""DeepSeek-V3's activation choices against PyTorch's saved tensors (issue 18, item 2).

The DeepSeek-V3 report (arXiv:2412.19437, sec. 3.3.1 and 3.3.3) caches the inputs of its
linear layers in FP8 (1 x 128 tiles, one scale each, sec. 3.3.2), the inputs of the linear
layer after attention in E5M6, and the MoE SwiGLU's inputs in FP8, recomputing its output
in the backward. Small layers built here keep exactly that, through custom autograd
Functions (torch.float8_e4m3fn on CPU; E5M6 as the top 12 bits of a float16, two elements
in 3 bytes), and ``saved_tensors_hooks`` counts what they keep, storage by storage, against
:func:`ppbook.cost_model.activation_bytes.layer_activation_terms` with
``fp8_activations`` and ``recompute_swiglu``.

The router's weights multiply inside the experts' SwiGLU, as Megatron-Core's
``WeightedSwiGLUFunction`` does: its backward takes the weight's gradient from the
recomputed SwiGLU output and the down projection's input gradient, so no expert output is
kept; the gradients equal those of the usual layer (weights applied to the experts'
outputs at the combine).
"""

import dataclasses
import math

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from ppbook.cost_model.activation_bytes import FP8_TILE, layer_activation_terms  # noqa: E402
from ppbook.cost_model.model_shape import ModelShape, Parallel  # noqa: E402

FP8 = torch.float8_e4m3fn
TOKENS = 16  # one micro-batch of one 16-token sample
SHAPE = ModelShape(
    2, 16, 4, 32, TOKENS, gated_mlp=True, ffn_hidden=24, experts=4, experts_per_token=2,
    moe_ffn_hidden=12, norm="rmsnorm", linear_bias=False, position_embeddings=False,
    tied_embeddings=False, dropout=False,
)  # fmt: skip


def terms(shape=SHAPE, moe=True, **choices):
    parallel = Parallel(attention="flash", **choices)
    return layer_activation_terms(shape, parallel, moe=moe)


def _tiles(x, width):
    """``x`` (rows, width) as (rows, tiles, 128) in fp32, zero-padded."""
    tiles = math.ceil(width / FP8_TILE)
    return F.pad(x.float(), (0, tiles * FP8_TILE - width)).view(len(x), tiles, FP8_TILE)


def quantise(x, fmt):
    """``x`` (rows, width) in ``fmt`` ("fp8": e4m3; "e5m6": 12 bits, two in 3 bytes) with a
    power-of-two fp32 scale per 1 x 128 tile (the report's round scales)."""
    rows, width = x.shape
    tiles = _tiles(x, width)
    top = 448.0 if fmt == "fp8" else 2.0**15
    amax = tiles.abs().amax(-1).clamp_min(1e-30)
    scale = torch.exp2(torch.ceil(torch.log2(amax / top)))  # (rows, tiles)
    scaled = (tiles / scale[..., None]).view(rows, -1)[:, :width]
    if fmt == "fp8":
        return scaled.to(FP8).contiguous(), scale
    bits = scaled.to(torch.float16).view(torch.int16).to(torch.int32) & 0xFFFF
    v = (bits >> 4).view(rows, width // 2, 2)  # sign, 5 exponent bits, 6 mantissa bits
    lo, hi = v[..., 0], v[..., 1]
    packed = torch.stack([lo & 0xFF, (lo >> 8) | ((hi & 0xF) << 4), hi >> 4], dim=-1)
    return packed.to(torch.uint8).reshape(rows, -1).contiguous(), scale


def dequantise(q, scale, fmt, width, dtype):
    if fmt == "fp8":
        values = q.float()
    else:
        b = q.view(len(q), width // 2, 3).to(torch.int32)
        lo = b[..., 0] | ((b[..., 1] & 0xF) << 8)
        hi = (b[..., 1] >> 4) | (b[..., 2] << 4)
        bits = torch.stack([lo, hi], dim=-1).view(len(q), width) << 4
        values = torch.where(bits >= 1 << 15, bits - (1 << 16), bits).to(torch.int16)
        values = values.view(torch.float16).float()
    return (_tiles(values, width) * scale[..., None]).view(len(q), -1)[:, :width].to(dtype)


class CachedLinear(torch.autograd.Function):
    """``x @ w.T`` keeping ``x`` for the weight gradient in ``fmt`` (fp8 or e5m6)."""

    @staticmethod
    def forward(ctx, x, weight, fmt):
        ctx.save_for_backward(*quantise(x, fmt), weight)
        ctx.fmt, ctx.width, ctx.dtype = fmt, x.shape[1], x.dtype
        return x @ weight.T

    @staticmethod
    def backward(ctx, grad):
        q, scale, weight = ctx.saved_tensors
        x = dequantise(q, scale, ctx.fmt, ctx.width, ctx.dtype)
        return grad @ weight, grad.T @ x, None


def swiglu(gate_up):
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


class Expert(torch.autograd.Function):
    """One expert (or a shared expert, or a dense MLP): ``w2 (p silu(g) * u)`` with
    ``[g, u] = w1 x`` and router weights ``p`` (None: 1). Keeps ``x`` (FP8 with ``fp8``),
    the SwiGLU's input (FP8 with ``fp8_act``), ``p``, and unless ``recompute`` the down
    projection's input."""

    @staticmethod
    def forward(ctx, x, p, w1, w2, fp8, fp8_act, recompute):
        gate_up = x @ w1.T  # (rows, 2 f)
        down_in = swiglu(gate_up) if p is None else swiglu(gate_up) * p[:, None].to(x.dtype)
        keep = [*(quantise(x, "fp8") if fp8 else (x, None))]
        keep += quantise(gate_up, "fp8") if fp8_act else (gate_up, None)
        keep += [None, None] if recompute else quantise(down_in, "fp8") if fp8 else (down_in, None)
        ctx.save_for_backward(*keep, p, w1, w2)
        ctx.dtype = x.dtype
        return down_in @ w2.T

    @staticmethod
    def backward(ctx, grad):
        x, xs, gu, gus, down, downs, p, w1, w2 = ctx.saved_tensors

        def load(t, scale):
            return t if scale is None else dequantise(t, scale, "fp8", t.shape[1], ctx.dtype)

        x, gate_up = load(x, xs), load(gu, gus)
        h = swiglu(gate_up)  # recomputed (the weight's gradient needs it either way)
        down_in = (
            load(down, downs)
            if down is not None
            else h
            if p is None
            else h * p[:, None].to(h.dtype)
        )
        grad_down_in = grad @ w2  # the down projection's input gradient
        grad_p = None if p is None else (grad_down_in.float() * h.float()).sum(-1)
        grad_h = grad_down_in if p is None else grad_down_in * p[:, None].to(ctx.dtype)
        with torch.enable_grad():
            leaf = gate_up.detach().requires_grad_()
            (grad_gate_up,) = torch.autograd.grad(swiglu(leaf), leaf, grad_h)
        return grad_gate_up @ w1, grad_p, grad_gate_up.T @ x, grad.T @ down_in, None, None, None


class Moe(torch.nn.Module):
    """Router (fp32 softmax, top-k), k copies per token sorted by expert, SwiGLU experts,
    combine. ``recompute``: weights applied in the experts, an unweighted combine (index_put);
    otherwise the copies go back in token order and are weighted at the combine."""

    def __init__(self, shape, dtype, fp8, recompute):
        super().__init__()
        h, f = shape.hidden, shape.moe_ffn_size
        self.k, self.fp8, self.recompute = shape.experts_per_token, fp8, recompute
        self.router = torch.nn.Linear(h, shape.experts, bias=False, dtype=dtype)
        self.w1 = torch.nn.ParameterList(
            torch.nn.Parameter(torch.randn(2 * f, h, dtype=dtype) / h**0.5)
            for _ in range(shape.experts)
        )
        self.w2 = torch.nn.ParameterList(
            torch.nn.Parameter(torch.randn(h, f, dtype=dtype) / f**0.5)
            for _ in range(shape.experts)
        )

    def forward(self, xn):  # (T, h): the norm's output, recomputed with recompute_norm
        probs = torch.softmax(self.router(xn).float(), dim=-1)  # (T, E) fp32, kept
        weights, chosen = probs.topk(self.k, dim=-1)  # keeps the int64 indices
        order = chosen.flatten().argsort(stable=True)
        token_of = order // self.k  # kept by the gather and the index_add
        routed = xn[token_of]  # (T k, h) the dispatched copies
        p = weights.flatten()[order] if self.recompute else None  # keeps order
        counts = torch.bincount(chosen.flatten(), minlength=len(self.w1)).tolist()
        outs, start = [], 0
        for w1, w2, n in zip(self.w1, self.w2, counts, strict=True):
            part = None if p is None else p[start : start + n]
            args = (part, w1, w2, self.fp8, self.fp8, self.recompute)
            outs.append(Expert.apply(routed[start : start + n], *args))
            start += n
        y = torch.cat(outs)  # (T k, h)
        if self.recompute:
            return torch.zeros_like(xn).index_put(
                (token_of,), y, accumulate=True
            )  # keeps the index
        back = y[order.argsort()].view(-1, self.k, xn.shape[-1])  # keeps the inverse order
        return (back * weights.to(xn.dtype)[..., None]).sum(dim=1)  # keeps outputs, weights


def kept(fn, *params):
    """What autograd keeps while ``fn()`` runs, storage by storage (shape, dtype, bytes),
    the parameters left out; then the backward runs on it."""
    skip = {p.untyped_storage().data_ptr() for p in params}
    seen = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in skip:
            seen.setdefault(t.untyped_storage().data_ptr(), (t.shape, t.dtype, t.untyped_storage()))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    out.float().square().sum().backward()
    return [(tuple(s), d, st.nbytes()) for s, d, st in seen.values()]


def moe_run(dtype, fp8, recompute, seed=0):
    torch.manual_seed(seed)
    moe = Moe(SHAPE, dtype, fp8, recompute)
    xn = torch.randn(TOKENS, SHAPE.hidden, dtype=dtype, requires_grad=True)
    storages = kept(lambda: moe(xn), xn, *moe.parameters())
    return storages, xn.grad, [q.grad for q in moe.parameters()]


@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("recompute", [False, True])
def test_moe_block_keeps_the_count(fp8, recompute):
    storages, _, _ = moe_run(torch.bfloat16, fp8, recompute)
    counted = terms(fp8_activations=fp8, recompute_swiglu=recompute)
    moe = ("router", "routing_indices", "dispatched_tokens", "expert_hidden")
    moe += ("expert_weights",) if recompute else ("expert_outputs",)
    assert sum(n for *_, n in storages) == sum(counted[k] for k in moe)
    # the experts' outputs, (T, k, h) in token order, kept only by a weighted combine
    outputs = [s for s, _, _ in storages if s == (TOKENS, SHAPE.experts_per_token, SHAPE.hidden)]
    assert len(outputs) == (0 if recompute else 1)
    f = SHAPE.moe_ffn_size  # (copies, f): the down projections' inputs, not kept if recomputed
    assert bool([s for s, _, _ in storages if s[-1] == f]) != recompute


def test_fp8_copies_and_scales_are_the_counted_bytes():
    storages, _, _ = moe_run(torch.bfloat16, True, True)
    copies = TOKENS * SHAPE.experts_per_token
    fp8 = sum(n for _, d, n in storages if d == FP8)
    scales = sum(n for s, d, n in storages if d == torch.float32 and len(s) == 2)
    # each copy: h bytes and 2f bytes (gate and up), a 4-byte scale per 128-element tile
    assert fp8 == copies * (SHAPE.hidden + 2 * SHAPE.moe_ffn_size)
    assert scales == 4 * TOKENS * SHAPE.experts + 4 * copies * 2  # router probs; 1 tile each
    counted = terms(fp8_activations=True, recompute_swiglu=True)
    assert counted["dispatched_tokens"] == copies * (SHAPE.hidden + 4)
    assert counted["expert_weights"] == 4 * copies  # one fp32 weight a copy


def test_weights_inside_the_swiglu_give_the_usual_gradients():
    # the weight's gradient (W_down^T dy) . h from the recomputed h, without expert outputs
    _, x_usual, p_usual = moe_run(torch.float32, False, False, seed=1)
    _, x_inside, p_inside = moe_run(torch.float32, False, True, seed=1)
    torch.testing.assert_close(x_inside, x_usual)
    for a, b in zip(p_inside, p_usual, strict=True):
        torch.testing.assert_close(a, b)


def test_fp8_caching_keeps_the_gradients_close():
    _, x_exact, p_exact = moe_run(torch.float32, False, True, seed=2)
    _, x_fp8, p_fp8 = moe_run(torch.float32, True, True, seed=2)
    for a, b in zip([x_fp8, *p_fp8], [x_exact, *p_exact], strict=True):
        assert (a - b).norm() <= 0.1 * b.norm()  # e4m3: 3 mantissa bits, tile scales


@pytest.mark.parametrize("fmt", ["fp8", "e5m6"])
def test_attention_output_projection_keeps_e5m6(fmt):
    torch.manual_seed(3)
    width = SHAPE.heads * SHAPE.v_head_size
    ctx = torch.randn(TOKENS, width, requires_grad=True)
    weight = torch.nn.Parameter(torch.randn(SHAPE.hidden, width))
    storages = kept(lambda: CachedLinear.apply(ctx, weight, fmt), weight)
    size = 1 if fmt == "fp8" else 1.5
    assert sum(n for *_, n in storages) == TOKENS * (size * width + 4)  # one tile a row
    assert terms(fp8_activations=True)["attention_output"] == TOKENS * (1.5 * width + 4)
    exact = torch.autograd.grad((ctx @ weight.T).square().sum(), weight)[0]
    error = (weight.grad - exact).norm() / exact.norm()
    assert error < (0.05 if fmt == "fp8" else 0.01)  # 6 mantissa bits beat e4m3's 3


@pytest.mark.parametrize("recompute", [False, True])
def test_shared_expert_and_dense_mlp_keep_the_count(recompute):
    torch.manual_seed(4)
    shape = dataclasses.replace(SHAPE, shared_experts=1)
    h, f, dense_f = shape.hidden, shape.moe_ffn_size, shape.ffn_size
    xn = torch.randn(TOKENS, h, dtype=torch.bfloat16, requires_grad=True)
    counted = terms(shape, fp8_activations=True, recompute_swiglu=recompute)
    dense = terms(shape, moe=False, fp8_activations=True, recompute_swiglu=recompute)
    for width, fp8_act, recomputed, expected in (
        (f, True, recompute, counted["shared_expert_hidden"]),  # MoE layer: SwiGLU in FP8
        (dense_f, False, False, dense["mlp_hidden"]),  # dense layer: SwiGLU's input in e
    ):
        w1 = torch.nn.Parameter(torch.randn(2 * width, h, dtype=torch.bfloat16))
        w2 = torch.nn.Parameter(torch.randn(h, width, dtype=torch.bfloat16))
        args = (None, w1, w2, True, fp8_act, recomputed)
        storages = kept(lambda: Expert.apply(xn, *args), w1, w2)  # noqa: B023
        # the input's FP8 copy and its scales belong to the norm's output (norm_outputs)
        own = [n for s, d, n in storages if not (d == FP8 and s == (TOKENS, h))]
        assert sum(own) - 4 * TOKENS * math.ceil(h / FP8_TILE) == expected


def test_mla_up_projections_keep_their_inputs_in_fp8():
    # without recompute_norm, the up-projections keep the latents' norm outputs: in FP8
    shape = ModelShape(
        1, 16, 4, 32, TOKENS, head_dim=4, q_lora_rank=6, kv_lora_rank=5,
        qk_rope_head_dim=2, v_head_dim=6, dropout=False, norm="rmsnorm", linear_bias=False,
    )  # fmt: skip
    torch.manual_seed(5)
    total = 0
    for rank, up in ((6, 4 * (4 + 2)), (5, 4 * (4 + 6))):  # q_b; kv_b (keys and values)
        latent = torch.randn(TOKENS, rank, requires_grad=True)
        weight = torch.nn.Parameter(torch.randn(up, rank))
        storages = kept(lambda: CachedLinear.apply(latent, weight, "fp8"), weight)  # noqa: B023
        total += sum(n for *_, n in storages)
    counted = terms(shape, moe=False, fp8_activations=True)
    assert total == counted["mla_latent_norm_outputs"] == TOKENS * (6 + 4 + 5 + 4)


@pytest.mark.parametrize("name", ["fp8_activations", "recompute_swiglu"])
def test_the_choices_are_flags(name):
    with pytest.raises(ValueError, match=f"Parallel needs {name} to be True or False, got 1"):
        Parallel(**{name: 1})
