"""How fast zb-auto builds a schedule, and how small a bubble it reaches against ZB-H1/ZB-H2.

Run: ``.venv/bin/python benchmarks/bench_zb_auto.py [--repeat N]`` (not a test; not run in
CI; no timing is asserted anywhere). Prints:

1. medians of the wall and CPU time of ``zb_auto(p, m, costs, K)`` for p = 8, m = 32;
   p = 16, m = 128; p = 32, m = 256 (24,576 actions; goal 2 s), at K = p and K = 2p,
   under the Zero Bubble paper's profiled costs for the 28.3B model (Table 9; its B is our
   I), with a waiting W holding its whole activation (w = 1) and the paper's share
   w = M_W / M_B = 0.4324 (``Costs.w_memory``). On a shared machine the CPU time is the
   steadier of the two;
2. the Zero Bubble paper's bubble rate (1 - most compute of a rank / longest rank span,
   ``Timeline.zb_bubble_rate``) of ZB-H1, ZB-H2 and zb-auto at K = p, 2p-1 and 2p on a
   few cost sets, next to the lowest rate any schedule within K can reach
   (:func:`ppbook.schedules.auto.zb_span_lower_bound`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from ppbook.costs import Costs
from ppbook.schedules import zb_auto, zb_h1, zb_h2
from ppbook.schedules.auto import zb_span_lower_bound
from ppbook.simulate import simulate

GOAL_S = 2.0
"""Build time goal for p = 32, m = 256, in seconds (issue 8)."""

PAPER_28B = Costs(F=10.402, I=10.248, W=7.698, comm=0.460)
"""Table 9 of arXiv:2401.10241, 28.3B model, p = 32, m = 256 (milliseconds)."""
SHARE_28B = 131072 / 303104
"""M_W / M_B = 32h / (34h + 5as) for the 28.3B model (h 6144, a 48, s 1024): 0.4324."""

COST_SETS = [
    ("F = I = W = 1, no transfer", 8, 32, Costs(F=1, I=1, W=1)),
    ("paper 1.5B (Table 9)", 8, 32, Costs(F=18.513, I=18.086, W=9.331, comm=0.626)),
    ("paper 14.6B (Table 9)", 16, 64, Costs(F=11.307, I=11.254, W=8.101, comm=0.379)),
    ("paper 28.3B (Table 9)", 32, 256, PAPER_28B),
    ("paper 28.3B, w = 0.4324", 32, 256, replace(PAPER_28B, w_memory=SHARE_28B)),
    ("W = 2F, I = F/2", 8, 32, Costs(F=1, I=0.5, W=2, comm=0.05)),
    (
        "uneven stages",
        8,
        32,
        Costs(
            F=[1.0, 1.2, 0.9, 1.1, 1.0, 1.3, 0.8, 1.0],
            I=[1.1, 1.0, 1.2, 0.9, 1.0, 1.1, 1.0, 1.4],
            W=[0.5, 0.7, 0.6, 0.8, 0.5, 0.6, 0.9, 0.4],
            comm=0.03,
        ),
    ),
]


def build_times(p: int, m: int, limit: int, costs: Costs, repeat: int) -> tuple[float, float]:
    """Medians of wall and CPU seconds of ``zb_auto(p, m, costs, limit)``."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        zb_auto(p, m, costs, limit)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def rate(schedule, costs: Costs) -> float:
    return simulate(schedule, costs).zb_bubble_rate


def lowest_rate(p: int, m: int, costs: Costs, limit: int) -> float:
    """1 - most compute of a rank / the lower bound on the longest span."""
    work = costs.per_stage(p)
    compute = max(m * (work["F"][r] + work["I"][r] + work["W"][r]) for r in range(p))
    return 1 - compute / zb_span_lower_bound(p, m, costs, limit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per median (default 5)")
    args = parser.parse_args()

    print("1. build time of zb_auto (paper's 28.3B costs), median of", args.repeat, "runs")
    head = f"{'p':>4} {'m':>5} {'K':>4} {'w':>7} {'actions':>8} {'wall s':>8} {'CPU s':>8}  goal"
    print(head)
    for p, m in ((8, 32), (16, 128), (32, 256)):
        for limit in (p, 2 * p):
            for share in (1.0, SHARE_28B):
                costs = replace(PAPER_28B, w_memory=share)
                wall, cpu = build_times(p, m, limit, costs, args.repeat)
                goal = f"{GOAL_S:g} s: {'met' if cpu <= GOAL_S else 'MISSED'}" if p == 32 else ""
                line = f"{p:>4} {m:>5} {limit:>4} {share:>7.4f} {3 * p * m:>8}"
                print(f"{line} {wall:>8.3f} {cpu:>8.3f}  {goal}")

    print("\n2. the Zero Bubble paper's bubble rate (1 - compute / longest rank span);")
    print("   'bound': the lowest any schedule within K activations per rank can reach")
    head = f"{'costs':<28} {'p':>3} {'m':>4} {'ZB-H1':>7} {'ZB-H2':>7}"
    for name in ("p", "2p-1", "2p"):
        head += f" {'K=' + name:>7} {'bound':>7}"
    print(head)
    for label, p, m, costs in COST_SETS:
        line = f"{label:<28} {p:>3} {m:>4} {rate(zb_h1(p, m), costs):>7.4f}"
        line += f" {rate(zb_h2(p, m), costs):>7.4f}" if m >= 2 * p - 1 else f" {'-':>7}"
        for limit in (p, 2 * p - 1, 2 * p):
            auto = rate(zb_auto(p, m, costs, limit), costs)
            line += f" {auto:>7.4f} {lowest_rate(p, m, costs, limit):>7.4f}"
        print(line)


if __name__ == "__main__":
    main()
