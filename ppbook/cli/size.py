"""``ppbook size``: the (tensor, pipeline, data) splits, schedules and micro-batch sizes
that fit a transformer on a cluster, fastest first (:func:`ppbook.cost_model.sizing_search.size`).

Prints a ranked table, the memory breakdown of the best option and the rejected options
grouped by reason, or with ``--json`` one JSON object
(:meth:`ppbook.cost_model.search_result.SizingResult.as_dict`). Bad input, and a job that fits in no
configuration, end with a one-line error and exit status 2 (with ``--json`` the object is
printed first, with ``"fits": false``).
"""

from __future__ import annotations

import argparse
import json

from ppbook.cost_model.gpu_cards import GPU_TYPES
from ppbook.cost_model.layer_time import ATTENTION
from ppbook.cost_model.memory_bytes import RECOMPUTE, ModelShape
from ppbook.cost_model.search_costs import GB, Hardware
from ppbook.cost_model.search_result import SizingResult
from ppbook.cost_model.sizing_search import SIZING_SCHEDULES, size

EPILOG = """\
schedules searched: 1f1b, interleaved-1f1b (v = 2, 4, 8 and any v up to 8 that
splits the layers evenly), zb-h1, zb-h2, zb-v, dualpipev (pp = 1: no pipeline, 1f1b
alone); micro-batch sizes 1, 2, 4, 8.
time model (ppbook.cost_model.search_costs), seconds:
  compute      each pass from the GPU model (ppbook.cost_model.layer_time, `ppbook layer`):
               GEMMs at an efficiency growing with their shapes, attention
               (--attention) and element-wise work on the card's peak and HBM
               bandwidth, calibrated on an H200; with --utilisation instead
               FLOPs (Zero Bubble paper, Table 1) / (TFLOPS * utilisation)
  step work    per micro-batch the gradients accumulated (6 bytes a parameter),
               the embedding on the first stage (ppbook.cost_model.step_work)
  tensor par.  per layer 2 ring all-reduces of b*s*h*2 bytes forward, 2 backward
               (+2 with full recomputation), +1 on the first stage (the embedding)
               and +1 on the last (the head),
               intra-node link at 0.8 of its bandwidth (NCCL), not overlapped
  pipeline     b*s*h*2 bytes per stage boundary on the link it crosses (pipeline
               rank r of a replica on device r*tp), queued per link, overlapped
  data par.    a ring all-reduce of the fullest GPU's 16-bit gradients after the
               step, not overlapped, at 0.8 of the link (a node's ports for the
               group's members in it); then the Adam step (52 bytes a parameter)
memory: parameters, gradients and Adam state (16 bytes per parameter, ZeRO-1
divides the 12 of the optimizer) and the activations the schedule holds at its
peak (Korthikanti et al. 2022); buffers and fragmentation are not counted."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``ppbook size`` on ``subparsers``."""
    parser = subparsers.add_parser(
        "size",
        help="find the parallel splits and schedules that fit a model, fastest first",
        description=(
            "Size a training job: every tp * pp * dp = --gpus split (tp inside a node),\n"
            "schedule, v, micro-batch size b and recomputation mode with global batch =\n"
            "dp * m * b; memory per GPU from the activations the schedule holds (simulated\n"
            "order), step time from the simulator plus a data-parallel ring all-reduce.\n"
            "GB = 10^9 bytes; times in seconds; bubble f = idle / total of the pipeline.\n"
            "Defaults: an 8-GPU H100 SXM node (80 GB, 989 dense BF16 TFLOPS from NVIDIA's\n"
            "H100 datasheet, NVLink 4 at 450 GB/s and InfiniBand NDR 400 Gb/s = 50 GB/s\n"
            "per GPU and direction: data/links.csv); --gpu-type picks another card\n"
            "(ppbook/data/gpu_cards.json), whose figures the flags below override."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    model = parser.add_argument_group("the model (a GPT-style transformer, MLP 4h)")
    for flag, text in (
        ("--layers", "number of transformer layers L"),
        ("--hidden", "hidden size h"),
        ("--heads", "attention heads a"),
        ("--vocab", "vocabulary size V"),
        ("--seq-len", "sequence length s (tokens per sample)"),
    ):
        model.add_argument(flag, type=int, required=True, help=text)
    model.add_argument(
        "--untied", action="store_true", help="output head not tied to the input embeddings"
    )
    model.add_argument(
        "--no-position-embeddings",
        action="store_true",
        help="no learned position embeddings (rotary ones, as Llama's, have no parameters)",
    )
    job = parser.add_argument_group("the job and the cluster")
    job.add_argument("--global-batch", type=int, required=True, help="samples per step B")
    job.add_argument("--gpus", type=int, required=True, help="number of GPUs N")
    job.add_argument("--gpus-per-node", type=int, default=8, help="default %(default)s")
    job.add_argument(
        "--gpu-type",
        choices=GPU_TYPES,
        default="h100",
        help="the GPU's card: peak, memory, HBM and NVLink (default %(default)s)",
    )
    for flag, text in (
        ("--gpu-memory-gb", "memory per GPU, GB (default: the card's; h100: 80)"),
        ("--gpu-tflops", "peak dense 16-bit TFLOPS per GPU (default: the card's; h100: 989)"),
        (
            "--intra-node-gbps",
            "GB/s per direction inside a node (default: the card's NVLink; h100: 450)",
        ),
        (
            "--inter-node-gbps",
            "GB/s per GPU and direction between nodes (default: the card's node, IB NDR 50)",
        ),
    ):
        job.add_argument(flag, type=float, default=None, help=text)
    job.add_argument(
        "--utilisation",
        type=float,
        default=None,
        help="override the GPU model: every pass at this fraction of peak FLOP/s (FLOPs of "
        "the Zero Bubble paper's Table 1); it scales compute only, bubbles and "
        "communication come on top (Megatron-LM's Table 1 reached 0.44-0.52 of peak "
        "overall on A100)",
    )
    block = parser.add_argument_group("the layer's kernels (GPU model)")
    block.add_argument(
        "--attention",
        choices=ATTENTION,
        default="flash",
        help="causal flash attention, or standard attention that writes its s x s scores "
        "(default %(default)s)",
    )
    block.add_argument(
        "--dropout",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="dropout after attention and MLP (and on standard attention's probabilities); "
        "default: on with --attention standard (Megatron-LM's GPT block, dropout 0.1), "
        "off with flash",
    )
    fixed = parser.add_argument_group("fix part of the answer (default: search)")
    fixed.add_argument("--tp", type=int, help="tensor-parallel size")
    fixed.add_argument("--pp", type=int, help="pipeline-parallel size")
    fixed.add_argument(
        "--schedule",
        choices=SIZING_SCHEDULES,
        help="the schedule (with pp = 1 there is no pipeline: gradient accumulation)",
    )
    fixed.add_argument("--microbatch-size", type=int, help="micro-batch size b")
    fixed.add_argument("--recompute", choices=RECOMPUTE, help="activation recomputation")
    fixed.add_argument("--sequence-parallel", action="store_true", help="with tp")
    fixed.add_argument("--zero", type=int, choices=(0, 1), default=0, help="ZeRO stage")
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON object")
    out.add_argument(
        "--top", type=int, default=10, help="options ranked (default %(default)s; 0: all)"
    )
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the search and print it; a job that fits nowhere is a ValueError (exit 2)."""
    shape = ModelShape(
        layers=args.layers,
        hidden=args.hidden,
        heads=args.heads,
        vocab=args.vocab,
        seq_len=args.seq_len,
        tied_embeddings=not args.untied,
        position_embeddings=not args.no_position_embeddings,
    )
    hardware = Hardware(
        num_gpus=args.gpus,
        gpu_memory_gb=args.gpu_memory_gb,
        tflops=args.gpu_tflops,
        utilisation=args.utilisation,
        gpus_per_node=args.gpus_per_node,
        intra_node_gbps=args.intra_node_gbps,
        inter_node_gbps=args.inter_node_gbps,
        gpu_type=args.gpu_type,
    )
    if args.top < 0:
        raise ValueError(f"--top must be >= 0 (0: rank all), got {args.top}")
    result = size(
        shape,
        args.global_batch,
        hardware,
        tp=args.tp,
        pp=args.pp,
        microbatch_size=args.microbatch_size,
        recompute=args.recompute,
        sequence_parallel=args.sequence_parallel,
        zero=args.zero,
        top=args.top or None,
        schedules=(args.schedule,) if args.schedule else SIZING_SCHEDULES,
        attention=args.attention,
        dropout=args.dropout,
    )
    if args.json:
        print(json.dumps(result.as_dict(), indent=1))
    else:
        print(report(result))
    if result.best is None:
        raise ValueError(nothing_fits(result))
    return 0


def nothing_fits(result: SizingResult) -> str:
    """One line: nothing fits, and the closest configuration with why it failed."""
    closest = result.closest()
    if closest is None:
        kinds = "; ".join(f"{kind} ({n})" for kind, n, _ in result.groups())
        return f"no configuration fits: {kinds or 'nothing to try'}"
    return f"no configuration fits; the closest is {closest.where}: {closest.reason}"


def report(result: SizingResult) -> str:
    """The ranked table, the best option's memory breakdown, the rejections by reason."""
    shape, hw = result.shape, result.hardware
    lines = [
        f"model: {result.params / 1e9:.1f}B parameters ({shape.layers} layers, hidden "
        f"{shape.hidden}, {shape.heads} heads, vocabulary {shape.vocab}, sequence {shape.seq_len})",
        f"job: global batch {result.global_batch} on {hw.num_gpus} GPUs of "
        f"{hw.gpu_type} ({hw.gpu_memory_gb:g} GB, {hw.tflops:g} TFLOPS, "
        + (f"x {hw.utilisation:g}), " if hw.utilisation else "GPU model), ")
        + f"{hw.gpus_per_node} per node, {hw.intra_node_gbps:g} / {hw.inter_node_gbps:g} GB/s "
        "inside / between nodes",
        "",
    ]
    if result.ranked:
        head = (
            f"{'#':>3} {'tp':>3} {'pp':>3} {'dp':>4}  {'schedule':<17}{'v':>2} {'b':>3} "
            f"{'m':>5}  {'recompute':<10}{'step s':>9} {'bubble f':>9} {'GB/GPU':>7}  fits"
        )
        lines += [
            "ranked by step time (pipeline simulated + data-parallel all-reduce + optimizer):",
            head,
        ]
        for k, option in enumerate(result.ranked, 1):
            c = option.config
            lines.append(
                f"{k:>3} {c.tp:>3} {c.pp:>3} {c.dp:>4}  {c.schedule:<17}{c.v or '':>2} "
                f"{c.microbatch_size:>3} {c.num_microbatches:>5}  {c.recompute:<10}"
                f"{option.step_time_s:>9.3f} {option.bubble_fraction:>9.3f} "
                f"{option.memory_bytes / GB:>7.1f}  yes"
            )
        if result.not_ranked:
            lines.append(
                f"    ... {result.not_ranked} more fit but cannot be faster than #"
                f"{len(result.ranked)} (their lower bound is slower)"
            )
        lines += ["", *breakdown(result)]
    rejected = len(result.rejected)
    lines += ["", f"rejected ({rejected}), by reason (an example of each):"]
    for kind, n, example in result.groups():
        lines.append(f"  {kind}: {n}, e.g. {example.where}: {example.reason}")
    return "\n".join(lines)


def breakdown(result: SizingResult) -> list[str]:
    """The best option's memory on its fullest GPU, from its simulated timeline."""
    best = result.best
    ranks = result.memory(best)
    worst = max(ranks, key=lambda r: r.total)
    c = best.config
    lines = [
        f"best: tp {c.tp}, pp {c.pp}, dp {c.dp}, {c.schedule_name}"
        f", b = {c.microbatch_size}, m = {c.num_microbatches}, recompute {c.recompute}: "
        f"step {best.step_time_s:.3f} s = pipeline {best.pipeline_s:.3f} s + data-parallel "
        f"all-reduce {best.allreduce_s:.3f} s (not overlapped) + optimizer "
        f"{best.optimizer_s:.3f} s",
        f"memory of pipeline rank {worst.rank} (the fullest), GB: "
        f"parameters {worst.parameters / GB:.1f}, gradients {worst.gradients / GB:.1f}, "
        f"optimizer {worst.optimizer / GB:.1f}, activations {worst.activations / GB:.1f}, "
        f"total {worst.total / GB:.1f} of {result.hardware.gpu_memory_gb:g}",
        "per pipeline rank, GB: " + " ".join(f"{r.total / GB:.1f}" for r in ranks),
    ]
    return lines
