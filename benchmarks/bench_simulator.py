"""How fast ppbook builds and simulates schedules, and how fast the explorer redraws.

Run: ``.venv/bin/python benchmarks/bench_simulator.py`` (not a test; not run in CI).
Prints best-of-N wall times:

1. building + simulating interleaved 1F1B, p = 32, v = 2, m = 256 (32,768 actions;
   target < 0.1 s) and p = 64, v = 2, m = 1024 (262,144 actions; target < 1 s);
2. a series in the number of actions: the time per action should stay about constant;
3. the schedule explorer's update (simulate + redraw + PNG), p = 16, m = 64 (target
   < 150 ms);
4. PyTorch's own construction of ScheduleInterleaved1F1B's order for p = 32, m = 256, with
   stand-in stage objects (no process group needed), and whether its order equals ours.
"""

from __future__ import annotations

import argparse
import time
import types

from ppbook.costs import Costs
from ppbook.schedules import SCHEDULES, build
from ppbook.simulate import simulate


def best_of(fn, repeat: int) -> float:
    """The smallest wall time of ``repeat`` calls of ``fn``, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def build_and_simulate(p: int, m: int, v: int):
    return simulate(build("interleaved-1f1b", p, m, v), Costs(F=1 / v, B=2 / v))


def table(title: str, header: tuple[str, ...], rows: list[tuple]) -> None:
    print(f"\n{title}")
    cells = [header, *[tuple(str(c) for c in row) for row in rows]]
    widths = [max(len(row[k]) for row in cells) for k in range(len(header))]
    for i, row in enumerate(cells):
        print("  " + "  ".join(f"{c:>{w}}" for c, w in zip(row, widths, strict=True)))
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))


def large_schedules(repeat: int) -> None:
    rows = []
    for p, v, m, target in ((32, 2, 256, 0.1), (64, 2, 1024, 1.0)):
        actions = len(build("interleaved-1f1b", p, m, v))
        seconds = best_of(lambda p=p, m=m, v=v: build_and_simulate(p, m, v), repeat)
        verdict = "ok" if seconds < target else "SLOW"
        rows.append((p, v, m, f"{actions:,}", f"{seconds:.3f}", f"< {target}", verdict))
    table(
        f"interleaved 1F1B, build + simulate (best of {repeat})",
        ("p", "v", "m", "actions", "seconds", "target", ""),
        rows,
    )


def linear_series(repeat: int) -> None:
    rows = []
    p, v = 16, 2
    for m in (64, 128, 256, 512, 1024, 2048):
        actions = len(build("interleaved-1f1b", p, m, v))
        seconds = best_of(lambda m=m: build_and_simulate(p, m, v), repeat)
        rows.append((p, v, m, f"{actions:,}", f"{seconds:.4f}", f"{1e6 * seconds / actions:.2f}"))
    table(
        f"cost grows linearly with the number of actions (best of {repeat})",
        ("p", "v", "m", "actions", "seconds", "us/action"),
        rows,
    )


def widget_updates(repeat: int) -> None:
    import matplotlib

    matplotlib.use("Agg")  # this script's own process only
    from ppbook.widgets.timeline import schedule_explorer

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
        seconds = best_of(explorer.refresh, repeat)
        verdict = "ok" if seconds < 0.150 else "SLOW"
        rows.append((name, v or "-", f"{actions:,}", f"{1000 * seconds:.0f}", verdict))
    table(
        f"schedule explorer update: simulate + redraw + PNG, p = 16, m = 64 (best of {repeat})",
        ("schedule", "v", "actions", "ms", "< 150 ms"),
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
    ours_seconds = best_of(lambda: build_and_simulate(p, m, v), 1)
    theirs = [[str(a) for a in schedule.pipeline_order[r] if a is not None] for r in range(p)]
    same = theirs == build("interleaved-1f1b", p, m, v).to_strings()
    print(f"  PyTorch builds its order (with comms) in {seconds:.2f} s (one run)")
    print(f"  ppbook builds and simulates the same schedule in {ours_seconds:.3f} s")
    print(f"  same per-rank order as ppbook.schedules.interleaved_1f1b: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="N of best-of-N (default 5)")
    parser.add_argument("--no-torch", action="store_true", help="skip PyTorch's construction")
    args = parser.parse_args()
    print(f"schedules known: {', '.join(SCHEDULES)}")
    large_schedules(max(1, args.repeat // 2))
    linear_series(args.repeat)
    widget_updates(args.repeat)
    if not args.no_torch:
        pytorch_order()


if __name__ == "__main__":
    main()
