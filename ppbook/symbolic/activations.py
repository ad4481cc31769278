"""What one transformer layer keeps for its backward, counted with sympy (chapter 6).

Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
arXiv:2205.05198, sec. 4 and Table 2) estimate a GPT layer's activations by listing the
tensors its backward needs. This module writes that list down (:data:`SAVED`, one
:class:`Saved` record per tensor) and lets sympy add it up, so the paper's
sbh(34 + 5as/h) bytes and its tensor-parallel, sequence-parallel and recomputation
variants come out of the count (:func:`layer_activation_bytes`) instead of being typed in.
The layer is GPT's: LayerNorm, a QKV linear, attention (softmax, dropout), an output
projection, dropout, residual; LayerNorm, an MLP of width ``w_ff h`` with GeLU, dropout,
residual. Activations take ``e`` bytes an element (2 for 16-bit), dropout masks 1 byte,
the logits before the loss 4 (32-bit), as in the paper.

Tensor parallelism over ``t`` ranks splits the attention heads and the MLP's width; the
LayerNorms, the dropouts after attention and MLP, and the inputs of the first linears
stay whole on every rank (the "replicated" region) unless sequence parallelism splits
them along the sequence. Selective recomputation drops the attention's s^2 tensors and
recomputes them; full recomputation keeps only each layer's input.

:func:`activation_formulas` gathers these counts, and the parameters and FLOPs per pass
of :mod:`.transformer`, as :class:`ShapeFormula` records (derived with sympy, checked
calls). The sources' own forms are kept apart (:func:`published_forms`) for the tests
and chapters to compare with. Symbols: :mod:`.transformer` (``s`` sequence length,
``b`` micro-batch size, ``h``, ``a``, ``t``, ``V``, ``L``, ``w_ff``, ``e``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from types import MappingProxyType

import sympy as sp

from ppbook.checks import as_count
from ppbook.symbolic.record import DERIVED, Formula
from ppbook.symbolic.transformer import (
    L,
    V,
    a,
    b,
    check_recompute,
    e,
    h,
    layer_flops,
    layer_parameters,
    model_parameters,
    s,
    t,
    w_ff,
)

_KORTHIKANTI = "Korthikanti et al. 2022, arXiv:2205.05198"
_MEGATRON = "Megatron-LM, Narayanan et al. 2021, arXiv:2104.04473, sec. 5.1"
_ZB = "Zero Bubble, Qi et al. 2024, arXiv:2401.10241, Table 1"


@dataclass(frozen=True)
class Saved:
    """One tensor a layer keeps for its backward: ``elements`` of ``bytes_each`` bytes.

    ``region`` is ``"replicated"`` (whole on every tensor-parallel rank) or ``"sharded"``
    (split over the ``t`` ranks); ``core_attention`` marks the s^2 tensors that selective
    recomputation recomputes instead of keeping.
    """

    name: str
    block: str
    elements: sp.Expr
    bytes_each: sp.Expr
    region: str
    core_attention: bool = False


SAVED: tuple[Saved, ...] = (
    Saved("LayerNorm 1 input (the layer's input)", "layer norm", s * b * h, e, "replicated"),
    Saved("QKV linear input", "attention", s * b * h, e, "replicated"),
    Saved("Q and K, inputs of QK^T", "attention", 2 * s * b * h, e, "sharded"),
    Saved("softmax output", "attention", a * s**2 * b, e, "sharded", True),
    Saved("softmax dropout mask", "attention", a * s**2 * b, 1, "sharded", True),
    Saved(
        "dropout output, input of attention over V", "attention", a * s**2 * b, e, "sharded", True
    ),
    Saved("V, input of attention over V", "attention", s * b * h, e, "sharded"),
    Saved("output projection input", "attention", s * b * h, e, "sharded"),
    Saved("attention dropout mask", "attention", s * b * h, 1, "replicated"),
    Saved("LayerNorm 2 input", "layer norm", s * b * h, e, "replicated"),
    Saved("MLP first linear input", "mlp", s * b * h, e, "replicated"),
    Saved("GeLU input", "mlp", w_ff * s * b * h, e, "sharded"),
    Saved("MLP second linear input", "mlp", w_ff * s * b * h, e, "sharded"),
    Saved("MLP dropout mask", "mlp", s * b * h, 1, "replicated"),
)
"""The tensors one layer keeps for its backward, in forward order (Korthikanti sec. 4.1)."""


def _check_parallel(tensor_parallel: bool, sequence_parallel: bool, recompute: str) -> None:
    check_recompute(recompute)
    if sequence_parallel and not tensor_parallel:
        raise ValueError(
            "sequence parallelism splits the tensor-parallel group: give tensor_parallel"
        )


@cache
def layer_activation_bytes(
    tensor_parallel: bool = False, sequence_parallel: bool = False, recompute: str = "none"
) -> sp.Expr:
    """Bytes one layer keeps per micro-batch on one tensor-parallel rank, summed from :data:`SAVED`.

    Sharded tensors divide by ``t`` with tensor parallelism, replicated ones only with
    sequence parallelism too; ``"selective"`` drops the core-attention tensors;
    ``"full"`` keeps only the layer's input, ``e s b h`` (Table 2's 2sbh; divided by ``t``
    with sequence parallelism, where the input between layers is already split along the
    sequence).
    """
    _check_parallel(tensor_parallel, sequence_parallel, recompute)
    kept = SAVED[:1] if recompute == "full" else SAVED
    if recompute == "selective":
        kept = tuple(x for x in SAVED if not x.core_attention)
    total = sp.Integer(0)
    for x in kept:
        split = sequence_parallel or (tensor_parallel and x.region == "sharded")
        total += x.elements * x.bytes_each / (t if split else 1)
    return sp.factor(total)


def embedding_activation_bytes(sequence_parallel: bool = False) -> sp.Expr:
    """The first stage's extra per micro-batch: the embedding dropout's 1-byte mask (sec. 4.3)."""
    return s * b * h / (t if sequence_parallel else 1)


def output_activation_bytes(sequence_parallel: bool = False) -> sp.Expr:
    """The last stage's extra per micro-batch (sec. 4.3): the final LayerNorm's input, the
    output projection's input, and the 32-bit logits the loss needs (vocabulary split over
    ``t``; put t = 1 without tensor parallelism)."""
    replicated = 2 * e * s * b * h / (t if sequence_parallel else 1)
    return replicated + 4 * s * b * V / t


@cache
def published_forms() -> MappingProxyType[str, sp.Expr]:
    """The sources' own forms, typed in as printed, for the tests and chapters to compare with.

    Korthikanti et al. Table 2 (activation bytes per layer, 16-bit, w_ff = 4): no
    parallelism, tensor parallel, tensor + sequence parallel, tensor parallel with
    selective recomputation, tensor + sequence parallel with selective recomputation,
    full recomputation; sec. 4.3's output-layer extra 4sbh/t (1 + V/h); the Zero Bubble
    paper's Table 1 (FLOPs per layer and pass, its B is ``I``); Megatron-LM's parameter
    count 12 L h^2 (1 + 13/(12h) + (V + s)/(12 L h)) (tied embeddings, no final LayerNorm).
    """
    forms = {
        "activations": s * b * h * (34 + 5 * a * s / h),
        "activations_tp": s * b * h * (10 + 24 / t + 5 * a * s / (h * t)),
        "activations_tp_sp": s * b * h * (34 / t + 5 * a * s / (h * t)),
        "activations_tp_selective": s * b * h * (10 + 24 / t),
        "activations_tp_sp_selective": 34 * s * b * h / t,
        "activations_full": 2 * s * b * h,
        "output_layer_sp": 4 * s * b * h / t * (1 + V / h),
        "flops_F": s * b * h * (24 * h + 4 * s),
        "flops_B": s * b * h * (24 * h + 8 * s),
        "flops_W": s * b * h * 24 * h,
        "parameters": 12 * L * h**2 * (1 + sp.Rational(13, 12) / h + (V + s) / (12 * L * h)),
    }
    return MappingProxyType(forms)


_LABELS = {
    s: "seq_len s",
    b: "microbatch_size b",
    h: "hidden h",
    a: "heads a",
    t: "tensor-parallel size t",
    V: "vocab V",
    L: "layers L",
    w_ff: "MLP width over hidden w_ff",
    e: "bytes per activation element e",
}
_T_DIVIDES_A = (sp.Eq(sp.Mod(a, t), 0), "t dividing a (whole heads on each rank)")
_T_DIVIDES_S = (sp.Eq(sp.Mod(s, t), 0), "t dividing s (sequence parallelism splits s)")


class ShapeFormula(Formula):
    """A :class:`~ppbook.symbolic.record.Formula` in a model's shape: every argument is a
    count (an integer >= 1), checked by :func:`ppbook.checks.as_count`, then ``requires``."""

    def __call__(self, *values, **named):
        names = [x.name for x in self.args]
        given = dict(zip(names, values, strict=False)) | named
        twice = set(named) & set(names[: len(values)])
        if len(values) > len(names) or twice or sorted(given) != sorted(names):
            raise TypeError(f"{self.name} takes {names} once each, got {sorted(given)}")
        at = {x: as_count(given[x.name], _LABELS[x], self.name) for x in self.args}
        for condition, words in self.requires:
            if not bool(condition.subs(at)):
                got = ", ".join(
                    f"{x.name} = {at[x]}" for x in self.args if x in condition.free_symbols
                )
                raise ValueError(f"{self.name} needs {words}, got {got}")
        return self.function(*(at[x] for x in self.args))


def _record(name, expr, meaning, conditions, source, requires=()) -> ShapeFormula:
    order = (s, b, h, a, t, V, L, w_ff, e)
    args = tuple(x for x in order if x in expr.free_symbols)
    checked = tuple(r for r in requires if r[0].free_symbols <= set(args))
    return ShapeFormula(name, expr, args, meaning, conditions, source, DERIVED, checked)


_PAPER = "16-bit activations (e = 2), 1-byte dropout masks, MLP width 4h"
_VARIANTS = {  # name: (tensor_parallel, sequence_parallel, recompute, where in the paper)
    "layer_activation_bytes": (False, False, "none", "sec. 4.1"),
    "layer_activation_bytes_tp": (True, False, "none", "Table 2"),
    "layer_activation_bytes_tp_sp": (True, True, "none", "Table 2"),
    "layer_activation_bytes_tp_selective": (True, False, "selective", "Table 2"),
    "layer_activation_bytes_tp_sp_selective": (True, True, "selective", "Table 2"),
    "layer_activation_bytes_full": (False, False, "full", "Table 2"),
}


@cache
def activation_formulas() -> MappingProxyType[str, ShapeFormula]:
    """Chapter 6's counts by name, each a :class:`ShapeFormula` derived with sympy.

    Activation bytes per layer and micro-batch on one rank (at e = 2 and w_ff = 4; the
    ``_general`` entry keeps both symbols), the last stage's extra bytes, parameters and
    FLOPs per pass. All are counted from :data:`SAVED` and :mod:`.transformer`'s
    ``WEIGHTS`` and ``MATMULS``; the tests check each against :func:`published_forms`
    and the activations against PyTorch's saved tensors.
    """
    paper = {e: 2, w_ff: 4}
    per_layer = "bytes one layer keeps per micro-batch on one rank"
    scores = "; attention materialises its s x s scores"
    entries = [
        _record(
            "layer_activation_bytes_general",
            layer_activation_bytes(),
            per_layer,
            "1-byte dropout masks" + scores,
            f"{_KORTHIKANTI}, sec. 4.1",
        )
    ]
    for name, (tp, sp_, recompute, where) in _VARIANTS.items():
        expr = sp.factor(layer_activation_bytes(tp, sp_, recompute).subs(paper))
        requires = ((_T_DIVIDES_A,) if tp else ()) + ((_T_DIVIDES_S,) if sp_ else ())
        source = f"{_KORTHIKANTI}, {where}"
        entries.append(_record(name, expr, per_layer, _PAPER + scores, source, requires))
    entries += [
        _record(
            "output_activation_bytes_sp",
            sp.factor(output_activation_bytes(True).subs(paper)),
            "bytes the last stage adds per micro-batch: final LayerNorm, output layer, logits",
            _PAPER + "; 32-bit logits; sequence parallelism",
            f"{_KORTHIKANTI}, sec. 4.3",
            (_T_DIVIDES_S,),
        ),
        _record(
            "layer_parameters",
            layer_parameters().subs(w_ff, 4),
            "parameters of one layer",
            "MLP width 4h",
            _MEGATRON,
        ),
        _record(
            "model_parameters",
            model_parameters().subs(w_ff, 4),
            "parameters of the model: tied embeddings, learned positions, final LayerNorm",
            "MLP width 4h",
            _MEGATRON,
        ),
    ]
    for kind, expr in layer_flops().items():
        entries.append(
            _record(
                f"layer_flops_{kind}",
                sp.factor(expr.subs(w_ff, 4)),
                f"FLOPs of one micro-batch's {kind} pass through one layer",
                "matrix multiplies only, MLP width 4h; I is the paper's B",
                _ZB,
            )
        )
    return MappingProxyType({x.name: x for x in entries})
