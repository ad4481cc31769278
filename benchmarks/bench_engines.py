"""Benchmark: ppbook's runtime against PyTorch's engine on the same model and schedule.

For GPipe, 1F1B, interleaved 1F1B and ZB-H1 on 2 CPU processes (one torch thread each,
gloo on loopback), runs the same MLP, micro-batches and schedule on both engines
(``RunConfig(engine="ppbook")`` and ``engine="torch"``: :mod:`ppbook.runtime.torch_engine`)
in one set of processes, in rounds: each round runs every schedule on ppbook's runtime
and right after on PyTorch's, so that a pair sees the same load on a shared machine.
For each schedule it prints:

- the median step time (makespan, first action's start to last action's end) of the
  steps after each run's warm-up step, per engine, and ppbook's over PyTorch's: the
  median over the rounds of each pair's ratio of medians (target: 1.10 or below, ppbook's
  runtime within 10 % of PyTorch's engine, or faster);
- where the time goes: the compute of a step (the mean over ranks of the time spent in
  F, B, I, W), ppbook's over PyTorch's in the same way, and the idle share of each
  (bubble fraction f = idle / total). Equal compute with a different step time points at
  waiting (communication, the engine's own work between actions); different compute
  points at the stages' forward and backward code.

    .venv/bin/python benchmarks/bench_engines.py --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys

from ppbook.runtime.config import RunConfig
from ppbook.runtime.launch import launch_many

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


def busy(timeline) -> float:
    """Compute time of one step, in seconds: the mean over ranks of their busy time."""
    return timeline.total_busy / timeline.num_ranks


def paired(ours: list, theirs: list, measure) -> float:
    """The median over rounds of ours over theirs, each the median of ``measure`` over a
    run's steps: both runs of a round saw the same machine."""
    ratios = [
        statistics.median(map(measure, a)) / statistics.median(map(measure, b))
        for a, b in zip(ours, theirs, strict=True)
    ]
    return statistics.median(ratios)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="runs per schedule and engine")
    parser.add_argument("--steps", type=int, default=4, help="steps per run (first warms up)")
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--blocks", type=int, default=4, help="MLP blocks in all")
    parser.add_argument("--microbatch-size", type=int, default=64)
    args = parser.parse_args(argv)

    configs = [
        config(args, name, engine)
        for _ in range(args.rounds)
        for name in SCHEDULES
        for engine in ENGINES  # a pair: ppbook's runtime, then PyTorch's engine
    ]
    runs: dict[tuple[str, str], list] = {}  # (schedule, engine) -> each round's timelines
    for c, result in zip(configs, launch_many(configs), strict=True):
        runs.setdefault((c.schedule, c.engine), []).append(result.timelines[1:])

    print(
        f"p = {NPROC} processes x 1 thread, gloo on loopback; MLP of {args.blocks} blocks "
        f"(Linear {args.hidden}->{4 * args.hidden}, Tanh, Linear back), m = "
        f"{args.microbatches} micro-batches of {args.microbatch_size}, float32; {args.rounds} "
        f"rounds, each schedule on both engines per round, {args.steps - 1} steps per run "
        "after a warm-up step; medians"
    )
    print(
        f"{'schedule':16} {'ppbook ms':>9} {'torch ms':>9} {'ppbook/torch':>12} "
        f"{'compute pp/pt':>13} {'f pp/pt':>11}  ok"
    )
    failures = 0
    for name in SCHEDULES:
        ours, theirs = runs[(name, "ppbook")], runs[(name, "torch")]
        step = [statistics.median(t.makespan for r in rs for t in r) for rs in (ours, theirs)]
        ratio = paired(ours, theirs, lambda t: t.makespan)
        compute = paired(ours, theirs, busy)
        idle = [
            statistics.median(t.bubble_fraction for r in rs for t in r) for rs in (ours, theirs)
        ]
        ok = ratio <= TARGET
        failures += not ok
        print(
            f"{name:16} {step[0] * 1e3:9.2f} {step[1] * 1e3:9.2f} {ratio:12.3f} "
            f"{compute:13.3f} {idle[0]:5.3f}/{idle[1]:<5.3f}  {'yes' if ok else 'NO'}"
        )
    print("pp: ppbook's runtime, pt: PyTorch's engine; compute: F, B, I, W time per rank and step")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
