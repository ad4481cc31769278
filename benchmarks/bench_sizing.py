"""How fast ``ppbook size`` searches (issue 18's goals, and the 1T search of issue 9).

Run: ``.venv/bin/python benchmarks/bench_sizing.py [--top K]`` (not a test; no timing is
asserted anywhere). Each search starts with empty caches (a fresh process would), and
prints its wall and CPU time, the configurations considered (fitting or rejected), how
many were simulated and the best option:

1. Llama 3 405B (its card, 8,192-token sequences) on 16,384 H100 80 GB with (t, p) fixed
   at its published (8, 16), 2,048 sequences a step, ZeRO-2, flash attention and sequence
   parallelism (the defaults of ``ppbook size``);
2. DeepSeek-V3 (its card and memory choices: BF16 Adam moments, recomputed norms and MLA
   up-projections) on 2,048 H800, 15,360 sequences of 4,096 tokens, ZeRO-1: a full search
   over tp, pp, ep, schedules, b and recomputation;
3. a full search for Llama 3 70B (its card) on 64 H100 SXM GPUs (8 per node), global
   batch 512;
4. Megatron-LM's 1T model (Table 1 of arXiv:2104.04473: 128 layers of 25,600, 160 heads)
   on its 3,072 A100 80 GB GPUs with its global batch of 3,072 (standard attention, no
   sequence parallelism, as in 2021).

Goal for each: 10 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import time

from ppbook.cost_model import layer_time, search_costs, search_step, sizing_search, step_work
from ppbook.cost_model.model_cards import model_card
from ppbook.cost_model.model_shape import ModelShape
from ppbook.cost_model.search_costs import A100_SXM_80GB, Hardware
from ppbook.cost_model.sizing_search import size
from ppbook.schedules import v_shape

GOAL_S = 10.0
"""Search time goal, in seconds (issue 18: each answer under 10 s)."""

DEEPSEEK = model_card("deepseek-v3")

SEARCHES = [
    (
        "Llama 3 405B on 16,384 H100, (t, p) = (8, 16)",
        model_card("llama3-405b").shape(),
        2048,
        Hardware(16384),
        {"tp": 8, "pp": 16, "zero": 2},
    ),
    (
        "DeepSeek-V3 on 2,048 H800, full search",
        DEEPSEEK.shape(),
        15360,
        Hardware(2048, gpu_type="h800"),
        {"zero": 1, **DEEPSEEK.memory_choices},
    ),
    (
        "Llama 3 70B on 64 H100, full search",
        model_card("llama3-70b").shape(),
        512,
        Hardware(64),
        {},
    ),
    (
        "Megatron 1T on 3072 A100",
        ModelShape(128, 25600, 160, 51200, 2048),
        3072,
        Hardware(3072, **A100_SXM_80GB),
        {"attention": "standard", "sequence_parallel": False},
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10, help="options ranked (0: all)")
    args = parser.parse_args()
    for name, shape, batch, hardware, fixed in SEARCHES:
        for module in (
            sizing_search,
            search_costs,
            search_step,
            layer_time,
            step_work,
            v_shape,
        ):  # every cache, the V schedules' builds too
            for value in vars(module).values():
                if hasattr(value, "cache_clear"):
                    value.cache_clear()
        wall, cpu = time.perf_counter(), time.process_time()
        result = size(shape, batch, hardware, top=args.top or None, **fixed)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        fitting = len(result.ranked) + result.not_ranked
        simulated = search_costs.simulated.cache_info().misses
        print(f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU (goal {GOAL_S:g} s)")
        print(
            f"  {fitting + len(result.rejected)} configurations: {fitting} fit, "
            f"{len(result.rejected)} rejected; {simulated} simulations"
        )
        best = result.best
        if best is None:
            closest = result.closest()
            print(f"  nothing fits; closest: {closest.where if closest else None}")
            continue
        c = best.config
        print(
            f"  best: tp {c.tp}, pp {c.pp}, dp {c.dp}, ep {c.ep}, {c.schedule_name}"
            f", b = {c.microbatch_size}, m = {c.num_microbatches}, recompute "
            f"{c.recompute}: step {best.step_time_s:.2f} s, bubble f {best.bubble_fraction:.3f},"
            f" {best.memory_bytes / 1e9:.1f} GB on the fullest GPU"
        )


if __name__ == "__main__":
    main()
