"""A GPT layer in sympy symbols, and what it weighs and costs: parameters, FLOPs (chapter 6).

The symbols of a model's shape (their own, apart from the glossary of
:mod:`ppbook.symbolic.symbols`: here ``s`` is the sequence length, not a stage index, and
``b`` the micro-batch size, not a target bubble):

========  ===========================================================================
``s``     sequence length (tokens per sample)
``b``     micro-batch size (samples per micro-batch)
``h``     hidden size
``a``     attention heads
``t``     tensor-parallel size (ranks a layer's matrices are split over)
``V``     vocabulary size
``L``     transformer layers
``w_ff``  MLP width over ``h`` (4 in GPT): the MLP is ``d_ff = w_ff h`` wide (named
          apart from the bubble fraction ``f``; ``f`` stays importable as an alias)
``e``     bytes per activation element (2 for 16-bit)
========  ===========================================================================

Parameters are counted from the layer's weights (:data:`WEIGHTS`): 12h^2 + 13h at
w_ff = 4, Megatron-LM's count (Narayanan et al. 2021, arXiv:2104.04473, sec. 5.1). FLOPs
are counted from its matrix multiplies (:data:`MATMULS`), 2 m k n each, with the
backward split as the Zero Bubble paper does (Qi et al. 2024, arXiv:2401.10241, Table 1):
``I`` computes the gradients of a multiply's activation inputs, ``W`` of its weight.
Element-wise work (softmax, GeLU, LayerNorm, dropout) is left out, as in both papers.
"""

from dataclasses import dataclass
from functools import cache

import sympy as sp

s, b, h, a, t, V, L, w_ff, e = sp.symbols("s b h a t V L w_ff e", integer=True, positive=True)
f = w_ff  # the name this symbol had before chapter 6 kept f for the bubble fraction

RECOMPUTE = ("none", "selective", "full")
"""Activation recomputation: none, selective (the attention's s^2 part), full (each layer)."""


def check_recompute(recompute: str) -> None:
    """A one-line ValueError unless ``recompute`` is one of :data:`RECOMPUTE`."""
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}, got {recompute!r:.60}")


@dataclass(frozen=True)
class Weight:
    """One parameter tensor of a layer: ``elements`` numbers, split over tensor-parallel
    ranks by column (``"column"``, its bias too), by row (``"row"``) or not at all."""

    name: str
    elements: sp.Expr
    split: str


WEIGHTS: tuple[Weight, ...] = (
    Weight("QKV weight", 3 * h * h, "column"),
    Weight("QKV bias", 3 * h, "column"),
    Weight("output projection weight", h * h, "row"),
    Weight("output projection bias", h, "replicated"),
    Weight("MLP first weight", w_ff * h * h, "column"),
    Weight("MLP first bias", w_ff * h, "column"),
    Weight("MLP second weight", w_ff * h * h, "row"),
    Weight("MLP second bias", h, "replicated"),
    Weight("LayerNorm 1 and 2 scales and shifts", 4 * h, "replicated"),
)
"""A GPT layer's parameters (Megatron-LM's tensor-parallel split: column then row)."""


@cache
def layer_parameters(tensor_parallel: bool = False) -> sp.Expr:
    """Parameters of one layer on one tensor-parallel rank: 12h^2 + 13h at w_ff = 4, t = 1."""
    total = sp.Integer(0)
    for w in WEIGHTS:
        total += w.elements / (t if tensor_parallel and w.split != "replicated" else 1)
    return sp.expand(total)


@cache
def model_parameters(tied_embeddings: bool = True, position_embeddings: bool = True) -> sp.Expr:
    """All parameters: L layers, word embeddings V h, learned positions s h, a final
    LayerNorm 2h, and an output head V h unless tied to the word embeddings."""
    embeddings = V * h + (s * h if position_embeddings else 0)
    head = 0 if tied_embeddings else V * h
    return sp.expand(L * layer_parameters() + embeddings + 2 * h + head)


@dataclass(frozen=True)
class Matmul:
    """One matrix multiply (m x k) @ (k x n) of a layer; ``weight`` when one side is a parameter."""

    name: str
    m: sp.Expr
    k: sp.Expr
    n: sp.Expr
    weight: bool


_TOKENS = b * s
MATMULS: tuple[Matmul, ...] = (
    Matmul("QKV", _TOKENS, h, 3 * h, True),
    Matmul("QK^T (b a of them)", a * b * s, h / a, s, False),
    Matmul("attention over V (b a of them)", a * b * s, s, h / a, False),
    Matmul("output projection", _TOKENS, h, h, True),
    Matmul("MLP first", _TOKENS, h, w_ff * h, True),
    Matmul("MLP second", _TOKENS, w_ff * h, h, True),
)
"""The multiplies of one layer: 2 m k n FLOPs forward (element-wise work is left out)."""


def layer_flops(tensor_parallel: bool = False, recompute: str = "none") -> dict[str, sp.Expr]:
    """FLOPs of one micro-batch through one layer: ``F``, ``I`` (input gradients), ``W``.

    ``I`` computes a gradient for each input of a multiply that is not a parameter (two
    for QK^T and attention over V, whose inputs are both activations), ``W`` one for each
    weight; each costs the forward's 2 m k n. Recomputation runs its forward again before
    the backward: all of ``F`` (``"full"``) or the two attention multiplies
    (``"selective"``), added to ``I``. Divided by ``t`` with tensor parallelism.
    """
    check_recompute(recompute)
    forward = sum(2 * x.m * x.k * x.n for x in MATMULS)
    inputs = sum(2 * x.m * x.k * x.n * (1 if x.weight else 2) for x in MATMULS)
    weights = sum(2 * x.m * x.k * x.n for x in MATMULS if x.weight)
    if recompute == "full":
        again = forward
    elif recompute == "selective":
        again = sum(2 * x.m * x.k * x.n for x in MATMULS if not x.weight)
    else:
        again = 0
    split = t if tensor_parallel else 1
    return {
        "F": sp.expand(forward / split),
        "I": sp.expand((inputs + again) / split),
        "W": sp.expand(weights / split),
    }


def logits_flops(tensor_parallel: bool = False) -> dict[str, sp.Expr]:
    """FLOPs of the output projection to the vocabulary, per pass: 2 b s h V each."""
    each = 2 * b * s * h * V / (t if tensor_parallel else 1)
    return {"F": each, "I": each, "W": each}


def embedding_parameters(
    tensor_parallel: bool = False, position_embeddings: bool = True
) -> sp.Expr:
    """The first stage's extra parameters: word embeddings V h (rows split over ``t``) and
    learned position embeddings s h (whole on every rank)."""
    return V * h / (t if tensor_parallel else 1) + (s * h if position_embeddings else 0)


def head_parameters(tensor_parallel: bool = False) -> sp.Expr:
    """The last stage's output head V h (rows split over ``t``): its own weights when
    untied, with tied embeddings a copy of the word embeddings (Megatron-LM, p > 1)."""
    return V * h / (t if tensor_parallel else 1)
