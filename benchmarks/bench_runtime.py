"""Benchmark: does the real pipeline run as fast as the simulator and the formula say?

Runs GPipe and 1F1B on 2 CPU processes (one torch thread each) for m in {2, 4, 8, 16}
with an MLP large enough that compute dominates messaging, and prints for each:

- the measured step time (median of the steps after the warm-up step) against the
  simulated one (:func:`ppbook.runtime.measure.compare`: the same schedule simulated under
  the costs measured in the run); target: within 15%;
- the speed-up over one process running the whole model on the same m micro-batches
  (the same runtime on one rank, one thread), against the ideal p*m/(m+p-1) of GPipe and
  1F1B (Huang et al. 2019, arXiv:1811.06965; REFERENCES.md); target: within 15%.

The machine may be shared, so the whole benchmark runs ``--repeat`` times and keeps the
fastest repetition of each pipeline run and of each one-process run (best of N).

    .venv/bin/python benchmarks/bench_runtime.py --repeat 3
"""

from __future__ import annotations

import argparse
import sys

from ppbook.runtime.config import RunConfig
from ppbook.runtime.launch import launch_many
from ppbook.runtime.measure import compare

SCHEDULES = ("gpipe", "1f1b")
MICROBATCHES = (2, 4, 8, 16)
NPROC = 2
TOLERANCE = 0.15


def config(args: argparse.Namespace, schedule: str, nproc: int, m: int) -> RunConfig:
    return RunConfig(
        schedule=schedule,
        nproc=nproc,
        num_microbatches=m,
        hidden=args.hidden,
        num_blocks=args.blocks,
        microbatch_size=args.microbatch_size,
        steps=args.steps,
        num_threads=1,
        timeout=120.0,
    )


def measure_once(args: argparse.Namespace) -> dict[tuple[str, int], dict]:
    """One repetition: every pipeline run in one launch, then the one-process runs.

    The one-process baseline is the same runtime on one rank (the whole model as a single
    stage, micro-batch after micro-batch): the same code, process and allocator.
    """
    pipelines = [config(args, name, NPROC, m) for name in SCHEDULES for m in MICROBATCHES]
    singles = [config(args, "gpipe", 1, m) for m in MICROBATCHES]
    single_time = {
        c.num_microbatches: r.timeline.makespan
        for c, r in zip(singles, launch_many(singles), strict=True)
    }
    rows = {}
    for c, result in zip(pipelines, launch_many(pipelines), strict=True):
        comparison = compare(result)
        rows[(c.schedule, c.num_microbatches)] = {
            "measured": comparison.measured.makespan,
            "simulated": comparison.simulated.makespan,
            "f_measured": comparison.measured.bubble_fraction,
            "f_simulated": comparison.simulated.bubble_fraction,
            "transfer": comparison.costs.transfer,
            "single": single_time[c.num_microbatches],
        }
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions; best of N per row")
    parser.add_argument("--steps", type=int, default=8, help="steps per run (first warms up)")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--blocks", type=int, default=6, help="MLP blocks in all (3 per stage)")
    parser.add_argument("--microbatch-size", type=int, default=64)
    args = parser.parse_args(argv)

    best: dict[tuple[str, int], dict] = {}
    best_single: dict[int, float] = {}
    for _ in range(args.repeat):
        for key, row in measure_once(args).items():
            if key not in best or row["measured"] < best[key]["measured"]:
                best[key] = row
            m = key[1]
            best_single[m] = min(best_single.get(m, float("inf")), row["single"])

    print(
        f"p = {NPROC} processes x 1 thread; MLP of {args.blocks} blocks "
        f"(Linear {args.hidden}->{4 * args.hidden}, Tanh, Linear back), micro-batch "
        f"{args.microbatch_size}, float32, gloo on loopback; best of {args.repeat} "
        f"repetitions, median of {args.steps - 1} steps after a warm-up step"
    )
    header = (
        f"{'schedule':8} {'m':>3} {'measured ms':>11} {'simulated ms':>12} {'err':>6} "
        f"{'1-proc ms':>9} {'speed-up':>8} {'ideal':>6} {'vs ideal':>8} "
        f"{'f meas':>6} {'f sim':>6} {'xfer ms':>7}  ok"
    )
    print(header)
    failures = 0
    for (name, m), row in sorted(best.items(), key=lambda kv: (kv[0][0] != "gpipe", kv[0][1])):
        error = row["measured"] / row["simulated"] - 1
        speedup = best_single[m] / row["measured"]
        ideal = NPROC * m / (m + NPROC - 1)
        versus = speedup / ideal - 1
        ok = abs(error) <= TOLERANCE and abs(versus) <= TOLERANCE
        failures += not ok
        print(
            f"{name:8} {m:3d} {row['measured'] * 1e3:11.1f} {row['simulated'] * 1e3:12.1f} "
            f"{error:+6.1%} {best_single[m] * 1e3:9.1f} {speedup:8.2f} {ideal:6.2f} "
            f"{versus:+8.1%} {row['f_measured']:6.3f} {row['f_simulated']:6.3f} "
            f"{row['transfer'] * 1e3:7.2f}  {'yes' if ok else 'NO'}"
        )
    print("f: bubble fraction = idle / total time; xfer: transfer time the simulator used")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
