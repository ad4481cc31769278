"""The jobs behind chapter 8's exercises and the searches that answer them
(``notebooks/08_sizing.ipynb``, :mod:`ppbook.exercises.ch8`).

Each search is the package's own: :func:`ppbook.cost_model.sizing_search.size` for a split, a
recomputation mode or a micro-batch size, the simulator with
:func:`ppbook.cost_model.flops.stage_costs` for a layer split. They are cached, so that a reader who
checks several answers waits once. Sizes in GB = 10^9 bytes, times in seconds.
"""

from __future__ import annotations

from functools import lru_cache

from ppbook.cost_model.flops import part_flops, stage_costs
from ppbook.cost_model.memory_bytes import ModelShape, Parallel
from ppbook.cost_model.search_costs import A100_SXM_80GB, MODEL_CARDS, Hardware
from ppbook.cost_model.search_result import SizingResult
from ppbook.cost_model.sizing_search import STACK_2021, size
from ppbook.schedules import one_f_one_b
from ppbook.simulate import simulate

MODEL_70B = MODEL_CARDS["70B class (Llama-2-70B's 80 x 8192, MLP 4h: 65B)"]
"""The chapter's 70B-class model (the sizing widget's card): 80 layers of width 8192, 64
heads, an MLP of 4h, a vocabulary of 32,000, sequences of 4096, an untied output head and
no learned positions; 65.0 billion parameters by ppbook's count."""

GPT3 = MODEL_CARDS["GPT-3 175B"]
"""GPT-3 175B's shape (Brown et al. 2020, Table 2.1) with Megatron-LM's vocabulary."""

WIDE_VOCAB = ModelShape(
    32, 4096, 32, 256000, 4096, tied_embeddings=False, position_embeddings=False
)
"""Exercise 8.3's model: 32 layers of 4096 with a vocabulary of 256,000 (a what-if)."""

SPLIT = {"p": 4, "m": 8, "flops_per_second": 400e12}
"""Exercise 8.3's pipeline: 1F1B, p = 4, m = 8, b = 1, selective recomputation, one
device per stage sustaining 400 TFLOP/s (an assumption)."""

SMALL_GPU = Hardware(64, gpu_memory_gb=64)
"""Exercises 8.4 and 8.5's cluster: 64 H100-class GPUs (the defaults) of only 64 GB."""

CHOICE_BATCH = 512
"""The global batch of exercises 8.4 to 8.6 (samples of 4096 tokens)."""

GPT3_JOB = {"global_batch": 256, "hardware": Hardware(64, **A100_SXM_80GB)}
"""Exercise 8.2's job: GPT-3 175B on 64 A100 80 GB (8 a node), global batch 256. The
exercises' jobs run as Megatron-LM's 2021 runs did
(:data:`ppbook.cost_model.sizing_search.STACK_2021`: 16 bytes a parameter, standard
attention, no sequence parallelism)."""


@lru_cache(maxsize=32)
def split_result(tp: int, pp: int) -> SizingResult:
    """Exercise 8.2: the fastest option of GPT-3's job with ``tp`` and ``pp`` fixed."""
    job = GPT3_JOB["global_batch"], GPT3_JOB["hardware"]
    return size(GPT3, *job, tp=tp, pp=pp, top=1, **STACK_2021)


@lru_cache(maxsize=1)
def fastest_split() -> SizingResult:
    """Exercise 8.2: the fastest option of GPT-3's job over every split."""
    return size(GPT3, GPT3_JOB["global_batch"], GPT3_JOB["hardware"], top=1, **STACK_2021)


def split_step(layers_per_part) -> float:
    """Exercise 8.3: the simulated step (s) of 1F1B with ``layers_per_part`` of WIDE_VOCAB."""
    schedule = one_f_one_b(SPLIT["p"], SPLIT["m"])
    costs = stage_costs(
        schedule,
        WIDE_VOCAB,
        Parallel(recompute="selective"),
        SPLIT["flops_per_second"],
        list(layers_per_part),
    )
    return simulate(schedule, costs).makespan


def stage_work(layers_per_part) -> list[float]:
    """Exercise 8.3: each stage's F + B of one micro-batch, in seconds."""
    flops = part_flops(WIDE_VOCAB, Parallel(recompute="selective"), list(layers_per_part))
    return [(x["F"] + x["B"]) / SPLIT["flops_per_second"] for x in flops]


def _splits(total: int, parts: int):
    if parts == 1:
        yield (total,)
        return
    for first in range(1, total - parts + 2):
        for rest in _splits(total - first, parts - 1):
            yield (first, *rest)


@lru_cache(maxsize=1)
def shortest_split() -> tuple[float, tuple[int, ...]]:
    """Exercise 8.3: the shortest simulated step over every split with a layer per stage.

    Splits are simulated in order of a lower bound, m times the slowest stage's F + B
    (that stage runs all of them), until the bound passes the shortest step found."""
    m = SPLIT["m"]
    bounded = sorted((m * max(stage_work(s)), s) for s in _splits(WIDE_VOCAB.layers, SPLIT["p"]))
    best = (float("inf"), ())
    for bound, split in bounded:
        if bound >= best[0]:
            break
        best = min(best, (split_step(split), split))
    return best


@lru_cache(maxsize=16)
def small_gpu_plan(recompute: str, microbatch_size: int) -> SizingResult:
    """Exercises 8.4 and 8.5: the 70B model on :data:`SMALL_GPU` with tp = 4, pp = 8
    (dp = 2) under 1F1B, the given recomputation and micro-batch size."""
    return size(
        MODEL_70B,
        CHOICE_BATCH,
        SMALL_GPU,
        tp=4,
        pp=8,
        microbatch_size=microbatch_size,
        recompute=recompute,
        schedules=("1f1b",),
        top=1,
        **STACK_2021,
    )
