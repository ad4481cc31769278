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
