"""``ppbook simulate``: build or read a schedule, simulate it, print and export the result.

Prints a text timeline (:mod:`ppbook.views.text`) and the metrics, or with ``--json`` the
metrics as one JSON object (:meth:`ppbook.timeline.Timeline.metrics`). ``--png``,
``--trace`` and ``--csv`` write a picture (:mod:`ppbook.views.gantt`), a Chrome trace
(:mod:`ppbook.views.trace`) and the schedule in PyTorch's CSV form. Bad input raises a
ValueError, which :func:`ppbook.cli.main` prints as one line with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

from ppbook.costs import Costs
from ppbook.schedule import Schedule
from ppbook.schedules import SCHEDULES, build
from ppbook.simulate import simulate
from ppbook.views.text import metrics_text, text_timeline

CHUNKS = {"none": "1", "any": "v >= 1", "two": "2"}


def schedule_table(width: int = 64) -> str:
    """The schedules: name, chunks per rank, rule (wrapped to ``width``) and source."""
    name_w = max(len(name) for name in SCHEDULES) + 2
    indent = " " * (2 + name_w + 8)
    lines = [f"  {'schedule':<{name_w}}{'chunks':<8}rule and source"]
    for spec in SCHEDULES.values():
        rule = textwrap.wrap(spec.rule, width) or [""]
        lines.append(f"  {spec.name:<{name_w}}{CHUNKS[spec.chunks]:<8}{rule[0]}")
        lines += [indent + more for more in rule[1:]]
        lines.append(f"{indent}{spec.paper}")
    return "\n".join(lines)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``ppbook simulate`` on ``subparsers``."""
    parser = subparsers.add_parser(
        "simulate",
        help="simulate a schedule and print its timeline and bubble",
        description=(
            "Simulate a pipeline schedule: each rank runs its actions in order, each as soon\n"
            "as its inputs are ready. Prints a text timeline and the metrics: makespan,\n"
            "bubble fraction f = idle/total, bubble ratio r = idle/compute, and per rank\n"
            "busy and idle time and peak activations."
        ),
        epilog="schedules (--schedule):\n" + schedule_table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_argument_group("the schedule (give --schedule, or --from-csv)")
    source.add_argument("--schedule", help="a schedule name from the table below")
    source.add_argument("--stages", type=int, help="p, the number of pipeline ranks (devices)")
    source.add_argument("--microbatches", type=int, help="m, micro-batches per step")
    source.add_argument(
        "--chunks",
        type=int,
        help="v, stage chunks per rank: the model is cut into p*v stages",
    )
    source.add_argument(
        "--from-csv",
        metavar="PATH",
        help="read the schedule from PyTorch's CSV form (one row per rank, e.g. 0F0,0F1,,0B0)",
    )
    model = parser.add_argument_group("the cost model")
    model.add_argument(
        "--costs",
        default="",
        metavar="F=1,B=2",
        help="time of one pass of one micro-batch on one stage chunk; keys F, B (full "
        "backward), I, W, FB (default F=1, B=2F, I=W=B/2)",
    )
    model.add_argument(
        "--comm",
        type=float,
        default=0.0,
        help="transfer time added to every dependency that crosses ranks (default 0)",
    )
    model.add_argument(
        "--activation-bytes",
        type=float,
        metavar="N",
        help="bytes of one micro-batch's activations on one stage chunk (adds peak bytes)",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    out.add_argument("--width", type=int, default=100, help="columns of the text timeline")
    out.add_argument("--png", metavar="PATH", help="write a timeline picture (PNG)")
    out.add_argument("--trace", metavar="PATH", help="write a Chrome trace (JSON, for Perfetto)")
    out.add_argument("--csv", metavar="PATH", help="write the schedule in PyTorch's CSV form")
    parser.set_defaults(handler=run)
    return parser


def load_schedule(args: argparse.Namespace) -> Schedule:
    """The schedule the arguments ask for: built by name, or read from a CSV file."""
    if args.from_csv is not None:
        given = [
            f"--{n}"
            for n in ("schedule", "stages", "microbatches", "chunks")
            if getattr(args, n) is not None
        ]
        if given:
            raise ValueError(f"--from-csv reads the whole schedule; drop {', '.join(given)}")
        path = Path(args.from_csv)
        try:
            text = path.read_text()
        except OSError as exc:
            raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            return Schedule.from_csv_text(text, name=path.stem)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    if args.schedule is None:
        raise ValueError("give --schedule NAME (see --help for the list) or --from-csv PATH")
    missing = [f"--{n}" for n in ("stages", "microbatches") if getattr(args, n) is None]
    if missing:
        raise ValueError(f"--schedule {args.schedule} needs {' and '.join(missing)}")
    return build(args.schedule, args.stages, args.microbatches, args.chunks)


def run(args: argparse.Namespace) -> int:
    """Simulate, print, and write the files asked for; return the exit status."""
    if args.width < 1:
        raise ValueError(f"--width must be >= 1 column, got {args.width}")
    schedule = load_schedule(args)
    costs = Costs.parse(args.costs, comm=args.comm, activation_bytes=args.activation_bytes)
    timeline = simulate(schedule, costs)
    if args.json:
        print(json.dumps(timeline.metrics()))
    else:
        print(text_timeline(timeline, width=args.width))
        print()
        print(metrics_text(timeline))
    note = sys.stderr if args.json else sys.stdout
    for path, write in (
        (args.csv, lambda p: schedule.to_csv(p)),
        (args.trace, lambda p: _write_trace(timeline, p)),
        (args.png, lambda p: _write_png(timeline, p)),
    ):
        if path is None:
            continue
        try:
            write(path)
        except OSError as exc:
            raise ValueError(f"cannot write {path}: {exc.strerror or exc}") from None
        print(f"wrote {path}", file=note)
    return 0


def _write_trace(timeline, path) -> None:
    from ppbook.views.trace import to_chrome_trace

    to_chrome_trace(timeline, path)


def _write_png(timeline, path) -> None:
    from ppbook.views.gantt import timeline_figure

    timeline_figure(timeline, memory=True).savefig(path, dpi=120)
