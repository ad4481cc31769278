"""Benchmark: ppbook's runtime against PyTorch's engine on the same model and schedule.

For GPipe, 1F1B, interleaved 1F1B and ZB-H1 on 2 CPU processes (one torch thread each,
gloo on loopback), runs the same MLP, micro-batches and schedule on both engines
(``RunConfig(engine="ppbook")`` and ``engine="torch"``: :mod:`ppbook.runtime.torch_engine`),
alternating ppbook, torch, ppbook, torch, ... in one set of processes so that both see
the same machine, and prints for each schedule:

- the median step time (makespan, first action's start to last action's end) of every
  step after each run's warm-up step, per engine, and ppbook's over PyTorch's (target:
  1.10 or below: ppbook's runtime within 10 % of PyTorch's engine, or faster);
- where the time goes: the mean time of a forward (F), a backward (B, or I + W for ZB-H1)
  on each engine, and the idle share of the step (the bubble fraction f = idle / total).
  Equal compute with different idle time points at communication and scheduling; different
  compute points at the stage's forward and backward code.

    .venv/bin/python benchmarks/bench_engines.py --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys

from ppbook.runtime.config import RunConfig
from ppbook.runtime.launch import launch_many
from ppbook.runtime.measure import stage_times

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1")
ENGINES = ("ppbook", "torch")
NPROC = 2
TARGET = 1.10


def config(args: argparse.Namespace, schedule: str, engine: str) -> RunConfig:
    return RunConfig(
        schedule=schedule,
        nproc=NPROC,
        num_microbatches=args.microbatches,
        hidden=args.hidden,
        num_blocks=args.blocks,
        microbatch_size=args.microbatch_size,
        steps=args.steps,
        num_threads=1,
        timeout=120.0,
        engine=engine,
    )


def mean_ms(times: dict, kinds: tuple[str, ...]) -> float:
    """Mean duration in ms of one action of ``kinds`` (summed over kinds: I + W)."""
    total = 0.0
    for kind in kinds:
        values = [t for per_stage in times[kind].values() for t in per_stage]
        total += statistics.fmean(values) if values else 0.0
    return total * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs per engine, alternating")
    parser.add_argument("--steps", type=int, default=6, help="steps per run (first warms up)")
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--blocks", type=int, default=4, help="MLP blocks in all")
    parser.add_argument("--microbatch-size", type=int, default=64)
    args = parser.parse_args(argv)

    configs = [
        config(args, name, engine)
        for name in SCHEDULES
        for _ in range(args.rounds)
        for engine in ENGINES  # alternating: ppbook, torch, ppbook, torch, ...
    ]
    steps: dict[tuple[str, str], list[float]] = {}
    timelines: dict[tuple[str, str], list] = {}
    for c, result in zip(configs, launch_many(configs), strict=True):
        key = (c.schedule, c.engine)
        steps.setdefault(key, []).extend(result.step_times[1:])  # after the warm-up step
        timelines.setdefault(key, []).extend(result.timelines[1:])

    print(
        f"p = {NPROC} processes x 1 thread, gloo on loopback; MLP of {args.blocks} blocks "
        f"(Linear {args.hidden}->{4 * args.hidden}, Tanh, Linear back), m = "
        f"{args.microbatches} micro-batches of {args.microbatch_size}, float32; {args.rounds} "
        f"runs per engine, alternating, {args.steps - 1} steps each after a warm-up step; "
        "medians"
    )
    print(
        f"{'schedule':16} {'ppbook ms':>9} {'torch ms':>9} {'ppbook/torch':>12} "
        f"{'F ms pp/pt':>11} {'B ms pp/pt':>11} {'f pp/pt':>11}  ok"
    )
    failures = 0
    for name in SCHEDULES:
        ours, theirs = (statistics.median(steps[(name, e)]) for e in ENGINES)
        ratio = ours / theirs
        backward = ("I", "W") if name.startswith("zb") else ("B",)
        cells = []
        for kinds in (("F",), backward):
            pair = [mean_ms(stage_times(timelines[(name, e)]), kinds) for e in ENGINES]
            cells.append(f"{pair[0]:5.2f}/{pair[1]:<5.2f}")
        idle = [statistics.median(t.bubble_fraction for t in timelines[(name, e)]) for e in ENGINES]
        ok = ratio <= TARGET
        failures += not ok
        print(
            f"{name:16} {ours * 1e3:9.2f} {theirs * 1e3:9.2f} {ratio:12.3f} "
            f"{cells[0]:>11} {cells[1]:>11} {idle[0]:5.3f}/{idle[1]:<5.3f}  "
            f"{'yes' if ok else 'NO'}"
        )
    print("pp: ppbook's runtime, pt: PyTorch's engine; B for ZB-H1 is I + W; f = idle / total")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
