"""``ppbook layer``: one transformer layer's pass times from the GPU model
(:mod:`ppbook.cost_model.layer_time`).

Prints ``F``, ``B``, ``I`` and ``W`` of one micro-batch through one layer on one
tensor-parallel rank, in seconds, with what each pass spends on matrix multiplies,
attention and element-wise work, and the layer's FLOPs as :mod:`ppbook.cost_model.flops`
counts them (attention counted in full, as if not causal; flash attention's backward with
its recomputation, 2.5 times its forward); with ``--json`` one object with keys ``F``,
``B``, ``I``, ``W`` (seconds), ``flops`` (its ``F``, ``I``, ``W``, ``B``), ``parts`` and
the inputs. The default block is the one timed on the H200: pre-norm GPT, causal flash
attention, a 4h GELU MLP, bf16, on the default GPU type h200, without dropout;
``--attention standard`` times Megatron-LM's block, which drops out unless
``--no-dropout`` (:data:`ppbook.cost_model.layer_time.DROPOUT_DEFAULT`). ``--model``
times a layer of a model card (:mod:`ppbook.cost_model.model_cards`: GQA, SwiGLU, MoE,
MLA) instead: an MoE layer of an MoE model unless ``--dense-layer``; its times are the
same GPU model applied to its matrices, not measured. Bad input ends with a one-line error
and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os

from ppbook.cost_model.flops import layer_flops
from ppbook.cost_model.gpu_cards import GPU_TYPES, gpu_card
from ppbook.cost_model.layer_time import ATTENTION, Device, dropout_of, layer_parts, layer_times
from ppbook.cost_model.model_cards import MODEL_CARDS, model_card, read_hf_config
from ppbook.cost_model.model_shape import RECOMPUTE, ModelShape, Parallel

DEFAULT_GPU = "h200"
"""``ppbook layer``'s default card: the GPU the model was calibrated on."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``ppbook layer`` on ``subparsers``."""
    parser = subparsers.add_parser(
        "layer",
        help="one transformer layer's F, B, I, W in seconds, from the GPU model",
        description=(
            "One pre-norm GPT layer (LayerNorm, multi-head attention, LayerNorm, 4h GELU "
            "MLP) in bf16: F, B = I + W, I (input gradient) and W (weight gradient) of one "
            "micro-batch on one tensor-parallel rank, in seconds "
            "(ppbook.cost_model.layer_time: GEMMs "
            "at an efficiency growing with their shapes, attention, element-wise work on "
            "the card's peak and HBM bandwidth; calibrated on an H200)."
        ),
    )
    parser.add_argument(
        "--model",
        metavar="NAME|PATH",
        help=f"a model card ({', '.join(MODEL_CARDS)}) or a Hugging Face config.json: time "
        "one of its layers (then leave out --hidden and --heads; --seq-len overrides the "
        "card's training sequence length)",
    )
    for flag, text in (
        ("--hidden", "hidden size h (without --model)"),
        ("--heads", "attention heads a (without --model)"),
        ("--seq-len", "sequence length s (default with --model: the card's)"),
    ):
        parser.add_argument(flag, type=int, help=text)
    parser.add_argument(
        "--microbatch-size", type=int, required=True, help="micro-batch size b (sequences)"
    )
    parser.add_argument(
        "--dense-layer",
        action="store_true",
        help="with an MoE --model: time one of its dense first layers, not an MoE layer",
    )
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel size (default 1)")
    parser.add_argument(
        "--ep",
        type=int,
        default=1,
        help="expert-parallel size (default 1): each rank holds experts/ep experts and "
        "multiplies ep times the rows for each",
    )
    parser.add_argument(
        "--cp", type=int, default=1, help="context-parallel size (default 1): b s / cp tokens"
    )
    parser.add_argument(
        "--gpu-type", choices=GPU_TYPES, default=DEFAULT_GPU, help="default %(default)s"
    )
    parser.add_argument(
        "--attention",
        choices=ATTENTION,
        default="flash",
        help="causal flash attention, or standard attention that writes its s x s scores "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--recompute", choices=RECOMPUTE, default="none", help="added to I (default none)"
    )
    parser.add_argument("--sequence-parallel", action="store_true", help="with --tp")
    parser.add_argument(
        "--dropout",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="dropout as Megatron-LM's GPT (default: on with --attention standard, off with flash)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)
    return parser


def _shape(args: argparse.Namespace) -> ModelShape:
    """The layer's shape: ``--model``'s card, or ``--hidden --heads --seq-len``."""
    if args.model is None:
        missing = [f for f, v in (("--hidden", args.hidden), ("--heads", args.heads)) if v is None]
        missing += ["--seq-len"] if args.seq_len is None else []
        if missing:
            raise ValueError(f"give --model, or {' '.join(missing)} (a GPT layer's shape)")
        if args.dense_layer:
            raise ValueError("--dense-layer needs an MoE --model")
        return ModelShape(1, args.hidden, args.heads, 1, args.seq_len)
    given = [f for f, v in (("--hidden", args.hidden), ("--heads", args.heads)) if v is not None]
    if given:
        verb = "come" if len(given) > 1 else "comes"
        raise ValueError(f"{' and '.join(given)} {verb} from --model's card: leave them out")
    if args.model in MODEL_CARDS or not os.path.exists(args.model):
        card = model_card(args.model)  # neither a card nor a file: the error names the cards
    else:
        card = read_hf_config(args.model)
    shape = card.shape() if args.seq_len is None else card.shape(seq_len=args.seq_len)
    if args.dense_layer and not (shape.is_moe and shape.dense_layers):
        raise ValueError(
            f"--dense-layer needs an MoE model with dense first layers; {card.name} has none"
        )
    return shape


def run(args: argparse.Namespace) -> int:
    """Time the layer and print it."""
    shape = _shape(args)
    parallel = Parallel(
        tp=args.tp,
        sp=args.sequence_parallel,
        dp=args.ep,
        ep=args.ep,
        cp=args.cp,
        recompute=args.recompute,
        microbatch_size=args.microbatch_size,
        attention=args.attention,
    )
    moe = False if args.dense_layer else None
    card = gpu_card(args.gpu_type)
    device = Device.of(card.peak_bf16_tflops, card.hbm_gbps)
    times = layer_times(shape, parallel, device, args.attention, args.dropout, moe=moe)
    parts = layer_parts(shape, parallel, device, args.attention, args.dropout, moe=moe)
    flops = layer_flops(shape, parallel, moe=moe)
    out = {
        **{key: times[key] for key in ("F", "B", "I", "W")},
        "flops": {key: flops[key] for key in ("F", "I", "W", "B")},
        "parts": parts._asdict(),
        "time_unit": "s",
        "gpu_type": args.gpu_type,
        "attention": args.attention,
        "dropout": dropout_of(args.attention, args.dropout),
        "recompute": args.recompute,
        "model": args.model,
        "moe_layer": shape.is_moe and moe is None,
        "hidden": shape.hidden,
        "heads": shape.heads,
        "seq_len": shape.seq_len,
        "microbatch_size": args.microbatch_size,
        "tp": args.tp,
        "ep": args.ep,
        "cp": args.cp,
    }
    print(json.dumps(out, indent=1) if args.json else report(out, card.name))
    return 0


def report(out: dict, card: str) -> str:
    """The four times in ms, their parts, and the FLOP/s they imply."""
    kind = "an MoE" if out["moe_layer"] else "a dense"
    what = f"{out['model']}, {kind} layer" if out["model"] else "one layer"
    lines = [
        f"{what}, h = {out['hidden']}, {out['heads']} heads, s = {out['seq_len']}, "
        f"b = {out['microbatch_size']}, tp = {out['tp']}, {out['attention']} attention "
        f"{'with' if out['dropout'] else 'without'} dropout, "
        f"recompute {out['recompute']}, on {card}:",
        f"{'pass':>4} {'ms':>9} {'GEMM ms':>9} {'attn ms':>9} {'elem ms':>9} {'TFLOP/s':>8}",
    ]
    for key in ("F", "B", "I", "W"):
        if key == "B":
            part = {k: out["parts"]["I"][k] + out["parts"]["W"][k] for k in out["parts"]["I"]}
        else:
            part = out["parts"][key]
        lines.append(
            f"{key:>4} {out[key] * 1e3:>9.3f} {part['gemm'] * 1e3:>9.3f} "
            f"{part['attention'] * 1e3:>9.3f} {part['elementwise'] * 1e3:>9.3f} "
            f"{out['flops'][key] / out[key] / 1e12:>8.0f}"
        )
    lines.append(
        "ms: seconds x 1e3 (parts before recomputation, which I adds); TFLOP/s: "
        "ppbook.cost_model.flops' count (attention in full) over the time"
        + (
            "; a model card's layer: the GPU model applied to its matrices, not measured"
            if out["model"]
            else ""
        )
    )
    return "\n".join(lines)
