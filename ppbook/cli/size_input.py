"""What ``ppbook size`` reads (:mod:`ppbook.cli.size`): its numbers, each within a stated
range so that a hostile value is refused in one line before anything is computed, the
model from a card (``--model``) or from its flags, and the bytes each parameter keeps.
"""

from __future__ import annotations

import argparse
import math

from ppbook.cost_model.model_cards import MODEL_CARDS, model_card, read_hf_config
from ppbook.cost_model.model_shape import ModelShape
from ppbook.cost_model.search_costs import FIGURE_RANGE

COUNT_CAP = 10**9
"""The largest count a model or batch flag takes (layers, widths, heads, vocabulary,
sequence, batch, micro-batch, ...); --gpus, --gpus-per-node, --tp, --pp, --ep and --cp
stop at :data:`ppbook.cost_model.search_costs.MAX_GPUS`."""
DTYPE_BYTES = {"fp32": 4, "bf16": 2}
"""``--grad-dtype`` and ``--adam-moments``: bytes per element."""


def count(flag: str, minimum: int = 1, maximum: int = COUNT_CAP):
    """An argparse type: a whole number from ``minimum`` to ``maximum``, said in one line."""

    def parse(text: str) -> int:
        rule = f"a whole number from {minimum} to {maximum:,}"
        digits = text.strip().lstrip("+-")
        if not digits.isdigit() or len(digits) > 30:
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text[:40]!r}")
        value = int(text)
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"must be {rule}, got {value:,}")
        return value

    parse.__name__ = f"count for {flag}"
    return parse


def figure(flag: str, low: float = FIGURE_RANGE[0], high: float = FIGURE_RANGE[1]):
    """An argparse type: a finite number in [low, high], said in one line."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be a number from {low:g} to {high:g}, got {text[:40]!r}"
            )
        return value

    parse.__name__ = f"number for {flag}"
    return parse


MODEL_FLAGS = {
    "layers": "layers",
    "hidden": "hidden",
    "heads": "heads",
    "vocab": "vocab",
    "seq_len": "seq_len",
    "kv_heads": "kv_heads",
    "ffn_hidden": "ffn_hidden",
    "experts": "experts",
    "top_k": "experts_per_token",
}
"""Each model flag's ``ModelShape`` field."""
REQUIRED = ("layers", "hidden", "heads", "vocab", "seq_len")


def shape_of(args: argparse.Namespace) -> tuple[ModelShape, dict]:
    """The model's shape from ``--model`` and the flags that override it, and the card's
    memory choices (empty without a card)."""
    given = {field: getattr(args, flag) for flag, field in MODEL_FLAGS.items()}
    given = {k: v for k, v in given.items() if v is not None}
    if args.swiglu is not None:
        given["gated_mlp"] = args.swiglu
    if args.model is None:
        missing = [f"--{flag.replace('_', '-')}" for flag in REQUIRED if flag not in given]
        if missing:
            raise ValueError(
                "give --model or all of --layers --hidden --heads --vocab --seq-len "
                f"(missing {' '.join(missing)})"
            )
        if args.untied:
            given["tied_embeddings"] = False
        if args.no_position_embeddings:
            given["position_embeddings"] = False
        return ModelShape(**given), {}
    card = model_card(args.model) if args.model in MODEL_CARDS else read_hf_config(args.model)
    if args.untied:
        given["tied_embeddings"] = False
    if args.no_position_embeddings:
        given["position_embeddings"] = False
    return card.shape(**given), dict(card.memory_choices)


def layout_of(args: argparse.Namespace, choices: dict) -> dict:
    """The keyword arguments of :func:`~ppbook.cost_model.sizing_search.size` that say how
    each parameter's state is kept: the flags, else the card's choices, else Megatron's."""
    out = {
        "zero": args.zero if args.zero is not None else choices.get("zero", 0),
        "gradient_bytes": choices.get("gradient_bytes", 4),
        "master_bytes": choices.get("master_bytes", 4),
        "moment_bytes": choices.get("moment_bytes", 4),
        "recompute_norm": choices.get("recompute_norm", False),
        "recompute_mla_up": choices.get("recompute_mla_up", False),
        "fp8_activations": choices.get("fp8_activations", False),
        "recompute_swiglu": choices.get("recompute_swiglu", False),
    }
    if args.grad_dtype is not None:
        out["gradient_bytes"] = DTYPE_BYTES[args.grad_dtype]
    if args.adam_moments is not None:
        out["moment_bytes"] = DTYPE_BYTES[args.adam_moments]
    if args.recompute_norms is not None:
        out["recompute_norm"] = args.recompute_norms
    if args.recompute_mla_up is not None:
        out["recompute_mla_up"] = args.recompute_mla_up
    if args.fp8_activations is not None:
        out["fp8_activations"] = args.fp8_activations
    if args.recompute_swiglu is not None:
        out["recompute_swiglu"] = args.recompute_swiglu
    return out
