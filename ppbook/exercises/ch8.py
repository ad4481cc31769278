"""Exercises of chapter 8, sizing a real job (``notebooks/08_sizing.ipynb``).

The right answers come from the package at check time (the jobs and the searches are in
:mod:`ppbook.exercises.ch8_jobs`): the sizing search
(:func:`ppbook.cost_model.sizing_search.size`, with the time model of
:mod:`ppbook.cost_model.search_costs`) for the
splits, recomputation modes, micro-batch sizes and rejections, and the simulator with
:func:`ppbook.cost_model.flops.stage_costs` for a layer split. Every choice is checked by its
effect:
the memory the search finds and the step it simulates. Sizes in GB = 10^9 bytes, times in
seconds. The hints name the usual slips: the data-parallel size taken as N / p (tensor
parallelism forgotten), data-parallel replicas expected to share the model's state, the
output head's logits forgotten on the last stage, a rejection for the static state
mistaken for one for the activations. Sources: REFERENCES.md (Megatron-LM,
arXiv:2104.04473, sec. 3; Korthikanti et al. 2022; ZeRO sec. 3). Exercises 8.7 and 8.8, on
today's jobs (ZeRO-2's bytes, expert parallelism), live in :mod:`ppbook.exercises.ch8_today`.
"""

from __future__ import annotations

from ppbook.checks import shown
from ppbook.cost_model.memory_bytes import RECOMPUTE
from ppbook.cost_model.search_costs import GB, Hardware
from ppbook.cost_model.search_result import SizingResult
from ppbook.cost_model.sizing_search import size
from ppbook.exercises import exercise, integer, right, wrong
from ppbook.exercises.ch8_jobs import (
    CHOICE_BATCH,
    GPT3_JOB,
    MODEL_70B,
    SPLIT,
    STACK_2021,
    WIDE_VOCAB,
    fastest_split,
    shortest_split,
    small_gpu_plan,
    split_result,
    split_step,
    stage_work,
)

JOB = {"gpus": 64, "tp": 4, "pp": 8, "global_batch": 512, "microbatch_size": 4}
"""Exercise 8.1's job."""

MICROBATCH_CHOICES = (1, 2, 4, 8, 16)
"""The micro-batch sizes exercise 8.5 offers."""


def _gb(nbytes: float) -> str:
    return f"{nbytes / GB:.1f} GB"


def _plan(option) -> str:
    c = option.config
    v = f" v = {c.v}" if c.v else ""
    return (
        f"{c.schedule}{v}, b = {c.microbatch_size}, recompute {c.recompute}: step "
        f"{option.step_time_s:.2f} s, {_gb(option.memory_bytes)} on the fullest GPU"
    )


# ----- 8.1 -------------------------------------------------------------------------------


@exercise(
    "8.1",
    "The micro-batches m each pipeline runs per step: 64 GPUs, tp = 4, pp = 8, global "
    "batch 512 samples, micro-batches of b = 4.",
    kind="compute",
    solution="The 64 GPUs hold dp = 64 / (tp * pp) = 64 / 32 = 2 replicas of the pipeline, "
    "and global batch = dp * m * b, so m = 512 / (2 * 4) = 64 micro-batches per replica.",
    answer_name="answer_1",
)
def _microbatches(answer):
    given = integer(answer, "a whole number of micro-batches", minimum=1)
    n, t, p, batch, b = JOB.values()
    dp = n // (t * p)
    truth = batch // (dp * b)
    if given == truth:
        return right(f"dp = {n} / ({t} * {p}) = {dp}, m = {batch} / ({dp} * {b}) = {truth}.")
    slips = {
        batch // b: ("that is the whole batch in micro-batches.", "dp replicas share it."),
        batch // dp: ("that counts samples, not micro-batches.", f"each holds b = {b}."),
        batch // (n * b): ("that divides the batch over all 64 GPUs.", "only dp replicas."),
        batch // (n // p * b): ("that takes dp = N / pp.", "tensor parallelism uses GPUs too."),
        batch // (n // t * b): ("that takes dp = N / tp.", "the pipeline's stages use GPUs too."),
    }
    if given in slips:
        return wrong(*slips[given])
    return wrong(f"m = {given} does not make dp * m * b = {batch}.", "dp = N / (tp * pp).")


# ----- 8.2 -------------------------------------------------------------------------------


def _three_counts(answer) -> tuple[int, int, int] | None:
    if isinstance(answer, str | bytes) or not hasattr(answer, "__len__") or len(answer) != 3:
        return None
    return tuple(integer(x, "three whole numbers (tp, pp, dp)", minimum=1) for x in answer)


@exercise(
    "8.2",
    "Choose the (tp, pp, dp) split of 64 A100 80 GB GPUs (8 a node) with the shortest "
    "step that fits for GPT-3 175B and a global batch of 256.",
    kind="choose",
    solution="The training state is 16 bytes a parameter (the 2021 stack the exercises "
    "run: bf16 gradients, standard attention, no sequence parallelism): 174.6e9 * 16 = "
    "2.8 TB, 35 GPUs' worth, and every data-parallel replica holds all of it. So dp = 1: "
    "all 64 GPUs hold one copy, tp * pp = 64, with tp at most 8 (a node). Of (8, 8), "
    "(4, 16), (2, 32) and (1, 64), tp = 8 has the shortest pipeline but pays the most "
    "all-reduces, and needs selective recomputation to fit; (4, 16) fits without any "
    "recomputation under V-Min, which holds about a third of 1F1B's activations (Qi et "
    "al. 2024), and wins by a few percent. `size(GPT3, 256, Hardware(64, "
    "**A100_SXM_80GB), top=1, **STACK_2021)` (`ppbook.exercises.ch8_jobs`) gives "
    "(4, 16, 1), V-Min, no recomputation (the GPU model, `ppbook.cost_model.layer_time`, "
    "and the step's own work, `ppbook.cost_model.step_work`).",
    answer_name="answer_2",
)
def _choose_split(answer):
    split = _three_counts(answer)
    if split is None:
        return wrong(f"this exercise wants three numbers (tp, pp, dp), got {shown(answer)}.")
    tp, pp, dp = split
    n = GPT3_JOB["hardware"].num_gpus
    if tp * pp * dp != n:
        return wrong(f"tp * pp * dp = {tp * pp * dp}, not the {n} GPUs.", "use every GPU.")
    if tp > GPT3_JOB["hardware"].gpus_per_node:
        return wrong(
            f"tp = {tp} spans nodes: ppbook size keeps tensor parallelism inside a node of 8.",
            "its all-reduces sit inside every layer and need NVLink.",
        )
    result = split_result(tp, pp)
    best = fastest_split().best
    if result.best is None:
        closest = result.closest()
        hint = (
            "each data-parallel replica holds the whole model's state: 16 bytes a parameter."
            if dp > 1
            else "more tensor parallelism shrinks every stage's share."
        )
        return wrong(f"nothing fits with ({tp}, {pp}, {dp}): {closest.reason}.", hint)
    if result.best.step_time_s > best.step_time_s * (1 + 1e-9):
        c = best.config
        return wrong(
            f"({tp}, {pp}, {dp}) fits, with {_plan(result.best)}; ({c.tp}, {c.pp}, {c.dp}) "
            f"takes {best.step_time_s:.2f} s.",
            "within a node, more tensor parallelism means fewer pipeline stages.",
        )
    return right(f"({tp}, {pp}, {dp}): {_plan(result.best)}, the fastest that fits.")


# ----- 8.3 -------------------------------------------------------------------------------


@exercise(
    "8.3",
    "Construct a split of the 32 layers of a model with a 256,000-word vocabulary over "
    "1F1B's 4 stages (m = 8) whose simulated step is the shortest any split gives.",
    kind="construct",
    solution="The last stage also computes the output head's logits, 2bshV FLOPs in each "
    "of F, I and W, 6bshV in F + B. A layer's F + B with selective recomputation is "
    "bsh(72h + 16s) FLOPs, so with V = 256,000 and h = s = 4096 the head is 4.3 layers' "
    "worth. The step follows the slowest stage, so the stages should carry equal work: "
    "32 + 4.3 = 36.3 layers' worth, 9.1 a stage. Whole layers allow [9, 9, 9, 5] (9, 9, 9 "
    "and 9.3 layers' worth): the simulated step is 1.53 s against 1.85 s for the even "
    "[8, 8, 8, 8]. `split_step([9, 9, 9, 5])` simulates it.",
    answer_name="answer_3",
)
def _construct_split(answer):
    if isinstance(answer, str | bytes) or not hasattr(answer, "__iter__"):
        return wrong(f"this exercise wants a list of 4 layer counts, got {shown(answer)}.")
    split = [integer(x, "whole numbers of layers, at least 1 a stage", minimum=1) for x in answer]
    if len(split) != SPLIT["p"] or sum(split) != WIDE_VOCAB.layers:
        return wrong(
            f"give 4 stages adding up to 32 layers, got {split} ({sum(split)} layers).",
        )
    step = split_step(split)
    shortest, best = shortest_split()
    work = stage_work(split)
    slowest = max(range(len(work)), key=work.__getitem__)
    said = (
        f"{split} takes {step:.3f} s (simulated); its slowest stage, stage {slowest}, runs "
        f"F + B in {work[slowest] * 1e3:.1f} ms"
    )
    if step <= shortest * (1 + 1e-9):
        return right(f"{said}, as short as any split.")
    if slowest == SPLIT["p"] - 1:
        return wrong(
            f"{said}; the shortest split takes {shortest:.3f} s.",
            "the last stage also computes the output head's logits, 2bshV FLOPs a pass.",
        )
    return wrong(
        f"{said}; the shortest split takes {shortest:.3f} s.",
        "make the stages' F + B as equal as whole layers allow, the head included.",
    )


# ----- 8.4 and 8.5 -----------------------------------------------------------------------


def _needs(result: SizingResult) -> float:
    return result.best.memory_bytes if result.best else result.closest().memory_bytes


@exercise(
    "8.4",
    "Choose the recomputation (none, selective or full) that fits the 70B model on 64 GPUs "
    "of 64 GB (tp = 4, pp = 8, dp = 2, 1F1B, b = 1) with the shortest step.",
    kind="choose",
    solution="Rank 0 holds p = 8 micro-batches of its 10 layers under 1F1B. Without "
    "recomputation the attention scores (5as^2b/t bytes a layer, 1.3 GB at s = 4096) "
    "make that 184 GB; selective recomputation drops them: 76.5 GB, still over 64; full "
    'recomputation keeps only each layer\'s input: 38.9 GB. So "full", at 35.3 s a step '
    "against selective's 27.2 s on an 80 GB GPU. `small_gpu_plan(mode, 1)` gives each.",
    answer_name="answer_4",
)
def _choose_recompute(answer):
    choice = answer.strip().lower() if isinstance(answer, str) else None
    if choice not in RECOMPUTE:
        return wrong(f'this exercise wants "none", "selective" or "full", got {shown(answer)}.')
    fitting = {m: small_gpu_plan(m, 1).best for m in RECOMPUTE if small_gpu_plan(m, 1).best}
    best = min(fitting, key=lambda m: fitting[m].step_time_s)
    needs = _needs(small_gpu_plan(choice, 1))
    if choice not in fitting:
        return wrong(
            f'with "{choice}" rank 0 needs {_gb(needs)}, over 64 GB.',
            "rank 0 holds p micro-batches of its layers' activations.",
        )
    if choice != best:
        return wrong(
            f'"{choice}" fits ({_gb(needs)}) but "{best}" fits too and is faster: '
            f"{fitting[choice].step_time_s:.2f} s against {fitting[best].step_time_s:.2f} s.",
            "recompute only as much as memory forces.",
        )
    return right(f'"{choice}" fits in {_gb(needs)}: {_plan(fitting[choice])}.')


@exercise(
    "8.5",
    "Choose the largest micro-batch size b of 1, 2, 4, 8 or 16 that fits the 70B model on "
    "64 GPUs of 64 GB with full recomputation (tp = 4, pp = 8, dp = 2, 1F1B).",
    kind="choose",
    solution="Rank 0 keeps its static state, 33.3 GB, plus p = 8 micro-batches of its 10 "
    "layers' inputs, 2bsh bytes each (replicated over the t ranks without sequence "
    "parallelism), and the embedding dropout's masks. The activations grow with b: "
    "38.9 GB in all at b = 1, 44.5 at 2, 55.8 at 4, 78.4 at 8. So b = 4. Its GEMMs run "
    "faster (`ppbook layer`), but with s = 4096 tokens they are large already at b = 1, "
    "while m = 512 / (2b) shrinks and the bubble grows: 37.5 s a step against 35.3 s at "
    "b = 1. With shorter sequences the faster GEMMs win (chapter 8, section 5). "
    "`small_gpu_plan('full', b)` gives each.",
    answer_name="answer_5",
)
def _choose_microbatch(answer):
    b = integer(answer, f"one of {', '.join(map(str, MICROBATCH_CHOICES))}")
    if b not in MICROBATCH_CHOICES:
        return wrong(f"b = {b} is not one of {', '.join(map(str, MICROBATCH_CHOICES))}.")
    fits = {x: small_gpu_plan("full", x).best is not None for x in MICROBATCH_CHOICES}
    largest = max(x for x, ok in fits.items() if ok)
    needs = _needs(small_gpu_plan("full", b))
    if not fits[b]:
        return wrong(
            f"b = {b} needs {_gb(needs)} on rank 0, over 64 GB.",
            "activations grow in proportion to b; the static state does not.",
        )
    if b < largest:
        return wrong(
            f"b = {b} fits ({_gb(needs)}), and so does b = {largest} "
            f"({_gb(_needs(small_gpu_plan('full', largest)))}).",
        )
    plan = small_gpu_plan("full", b).best
    one = small_gpu_plan("full", 1).best
    return right(
        f"b = {b} needs {_gb(needs)}; b = {2 * b} would need "
        f"{_gb(_needs(small_gpu_plan('full', 2 * b)))}. Its step: {plan.step_time_s:.2f} s "
        f"against {one.step_time_s:.2f} s at b = 1 (faster GEMMs against a longer bubble)."
    )


# ----- 8.6 -------------------------------------------------------------------------------

REJECTION_KEYS = ("tp", "pp", "microbatch_size", "recompute")
"""What exercise 8.6's answer fixes: the arguments of
:func:`ppbook.cost_model.sizing_search.size`."""


@exercise(
    "8.6",
    "Construct size's tp, pp, microbatch_size and recompute for the 70B model on 64 H100 "
    "80 GB, global batch 512, that it rejects in every schedule because the activations "
    "do not fit, although parameters, gradients and optimizer state alone would.",
    kind="construct",
    solution="The static state fits once tp * pp >= 16 (65e9 * 16 bytes / 16 = 65 GB a "
    "GPU); no recomputation then overflows: rank 0 holds p micro-batches of 5as^2b/t "
    "bytes of attention scores a layer, 184 GB at tp = 4, pp = 8, b = 1 under 1F1B and "
    'more under the others. `dict(tp=4, pp=8, microbatch_size=1, recompute="none")`. '
    "With tp * pp <= 8 the static state alone is over 80 GB: a different rejection.",
    answer_name="answer_6",
)
def _construct_rejection(answer):
    if not isinstance(answer, dict) or set(answer) != set(REJECTION_KEYS):
        return wrong(
            f"this exercise wants a dict with keys {', '.join(REJECTION_KEYS)}, "
            f"got {shown(answer)}.",
            'e.g. dict(tp=8, pp=8, microbatch_size=1, recompute="full").',
        )
    result = size(MODEL_70B, CHOICE_BATCH, Hardware(64), **answer, top=1, **STACK_2021)
    if result.best is not None:
        return wrong(f"this fits: {_plan(result.best)}.", "less recomputation, or a larger b.")
    memory = [r for r in result.rejected if r.kind == "does not fit in memory"]
    static = [r for r in memory if "alone" in r.reason]
    if static:
        return wrong(
            f"{static[0].where} is rejected before any activation is counted: {static[0].reason}.",
            "16 bytes a parameter over tp * pp GPUs must fit first.",
        )
    if not memory:
        kinds = ", ".join(kind for kind, _, _ in result.groups())
        return wrong(f"rejected, but not for memory: {kinds}.")
    closest = min(memory, key=lambda r: r.memory_bytes)
    return right(
        f"every schedule is rejected for its activations; the closest, {closest.where}, "
        f"{closest.reason}."
    )


import ppbook.exercises.ch8_today  # noqa: E402, F401 (registers 8.7 and 8.8: derive, construct)
