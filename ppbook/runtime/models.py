"""Example models for chapter 3, and how a model is cut into pipeline parts.

A model is a list of blocks (or an ``nn.Sequential``); :func:`split_blocks` cuts it into
consecutive parts, one per model part of the schedule (``p * v`` parts, or ``p`` for
DualPipe, whose two copies of each part live on two stages). Every example uses the
mean-squared-error loss against random targets, so the data needs no tokenizer.

- :func:`mlp`: ``num_blocks`` blocks of Linear (width ``hidden`` to ``4 * hidden``), Tanh,
  Linear (back to ``hidden``): the MLP of a transformer block, without the attention. The
  4x expansion gives much compute per activation sent between stages.
- :func:`transformer`: pre-norm transformer blocks (attention and an MLP, each with a
  residual connection), as in GPT-2 (Radford et al. 2019), on random embeddings.

Models, inputs and targets are made in ``RunConfig.dtype``: in bfloat16 (mixed precision,
:mod:`ppbook.runtime.precision`) the weights, the data and so every message between
stages are bf16. The data is drawn in float32 and rounded, so a bf16 run sees the float32
run's batch, rounded.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import torch
from torch import nn

from ppbook.runtime.config import MODELS, as_blocks, input_shape


def mlp(hidden: int, num_blocks: int) -> list[nn.Module]:
    """``num_blocks`` blocks: Linear(hidden, 4 hidden), Tanh, Linear(4 hidden, hidden)."""
    return [
        nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.Tanh(), nn.Linear(4 * hidden, hidden))
        for _ in range(num_blocks)
    ]


class Attention(nn.Module):
    """Causal multi-head self-attention, written out (no fused kernel) to be read."""

    def __init__(self, hidden: int, num_heads: int):
        super().__init__()
        if hidden % num_heads:
            raise ValueError(f"hidden ({hidden}) must be a multiple of num_heads ({num_heads})")
        self.num_heads = num_heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape  # (microbatch, seq, hidden)
        q, k, v = self.qkv(x).split(hidden, dim=-1)
        heads = [t.view(batch, seq, self.num_heads, -1).transpose(1, 2) for t in (q, k, v)]
        q, k, v = heads  # (microbatch, heads, seq, head_dim)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (microbatch, heads, seq, seq)
        causal = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(1)
        weights = scores.masked_fill(causal, float("-inf")).softmax(dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(batch, seq, hidden)
        return self.proj(out)


class TransformerBlock(nn.Module):
    """Pre-norm block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, hidden: int, num_heads: int = 2):
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden)
        self.attn = Attention(hidden, num_heads)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.act = nn.GELU()
        self.out = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.out(self.act(self.fc(self.ln2(x))))


def transformer(hidden: int, num_blocks: int, num_heads: int = 2) -> list[nn.Module]:
    """``num_blocks`` pre-norm transformer blocks of width ``hidden``."""
    return [TransformerBlock(hidden, num_heads) for _ in range(num_blocks)]


ROUNDINGS_PER_BLOCK = {"mlp": 3, "transformer": 12}
"""bf16 operations on the longest path through one block's forward, each rounding its
output: the MLP's Linear, Tanh, Linear; the transformer's LayerNorm, q/k/v, scores,
softmax, weights times values, projection, residual add, LayerNorm, Linear, GELU, Linear,
residual add (the scaling and the mask act on the scores, rounded once with them)."""


def rounding_depth(config, num_parts: int) -> int:
    """d: bf16 roundings on the longest path through ``config``'s model forward
    (:data:`ROUNDINGS_PER_BLOCK` per example block; one per leaf module of a model given as
    modules). :func:`ppbook.runtime.reference.mixed_tolerance` counts with it."""
    if isinstance(config.model, str):
        return ROUNDINGS_PER_BLOCK[config.model] * (config.num_blocks or num_parts)
    return sum(
        1 for block in as_blocks(config.model) for m in block.modules() if not list(m.children())
    )


def make_blocks(name: str, hidden: int, num_blocks: int, num_heads: int = 2) -> list[nn.Module]:
    """The example model ``name`` ("mlp" or "transformer") as a list of blocks."""
    if name == "mlp":
        return mlp(hidden, num_blocks)
    if name == "transformer":
        return transformer(hidden, num_blocks, num_heads)
    raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")


def part_bounds(num_blocks: int, num_parts: int) -> list[tuple[int, int]]:
    """Cut ``num_blocks`` blocks into ``num_parts`` consecutive ranges, sizes differing by <= 1.

    >>> part_bounds(5, 2)
    [(0, 3), (3, 5)]
    """
    if num_parts < 1 or num_blocks < num_parts:
        raise ValueError(
            f"cannot cut a model of {num_blocks} blocks into {num_parts} pipeline parts: "
            f"give the model at least {num_parts} blocks (one per part)"
        )
    size, extra = divmod(num_blocks, num_parts)
    bounds, start = [], 0
    for part in range(num_parts):
        stop = start + size + (1 if part < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def split_blocks(blocks: Sequence[nn.Module], num_parts: int) -> list[nn.Sequential]:
    """Cut ``blocks`` into ``num_parts`` consecutive ``nn.Sequential`` parts."""
    return [nn.Sequential(*blocks[a:b]) for a, b in part_bounds(len(blocks), num_parts)]


def global_name(bounds: Sequence[tuple[int, int]], part: int, local: str) -> str:
    """Parameter ``local`` of ``part`` (``"0.0.weight"``), named as in the whole model."""
    index, _, rest = local.partition(".")
    return f"{bounds[part][0] + int(index)}.{rest}"


def make_batch(
    input_shape: Sequence[int],
    target_shape: Sequence[int],
    num_microbatches: int,
    microbatch_size: int,
    dtype: torch.dtype,
    seed: int,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Random inputs and targets (shapes per sample), one of each per micro-batch.

    Seeded by ``seed`` alone, so every rank and the single-process reference make the same.
    A bf16 batch is drawn in float32 and rounded (the float32 batch of the same seed).
    """
    generator = torch.Generator().manual_seed(seed)
    batch = num_microbatches * microbatch_size
    drawn = torch.float32 if dtype == torch.bfloat16 else dtype
    inputs = torch.randn((batch, *input_shape), generator=generator, dtype=drawn).to(dtype)
    targets = torch.randn((batch, *target_shape), generator=generator, dtype=drawn).to(dtype)
    return list(inputs.chunk(num_microbatches)), list(targets.chunk(num_microbatches))


def build_blocks(config, num_parts: int) -> list[nn.Module]:
    """The blocks of ``config.model`` in ``config.dtype``, initialised from ``config.seed``.

    Example models get ``config.num_blocks`` blocks (default: one per part). The caller's
    random state is left as it was (``torch.random.fork_rng``, CPU only: no CUDA call).
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        if isinstance(config.model, str):
            blocks = make_blocks(
                config.model, config.hidden, config.num_blocks or num_parts, config.num_heads
            )
        else:
            blocks = copy.deepcopy(as_blocks(config.model))
    dtype = getattr(torch, config.dtype)
    return [block.to(dtype) for block in blocks]


def part_outputs(
    parts: Sequence[nn.Module], input_shape: Sequence[int], microbatch_size: int, dtype
) -> list[tuple[torch.dtype, tuple[int, ...]]]:
    """The dtype and shape of each part's output for one micro-batch (a dry run on zeros).

    These are the payloads of the messages between stages, and the last one is the shape
    of the targets.
    """
    out, layouts = torch.zeros((microbatch_size, *input_shape), dtype=dtype), []
    with torch.no_grad():
        for part in parts:
            out = part(out)
            layouts.append((out.dtype, tuple(out.shape)))
    return layouts


def step_data(config, parts: Sequence[nn.Module]):
    """``(inputs, targets, layouts)`` of one step of ``config``: the micro-batches every rank
    and the one-process reference use, and each part's output layout: for an example model
    the input's (each of its blocks maps ``(b, ..., hidden)`` to the same shape; no dry run
    of a large model on the CPU), else :func:`part_outputs`'s."""
    dtype = getattr(torch, config.dtype)
    shape = input_shape(config)
    if isinstance(config.model, str):  # an example's blocks keep their input's shape
        layouts = [(dtype, (config.microbatch_size, *shape))] * len(parts)
    else:
        layouts = part_outputs(parts, shape, config.microbatch_size, dtype)
    inputs, targets = make_batch(
        shape,
        layouts[-1][1][1:],
        config.num_microbatches,
        config.microbatch_size,
        dtype,
        config.seed + 1,
    )
    return inputs, targets, layouts
