"""How fast ppbook simulates schedules, as a user runs it, and how fast the explorer redraws.

Run: ``.venv/bin/python benchmarks/bench_simulator.py`` (not a test; not run in CI; no
timing is asserted anywhere). Prints medians of several runs, each next to its goal:

1. the command a user runs, ``ppbook simulate --schedule interleaved-1f1b --stages P
   --chunks 2 --microbatches M --json``, in a fresh process, minus the start-up of
   ``python -c "import ppbook.cli"``: p = 32, m = 256 (32,768 actions; goal 0.1 s) and
   p = 64, m = 1024 (262,144 actions; goal 1 s);
2. where that time goes, in process: build, validate, simulate, metrics, JSON;
3. a series in the number of actions: the time per action should stay about constant;
4. the schedule explorer's update (simulate + redraw + PNG), p = 16, m = 64 (goal
   150 ms);
5. PyTorch's own construction of ScheduleInterleaved1F1B's order for p = 32, m = 256, with
   stand-in stage objects (no process group needed), and whether its order equals ours;
6. the builders added for issue 18 (interleaved-1f1b at m not a multiple of p,
   interleaved-zb, v-half, v-min), build and build + simulate at p = 16, m = 128 (goal
   0.25 s each for build + simulate: what one candidate of ``ppbook size`` costs), and
   V-Half and V-Min built at p = 64, m = 1024 (393,216 actions; goal 2 s each). Builders
   that keep what they built (V-Half, V-Min) are timed from empty caches, as a fresh
   process would build.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import types
from functools import partial
from pathlib import Path

from ppbook.costs import Costs
from ppbook.schedules import SCHEDULES, build
from ppbook.simulate import simulate
from ppbook.validate import validate

COMMAND_GOALS = ((32, 2, 256, 0.1), (64, 2, 1024, 1.0))
"""(p, v, m, goal in seconds beyond start-up) for ``ppbook simulate --json``."""

NEW_BUILDERS = (
    ("interleaved-1f1b", 16, 128, 2),
    ("interleaved-1f1b", 16, 136, 2),  # 8 rounds of 17: not a multiple of p
    ("interleaved-zb", 16, 128, 2),
    ("interleaved-zb", 16, 128, 4),
    ("v-half", 16, 128, None),
    ("v-min", 16, 128, None),
)
"""(schedule, p, m, v) timed by :func:`new_builders`; goal 0.25 s for build + simulate."""

LARGE_BUILDS = (("v-half", 64, 1024, 2.0), ("v-min", 64, 1024, 2.0))
"""(schedule, p, m, goal in seconds) for the build alone, timed by :func:`new_builders`."""


def median_of(fn, repeat: int) -> float:
    """The median wall time of ``repeat`` calls of ``fn``, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ppbook_command() -> list[str]:
    """The ``ppbook`` console script next to this Python, or the same entry point via -c."""
    script = Path(sys.executable).with_name("ppbook")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from ppbook.cli import main; sys.exit(main())"]


def run_quietly(argv: list[str]) -> float:
    """Run ``argv``; return the CPU time (user + system) it took, in seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def command_times(argv: list[str], repeat: int) -> tuple[float, float]:
    """Medians of wall time and of CPU time over ``repeat`` runs of ``argv``, in seconds.

    On a shared machine the CPU time is the steadier of the two; on a quiet one they agree.
    """
    walls, cpus = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        cpus.append(run_quietly(argv))
        walls.append(time.perf_counter() - start)
    return statistics.median(walls), statistics.median(cpus)


def build_and_simulate(p: int, m: int, v: int):
    return simulate(build("interleaved-1f1b", p, m, v), Costs(F=1, B=2))


def table(title: str, header: tuple[str, ...], rows: list[tuple]) -> None:
    print(f"\n{title}")
    cells = [header, *[tuple(str(c) for c in row) for row in rows]]
    widths = [max(len(row[k]) for row in cells) for k in range(len(header))]
    for i, row in enumerate(cells):
        print("  " + "  ".join(f"{c:>{w}}" for c, w in zip(row, widths, strict=True)))
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))


def user_command(repeat: int) -> None:
    startup, startup_cpu = command_times([sys.executable, "-c", "import ppbook.cli"], repeat)
    rows = []
    for p, v, m, goal in COMMAND_GOALS:
        argv = [*ppbook_command(), "simulate", "--schedule", "interleaved-1f1b"]
        argv += ["--stages", str(p), "--chunks", str(v), "--microbatches", str(m), "--json"]
        wall, cpu = command_times(argv, repeat)
        actions = len(build("interleaved-1f1b", p, m, v))
        beyond, beyond_cpu = wall - startup, cpu - startup_cpu
        rows.append(
            (
                p,
                v,
                m,
                f"{actions:,}",
                f"{wall:.3f}",
                f"{beyond:.3f}",
                f"{beyond_cpu:.3f}",
                f"{goal}",
                "ok" if beyond <= goal else "SLOW",
                "ok" if beyond_cpu <= goal else "SLOW",
            )
        )
    table(
        f"ppbook simulate --schedule interleaved-1f1b ... --json, as a user runs it "
        f"(median of {repeat}; start-up of python -c 'import ppbook.cli': {startup:.3f} s "
        f"wall, {startup_cpu:.3f} s CPU)",
        (
            "p",
            "v",
            "m",
            "actions",
            "wall s",
            "beyond start-up",
            "CPU beyond",
            "goal s",
            "wall",
            "CPU",
        ),
        rows,
    )


def breakdown(repeat: int) -> None:
    rows = []
    for p, v, m, _ in COMMAND_GOALS:
        parts: dict[str, list[float]] = {}
        for _ in range(repeat):
            clock = time.perf_counter()
            schedule = build("interleaved-1f1b", p, m, v)
            parts.setdefault("build", []).append(time.perf_counter() - clock)
            clock = time.perf_counter()
            validate(schedule)
            parts.setdefault("validate", []).append(time.perf_counter() - clock)
            clock = time.perf_counter()
            timeline = simulate(schedule)  # validates again, as the command does
            parts.setdefault("simulate", []).append(time.perf_counter() - clock)
            clock = time.perf_counter()
            metrics = timeline.metrics()
            parts.setdefault("metrics", []).append(time.perf_counter() - clock)
            clock = time.perf_counter()
            json.dumps(metrics, allow_nan=False)
            parts.setdefault("json", []).append(time.perf_counter() - clock)
        rows.append((p, v, m, *(f"{statistics.median(t):.3f}" for t in parts.values())))
    table(
        f"where the time goes, in process (median of {repeat}; simulate includes validate)",
        ("p", "v", "m", "build", "validate", "simulate", "metrics", "json"),
        rows,
    )


def linear_series(repeat: int) -> None:
    rows = []
    p, v = 16, 2
    for m in (64, 128, 256, 512, 1024, 2048):
        actions = len(build("interleaved-1f1b", p, m, v))
        seconds = median_of(lambda m=m: build_and_simulate(p, m, v), repeat)
        rows.append((p, v, m, f"{actions:,}", f"{seconds:.4f}", f"{1e6 * seconds / actions:.2f}"))
    table(
        f"build + simulate grows linearly with the number of actions (median of {repeat})",
        ("p", "v", "m", "actions", "seconds", "us/action"),
        rows,
    )


def widget_updates(repeat: int) -> None:
    import matplotlib

    matplotlib.use("Agg")  # this script's own process only
    from ppbook.widgets.timeline_explorer import schedule_explorer

    explorer = schedule_explorer()
    rows = []
    for name, v in (
        ("gpipe", None),
        ("1f1b", None),
        ("interleaved-1f1b", 2),
        ("interleaved-1f1b", 4),
        ("looped-bfs", 2),
        ("zb-h1", None),
        ("zb-h2", None),
        ("zb-v", None),
        ("interleaved-zb", 2),
        ("v-half", None),
        ("v-min", None),
        ("dualpipe", None),
        ("dualpipev", None),
    ):
        values = {"schedule": name, "num_stages": 16, "num_microbatches": 64}
        if v is not None:
            values["num_chunks"] = v
        explorer.update(**values)
        if explorer.error is not None:
            rows.append((name, v or "-", "-", "-", f"n/a: {explorer.error[:50]}"))
            continue
        actions = len(explorer.timeline.schedule)
        seconds = median_of(explorer.refresh, repeat)
        verdict = "ok" if seconds < 0.150 else "SLOW"
        rows.append((name, v or "-", f"{actions:,}", f"{1000 * seconds:.0f}", verdict))
    table(
        f"schedule explorer update: simulate + redraw + PNG, p = 16, m = 64 (median of {repeat})",
        ("schedule", "v", "actions", "ms", "< 150 ms"),
        rows,
    )


def uncached(fn):
    """``fn`` run with every cache of ppbook's schedule builders emptied first."""

    def run():
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("ppbook.schedules"):
                for value in list(vars(module).values()):
                    if hasattr(value, "cache_clear"):
                        value.cache_clear()
        return fn()

    return run


def new_builders(repeat: int) -> None:
    rows = []
    for name, p, m, v in NEW_BUILDERS:
        make = uncached(partial(build, name, p, m, v))
        actions = len(make())
        built = median_of(make, repeat)
        both = median_of(lambda make=make: simulate(make(), Costs(F=1, I=1, W=1)), repeat)
        verdict = "ok" if both <= 0.25 else "SLOW"
        rows.append((name, p, m, v or "-", f"{actions:,}", f"{built:.3f}", f"{both:.3f}", verdict))
    table(
        f"issue 18's builders, build and build + simulate (median of {repeat})",
        ("schedule", "p", "m", "v", "actions", "build s", "+ simulate s", "<= 0.25 s"),
        rows,
    )
    rows = []
    for name, p, m, goal in LARGE_BUILDS:
        make = uncached(partial(build, name, p, m))
        actions = len(make())
        built = median_of(make, max(1, repeat // 2))
        verdict = "ok" if built <= goal else "SLOW"
        rows.append((name, p, m, f"{actions:,}", f"{built:.3f}", f"<= {goal:g} s", verdict))
    table(
        f"large builds from empty caches (median of {max(1, repeat // 2)})",
        ("schedule", "p", "m", "actions", "build s", "goal", "verdict"),
        rows,
    )


def pytorch_order(p: int = 32, m: int = 256, v: int = 2) -> None:
    print(f"\nPyTorch's ScheduleInterleaved1F1B order, p = {p}, m = {m}, v = {v}")
    try:
        from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B
    except ImportError as error:
        print(f"  skipped: cannot import torch.distributed.pipelining ({error})")
        return
    # Stand-ins for the stages of rank 0: the constructor reads only these attributes, and
    # builds every rank's order, so no process group is needed.
    stages = [
        types.SimpleNamespace(
            group_size=p,
            group_rank=0,
            num_stages=p * v,
            stage_index=c * p,
            is_first=c == 0,
            is_last=c * p == p * v - 1,
            submod=None,
        )
        for c in range(v)
    ]
    start = time.perf_counter()
    try:
        schedule = ScheduleInterleaved1F1B(stages, m)
    except Exception as error:  # an internal API: report what changed, and move on
        print(f"  skipped: the constructor needs more than stand-in stages ({error!r})")
        return
    seconds = time.perf_counter() - start
    ours_seconds = median_of(lambda: build_and_simulate(p, m, v), 1)
    theirs = [[str(a) for a in schedule.pipeline_order[r] if a is not None] for r in range(p)]
    same = theirs == build("interleaved-1f1b", p, m, v).to_strings()
    print(f"  PyTorch builds its order (with comms) in {seconds:.2f} s (one run)")
    print(f"  ppbook builds and simulates the same schedule in {ours_seconds:.3f} s")
    print(f"  same per-rank order as ppbook.schedules.interleaved_1f1b: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per median (default 5)")
    parser.add_argument("--no-torch", action="store_true", help="skip PyTorch's construction")
    parser.add_argument(
        "--command-only", action="store_true", help="time only the command and its breakdown"
    )
    args = parser.parse_args()
    print(f"schedules known: {', '.join(SCHEDULES)}")
    load = os.getloadavg()[0]
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load:.1f}"
        + ("; busy: wall times run long, CPU times are the steadier" if load > 1 else "")
    )
    user_command(args.repeat)
    breakdown(max(1, args.repeat // 2))
    if args.command_only:
        return
    linear_series(args.repeat)
    new_builders(args.repeat)
    widget_updates(args.repeat)
    if not args.no_torch:
        pytorch_order()


if __name__ == "__main__":
    main()
