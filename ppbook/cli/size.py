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

from ppbook.cli.size_input import DTYPE_BYTES, count, figure, layout_of, shape_of
from ppbook.cost_model.gpu_cards import GPU_TYPES
from ppbook.cost_model.layer_time import ATTENTION
from ppbook.cost_model.memory_bytes import RECOMPUTE
from ppbook.cost_model.model_cards import MODEL_CARDS
from ppbook.cost_model.search_costs import GB, MAX_GPUS, Hardware
from ppbook.cost_model.search_result import SizingResult
from ppbook.cost_model.sizing_search import EXTRA_SCHEDULES, SIZING_SCHEDULES, size

EPILOG = """\
schedules searched: 1f1b, interleaved-1f1b and interleaved-zb (v = 2, 4, 8 and any v
up to 8 that splits the layers evenly; every m PyTorch runs), zb-h1, zb-h2, zb-v,
v-half, v-min, dualpipev (pp = 1: no pipeline, 1f1b alone); --schedule dualpipe too;
micro-batch sizes 1, 2, 4, 8; ep over the divisors of dp that divide the experts.
time model (ppbook.cost_model.search_costs), seconds:
  compute      each pass from the GPU model (ppbook.cost_model.layer_time, `ppbook layer`):
               GEMMs at an efficiency growing with their shapes, attention
               (--attention; flash recomputes in its backward) and element-wise work
               on the card's peak and HBM bandwidth, calibrated on an H200; with
               --utilisation instead FLOPs / (TFLOPS * utilisation)
  step work    per micro-batch the gradients accumulated, the embedding on the first
               stage (ppbook.cost_model.step_work)
  tensor par.  per layer 2 all-reduces of b*s*h*2 bytes forward, 2 backward (+2 with
               full recomputation); with sequence parallelism all-gathers and
               reduce-scatters of the same bytes; +1 on the first and last stages;
               on NVLink at 0.8 of its bandwidth (NCCL), not overlapped
  experts      per MoE layer 2 all-to-alls of tokens*k*h*2 bytes forward, 2 backward,
               (ep-1)/ep leaving the rank, on the links the ep group spans
  context par. ring attention: each rank's K and V round the cp ranks, per layer
  pipeline     b*s*h*2/cp bytes per stage boundary, sent in tp pieces (Megatron's
               scatter/gather), on the link it crosses, queued per link, overlapped
  data par.    by ZeRO stage: an all-reduce of the gradients (0), a reduce-scatter and
               an all-gather of the parameters (1), per micro-batch (2), and FSDP's
               two all-gathers per micro-batch (3); not overlapped, at 0.8 of the link
               (one NIC per GPU: rails); then the Adam step
memory: parameters, gradients and Adam state (18 bytes per parameter: bf16 weights,
fp32 gradients, fp32 master weights and moments; --grad-dtype, --adam-moments; ZeRO
shards them over dp, expert weights over dp/ep) and the activations the schedule holds at
its peak (Korthikanti et al. 2022; flash attention keeps no s x s scores); buffers and
fragmentation are not counted. Limits: --gpus <= 1,048,576; counts <= 10^9; GPU
figures between 0.001 and 10^6; schedules within ppbook.limits (rejected otherwise)."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``ppbook size`` on ``subparsers``."""
    parser = subparsers.add_parser(
        "size",
        help="find the parallel splits and schedules that fit a model, fastest first",
        description=(
            "Size a training job: every tp * cp * pp * dp = --gpus split (tp inside a node,\n"
            "ep inside dp), schedule, v, micro-batch size b and recomputation mode with\n"
            "global batch = dp * m * b; memory per GPU from the activations the schedule\n"
            "holds (simulated order), step time from the simulator plus the data-parallel\n"
            "collectives. GB = 10^9 bytes; times in seconds; bubble f = idle / total.\n"
            "Defaults: an 8-GPU H100 SXM node (80 GB, 989 dense BF16 TFLOPS from NVIDIA's\n"
            "H100 datasheet, NVLink 4 at 450 GB/s and one InfiniBand NDR 400 Gb/s = 50 GB/s\n"
            "NIC per GPU and direction, rails: data/links.csv); --gpu-type picks another\n"
            "card (ppbook/data/gpu_cards.json), whose figures the flags below override.\n"
            "FlashAttention and sequence parallelism are on; --attention standard\n"
            "--no-sequence-parallel reproduce Megatron-LM's 2021 runs."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    model = parser.add_argument_group(
        "the model: a card (--model), whose fields the flags below override, or a GPT-style "
        "transformer given by all of --layers --hidden --heads --vocab --seq-len"
    )
    model.add_argument(
        "--model",
        metavar="|".join(MODEL_CARDS) + "|PATH",
        help="a model card, or a Hugging Face config.json (its training sequence length is "
        "the default --seq-len)",
    )
    for flag, text in (
        ("--layers", "number of transformer layers L"),
        ("--hidden", "hidden size h"),
        ("--heads", "attention heads a"),
        ("--vocab", "vocabulary size V"),
        ("--seq-len", "sequence length s (tokens per sample)"),
        ("--kv-heads", "key/value heads (grouped-query attention; default: --heads)"),
        ("--ffn-hidden", "the MLP's width (default 4h, or the card's)"),
        ("--experts", "routed experts of each MoE layer (0: dense)"),
        ("--top-k", "experts each token is routed to"),
    ):
        minimum = 0 if flag == "--experts" else 1
        model.add_argument(flag, type=count(flag, minimum), default=None, help=text)
    model.add_argument(
        "--swiglu",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a SwiGLU MLP of three matrices (gate, up, down; default: the card's, else no)",
    )
    model.add_argument(
        "--untied", action="store_true", help="output head not tied to the input embeddings"
    )
    model.add_argument(
        "--no-position-embeddings",
        action="store_true",
        help="no learned position embeddings (rotary ones, as Llama's, have no parameters)",
    )
    job = parser.add_argument_group("the job and the cluster")
    job.add_argument(
        "--global-batch", type=count("--global-batch"), required=True, help="samples per step"
    )
    job.add_argument(
        "--gpus", type=count("--gpus", 1, MAX_GPUS), required=True, help="number of GPUs N"
    )
    job.add_argument(
        "--gpus-per-node",
        type=count("--gpus-per-node", 1, MAX_GPUS),
        default=8,
        help="default %(default)s",
    )
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
            "GB/s per GPU and direction between nodes, one NIC per GPU (default: the "
            "card's node, IB NDR 50)",
        ),
    ):
        job.add_argument(flag, type=figure(flag), default=None, help=text)
    job.add_argument(
        "--utilisation",
        type=figure("--utilisation", 1e-3, 1.0),
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
    fixed.add_argument("--tp", type=count("--tp", 1, MAX_GPUS), help="tensor-parallel size")
    fixed.add_argument("--pp", type=count("--pp", 1, MAX_GPUS), help="pipeline-parallel size")
    fixed.add_argument(
        "--ep",
        type=count("--ep", 1, MAX_GPUS),
        help="expert-parallel size, inside the data-parallel group (default: search the "
        "divisors of dp that divide the experts; 1 for a dense model)",
    )
    fixed.add_argument(
        "--cp",
        type=count("--cp", 1, MAX_GPUS),
        default=1,
        help="context-parallel size: each sequence split over cp GPUs, ring attention "
        "(default %(default)s)",
    )
    fixed.add_argument(
        "--schedule",
        choices=SIZING_SCHEDULES + tuple(n for n in EXTRA_SCHEDULES if n not in SIZING_SCHEDULES),
        help="the schedule (with pp = 1 there is no pipeline: gradient accumulation)",
    )
    fixed.add_argument(
        "--microbatch-size", type=count("--microbatch-size"), help="micro-batch size b"
    )
    fixed.add_argument("--recompute", choices=RECOMPUTE, help="activation recomputation")
    fixed.add_argument(
        "--sequence-parallel",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="sequence parallelism with tp (default on)",
    )
    state = parser.add_argument_group("bytes a parameter keeps (default: Megatron's, 18)")
    state.add_argument(
        "--zero",
        type=int,
        choices=(0, 1, 2, 3),
        default=None,
        help="ZeRO stage: 1 optimizer state sharded over dp (Megatron's distributed "
        "optimizer), 2 gradients too, 3 parameters too (FSDP) (default 0)",
    )
    state.add_argument(
        "--grad-dtype",
        choices=tuple(DTYPE_BYTES),
        default=None,
        help="gradients kept in fp32 (Megatron's main gradients, the default) or bf16",
    )
    state.add_argument(
        "--adam-moments",
        choices=tuple(DTYPE_BYTES),
        default=None,
        help="Adam's two moments in fp32 (default) or bf16 (DeepSeek-V3; the card's "
        "choice with --model deepseek-v3)",
    )
    state.add_argument(
        "--recompute-norms",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="recompute the norms in the backward (DeepSeek-V3; default: the card's)",
    )
    state.add_argument(
        "--recompute-mla-up",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="recompute MLA's up-projections in the backward (DeepSeek-V3; default: the card's)",
    )
    state.add_argument(
        "--fp8-activations",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="cache linear layers' inputs in FP8, after attention in E5M6 (DeepSeek-V3; "
        "default: the card's)",
    )
    state.add_argument(
        "--recompute-swiglu",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="MoE experts keep their SwiGLU's input and recompute its output, no expert "
        "outputs kept (DeepSeek-V3; default: the card's)",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON object")
    out.add_argument(
        "--top",
        type=count("--top", 0),
        default=10,
        help="options ranked (default %(default)s; 0: all)",
    )
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the search and print it; a job that fits nowhere is a ValueError (exit 2)."""
    shape, choices = shape_of(args)
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
    result = size(
        shape,
        args.global_batch,
        hardware,
        tp=args.tp,
        pp=args.pp,
        ep=args.ep,
        cp=args.cp,
        microbatch_size=args.microbatch_size,
        recompute=args.recompute,
        sequence_parallel=args.sequence_parallel,
        top=args.top or None,
        schedules=(args.schedule,) if args.schedule else SIZING_SCHEDULES,
        attention=args.attention,
        dropout=args.dropout,
        **layout_of(args, choices),
    )
    if args.json:
        print(as_json(result.as_dict()))
    else:
        print(report(result))
    if result.best is None:
        raise ValueError(nothing_fits(result))
    return 0


def as_json(data: dict) -> str:
    """``data`` as standard JSON (no NaN or Infinity: a ValueError names the first)."""
    try:
        return json.dumps(data, indent=1, allow_nan=False)
    except ValueError:
        raise ValueError(
            "the result holds a number that is not finite; check the figures given"
        ) from None


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
        f"model: {result.params / 1e9:.1f}B parameters"
        + (f", {result.active_params / 1e9:.1f}B active" if result.active_params else "")
        + f" ({shape.layers} layers, hidden "
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
