"""``ppbook layer``: one transformer layer's pass times from the GPU model
(:mod:`ppbook.cost_model.layer_time`).

Prints ``F``, ``B``, ``I`` and ``W`` of one micro-batch through one layer on one
tensor-parallel rank, in seconds, with what each pass spends on matrix multiplies,
attention and element-wise work, and the layer's FLOPs as :mod:`ppbook.cost_model.flops` counts them
(the Zero Bubble paper's Table 1: attention counted in full, as if not causal); with
``--json`` one object with keys ``F``, ``B``, ``I``, ``W`` (seconds), ``flops`` (its
``F``, ``I``, ``W``, ``B``), ``parts`` and the inputs. The default block is the one
timed on the H200: pre-norm GPT, causal flash attention, a 4h GELU MLP, bf16, on the
default GPU type h200, without dropout; ``--attention standard`` times Megatron-LM's block,
which drops out unless ``--no-dropout`` (:data:`ppbook.cost_model.layer_time.DROPOUT_DEFAULT`). Bad
input ends with a one-line error and exit status 2.
"""

from __future__ import annotations

import argparse
import json

from ppbook.cost_model.flops import layer_flops
from ppbook.cost_model.gpu_cards import GPU_TYPES, gpu_card
from ppbook.cost_model.layer_time import ATTENTION, Device, dropout_of, layer_parts, layer_times
from ppbook.cost_model.memory_bytes import RECOMPUTE, ModelShape, Parallel

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
    for flag, text in (
        ("--hidden", "hidden size h"),
        ("--heads", "attention heads a"),
        ("--seq-len", "sequence length s"),
        ("--microbatch-size", "micro-batch size b (sequences)"),
    ):
        parser.add_argument(flag, type=int, required=True, help=text)
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel size (default 1)")
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


def run(args: argparse.Namespace) -> int:
    """Time the layer and print it."""
    shape = ModelShape(1, args.hidden, args.heads, 1, args.seq_len)
    parallel = Parallel(
        tp=args.tp,
        sp=args.sequence_parallel,
        recompute=args.recompute,
        microbatch_size=args.microbatch_size,
    )
    card = gpu_card(args.gpu_type)
    device = Device.of(card.peak_bf16_tflops, card.hbm_gbps)
    times = layer_times(shape, parallel, device, args.attention, args.dropout)
    parts = layer_parts(shape, parallel, device, args.attention, args.dropout)._asdict()
    flops = layer_flops(shape, parallel)
    out = {
        **{key: times[key] for key in ("F", "B", "I", "W")},
        "flops": {key: flops[key] for key in ("F", "I", "W", "B")},
        "parts": parts,
        "time_unit": "s",
        "gpu_type": args.gpu_type,
        "attention": args.attention,
        "dropout": dropout_of(args.attention, args.dropout),
        "recompute": args.recompute,
        "hidden": args.hidden,
        "heads": args.heads,
        "seq_len": args.seq_len,
        "microbatch_size": args.microbatch_size,
        "tp": args.tp,
    }
    print(json.dumps(out, indent=1) if args.json else report(out, card.name))
    return 0


def report(out: dict, card: str) -> str:
    """The four times in ms, their parts, and the FLOP/s they imply."""
    lines = [
        f"one layer, h = {out['hidden']}, {out['heads']} heads, s = {out['seq_len']}, "
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
    )
    return "\n".join(lines)
