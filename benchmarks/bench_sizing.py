"""How fast ``ppbook size`` searches: the 70B-on-64-GPUs example and a 1T search.

Run: ``.venv/bin/python benchmarks/bench_sizing.py [--top K]`` (not a test; no timing is
asserted anywhere). Each search starts with empty caches (a fresh process would), and
prints its wall and CPU time, the configurations considered (fitting or rejected), how
many were simulated and the best option:

1. a 70B-class model (Llama 2 70B's 80 layers of 8192, MLP 4h: 65B parameters; vocabulary
   32,000, sequence 4096) on 64 H100 SXM GPUs (8 per node), global batch 512;
2. Megatron-LM's 1T model (Table 1 of arXiv:2104.04473: 128 layers of 25,600, 160 heads)
   on its 3,072 A100 80 GB GPUs with its global batch of 3,072.

Goal for each: 10 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import time

from ppbook.cost_model import layer_time, search_costs, search_step, sizing_search, step_work
from ppbook.cost_model.memory_bytes import ModelShape
from ppbook.cost_model.search_costs import A100_SXM_80GB, Hardware
from ppbook.cost_model.sizing_search import size

GOAL_S = 10.0
"""Search time goal, in seconds (issue 9: a search over a few thousand configurations)."""

SEARCHES = [
    (
        "70B class on 64 H100",
        ModelShape(80, 8192, 64, 32000, 4096, tied_embeddings=False, position_embeddings=False),
        512,
        Hardware(64),
    ),
    (
        "Megatron 1T on 3072 A100",
        ModelShape(128, 25600, 160, 51200, 2048),
        3072,
        Hardware(3072, **A100_SXM_80GB),
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10, help="options ranked (0: all)")
    args = parser.parse_args()
    for name, shape, batch, hardware in SEARCHES:
        for module in (
            sizing_search,
            search_costs,
            search_step,
            layer_time,
            step_work,
        ):  # every cache
            for value in vars(module).values():
                if hasattr(value, "cache_clear"):
                    value.cache_clear()
        wall, cpu = time.perf_counter(), time.process_time()
        result = size(shape, batch, hardware, top=args.top or None)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        fitting = len(result.ranked) + result.not_ranked
        simulated = search_costs.simulated.cache_info().misses
        best = result.best
        print(f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU (goal {GOAL_S:g} s)")
        print(
            f"  {fitting + len(result.rejected)} configurations: {fitting} fit, "
            f"{len(result.rejected)} rejected; {simulated} simulations"
        )
        c = best.config
        print(
            f"  best: tp {c.tp}, pp {c.pp}, dp {c.dp}, {c.schedule_name}"
            f", b = {c.microbatch_size}, m = {c.num_microbatches}, recompute "
            f"{c.recompute}: step {best.step_time_s:.2f} s, bubble f {best.bubble_fraction:.3f},"
            f" {best.memory_bytes / 1e9:.1f} GB on the fullest GPU"
        )


if __name__ == "__main__":
    main()
