"""Exercises 8.7 and 8.8 of chapter 8, on today's jobs (``notebooks/08_sizing.ipynb``,
section 7): derive and construct.

Each answer is judged by what makes it right, never by equality with one expression:

- 8.7, the bytes a GPU keeps per parameter under ZeRO-2, must equal what the memory model
  counts (:func:`ppbook.cost_model.memory_bytes.static_bytes`, Megatron's bytes) at every
  drawn number of data-parallel replicas d;
- 8.8, a (tp, pp, ep) layout for Mixtral 8x7B, must make the search find a plan that fits
  while the same tp and pp without expert parallelism fit nothing.
"""

from __future__ import annotations

import sympy as sp

from ppbook.checks import shown
from ppbook.cost_model.memory_bytes import Parallel, static_bytes
from ppbook.cost_model.model_cards import model_card
from ppbook.cost_model.search_costs import Hardware
from ppbook.cost_model.sizing_search import size
from ppbook.exercises import exercise, integer, right, wrong

REPLICAS = (1, 2, 3, 8, 64, 128, 1000)
"""The numbers of data-parallel replicas d at which 8.7 is checked."""
MIXTRAL_JOB = {"global_batch": 256, "gpus": 64, "microbatch_size": 1}
"""Exercise 8.8's job: Mixtral 8x7B (its card: 32,768-token sequences) on 64 H100 80 GB,
256 sequences a step, micro-batches of one."""


def _bytes_per_parameter(d: int, zero: int) -> float:
    parallel = Parallel(dp=d, zero=zero)  # Megatron's bytes: 2, 4, 4 + 4 + 4
    return sum(static_bytes(1_000_000, parallel).values()) / 1_000_000


@exercise(
    "8.7",
    "Derive the bytes one GPU keeps per parameter of its model part (weights, gradients and "
    "Adam's state) under ZeRO stage 2 with d data-parallel replicas, with Megatron's mixed "
    "precision: bf16 weights (2 bytes), fp32 gradients (4), fp32 master weights and two "
    "fp32 Adam moments (4 each). A sympy expression in d.",
    kind="derive",
    solution="Stage 2 shards the gradients and the optimizer state over the d replicas and "
    "keeps the weights whole: 2 + (4 + 4 + 4 + 4)/d = `2 + 16/d`. For comparison: no ZeRO, "
    "18; stage 1 (Megatron's distributed optimizer), 6 + 12/d; stage 3 (FSDP), 18/d. With "
    "d = 128, as Llama 3 405B ran, 2.125 bytes a parameter instead of 18.",
    answer_name="answer_7",
)
def _zero_two_bytes(answer):
    if not isinstance(answer, sp.Expr):
        return wrong(f"this exercise wants a sympy expression in d, got {shown(answer)}.")
    unknown = sorted(str(x) for x in answer.free_symbols if str(x) != "d")
    if unknown:
        return wrong(f"the expression uses {', '.join(unknown)}; write it in d only.")
    for d in REPLICAS:
        value = answer.subs({x: d for x in answer.free_symbols})
        truth = _bytes_per_parameter(d, 2)
        if not value.is_number or abs(float(value) - truth) > 1e-9 * truth:
            for stage, what in ((1, "ZeRO-1's"), (3, "ZeRO-3's (FSDP)"), (0, "no ZeRO's")):
                if value.is_number and abs(float(value) - _bytes_per_parameter(d, stage)) < 1e-9:
                    return wrong(
                        f"at d = {d} that gives {float(value):g} bytes: {what} count; stage 2 "
                        f"keeps {truth:g}.",
                        "stage 2 shards the gradients as well as the optimizer state, not "
                        "the weights.",
                    )
            return wrong(
                f"at d = {d} the expression gives {value}; the memory model counts {truth:g} "
                "bytes a parameter.",
                "what does each of the d replicas keep whole, and what only 1/d of?",
            )
    return right(
        f"it equals the memory model's count at d = {', '.join(map(str, REPLICAS))}: "
        f"{_bytes_per_parameter(128, 2):g} bytes a parameter at d = 128."
    )


def _mixtral_plan(tp: int, pp: int, ep: int):
    job = MIXTRAL_JOB
    return size(
        model_card("mixtral-8x7b").shape(),
        job["global_batch"],
        Hardware(job["gpus"]),
        tp=tp,
        pp=pp,
        ep=ep,
        microbatch_size=job["microbatch_size"],
        top=1,
    )


@exercise(
    "8.8",
    "Construct a layout (tp, pp, ep) for Mixtral 8x7B on 64 H100 80 GB GPUs (its card, "
    "256 sequences of 32,768 tokens a step, micro-batches of one) under which `size` finds "
    "a plan that fits, while the same tp and pp with ep = 1 fit nothing.",
    kind="construct",
    solution="Expert parallelism helps where the experts' weights are what overflows: few "
    "GPUs a replica, so each holds many experts. With tp = 2 and pp = 4 (dp = 8) each GPU "
    "keeps a quarter of its eight layers' eight experts, and the static state alone is "
    "about 106 GB; with ep = 8 each keeps one expert a layer and the plan fits. "
    "`(2, 4, 8)`; (4, 2, 8) works too.",
    answer_name="answer_8",
)
def _expert_layout(answer):
    if isinstance(answer, str | bytes) or not hasattr(answer, "__len__") or len(answer) != 3:
        return wrong(f"this exercise wants three numbers (tp, pp, ep), got {shown(answer)}.")
    tp, pp, ep = (integer(x, "three whole numbers (tp, pp, ep)", minimum=1) for x in answer)
    gpus = MIXTRAL_JOB["gpus"]
    if gpus % (tp * pp):
        return wrong(f"tp * pp = {tp * pp} must divide the {gpus} GPUs.")
    dp = gpus // (tp * pp)
    if ep == 1:
        return wrong("ep = 1 is the layout to beat: choose ep > 1.")
    if dp % ep or 8 % ep:
        return wrong(
            f"ep = {ep} must divide dp = {dp} and the 8 experts (it runs inside the "
            "data-parallel group)."
        )
    try:
        with_ep = _mixtral_plan(tp, pp, ep)
    except ValueError as error:
        return wrong(f"size refuses it: {error}")
    if with_ep.best is None:
        return wrong(
            f"nothing fits with ({tp}, {pp}, {ep}): {with_ep.closest().reason}.",
            "more GPUs a replica, or a larger ep.",
        )
    without = _mixtral_plan(tp, pp, 1)
    if without.best is not None:
        return wrong(
            f"with tp = {tp}, pp = {pp} and ep = 1 a plan fits already "
            f"({without.best.memory_bytes / 1e9:.1f} GB): expert parallelism is not needed.",
            "fewer GPUs a replica, so that each holds more of the experts.",
        )
    return right(
        f"with ep = {ep}: {with_ep.best.config.schedule_name}, "
        f"{with_ep.best.memory_bytes / 1e9:.1f} GB on the fullest GPU; without: "
        f"{without.closest().reason}."
    )
