"""``ppbook simulate``: build or read a schedule, simulate it, print and export the result.

Prints a text timeline (:mod:`ppbook.views.text`) and the metrics, or with ``--json`` the
metrics as one JSON object (:meth:`ppbook.timeline.Timeline.metrics`). ``--png``,
``--trace`` and ``--csv`` write a picture (:mod:`ppbook.views.gantt`), a Chrome trace
(:mod:`ppbook.views.trace`) and the schedule in PyTorch's CSV form. Bad input raises a
ValueError, which :func:`ppbook.cli.main` prints as one short message with exit status 2;
sizes, output paths and widths are checked before anything is built or simulated, and the
text timeline's width against its ranks before it is drawn. ``--from-csv`` reads a regular
file only, of bounded size (:func:`ppbook.cli.read_csv_argument`).
``--ranks-per-device``, ``--interference`` and the ``--*-copy`` options model ranks that
share a device and copies that occupy them (:mod:`ppbook.shared_device`, chapter 9).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

from ppbook import limits
from ppbook.cli import check_output_file, communication, devices, read_csv_argument
from ppbook.costs import Costs
from ppbook.limits import capped
from ppbook.pipeline_schedule import Schedule
from ppbook.pytorch_csv import write_csv
from ppbook.schedules import SCHEDULES, build
from ppbook.simulate import SYNC_MODES, simulate
from ppbook.views.text import (
    DEFAULT_WIDTH,
    MAX_COLUMNS,
    check_width,
    metrics_text,
    most_columns,
    needed_width,
    text_timeline,
)

CHUNKS = {"none": "1", "any": "v >= 1", "two": "2"}
PATH_SHOWN = 200
"""Characters of a path quoted in an error message."""
PICTURES = (".png", ".svg")
"""What ``--png`` writes, by the path's suffix."""
MAX_AUTO_WIDTH = 400
"""Widest text timeline drawn without ``--width``; wider ones are left out with a note."""
COSTS_HELP = (
    "the cost of a chunk: time of one pass of one micro-batch through one device's share "
    "of the model (1/p of its layers); a schedule with v chunks per rank runs each chunk "
    "pass in cost/v, so the same costs compare schedules fairly. Keys F, B (full "
    "backward), I, W, FB, each once (default F=1, B=2F, I=W=B/2)"
)


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
            "busy and idle time and peak activations. Times are in the unit of the costs\n"
            '("time unit"); activations in micro-batch activations of a full stage (one\n'
            "device's share of the model; a chunk of a schedule with v chunks counts 1/v).\n"
            "Sizes beyond --max-stages, --max-microbatches and --max-actions are refused\n"
            "before anything is built; raise the limits to go further (their defaults come\n"
            "from PPBOOK_MAX_STAGES, PPBOOK_MAX_MICROBATCHES and PPBOOK_MAX_ACTIONS when set)."
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
    source.add_argument(
        "--routes",
        choices=("two-way",),
        help="with --from-csv: the micro-batches' routes, which CSV does not carry; two-way: "
        "half of them enter at the last stage, as in DualPipe (default: every micro-batch "
        "passes every stage from the first)",
    )
    model = parser.add_argument_group("the cost model")
    model.add_argument("--costs", default="", metavar="F=1,B=2", help=COSTS_HELP)
    model.add_argument(
        "--comm",
        type=float,
        default=0.0,
        help="latency of every transfer between ranks (inside a node with "
        "--devices-per-node; default 0); see the communication options",
    )
    model.add_argument(
        "--activation-bytes",
        type=float,
        metavar="N",
        help="bytes of one micro-batch's activations of one device's share of the model "
        "(a chunk holds its share; adds peak bytes)",
    )
    model.add_argument(
        "--w-memory",
        type=float,
        default=1.0,
        metavar="X",
        help="share (0 to 1) of a micro-batch's activations a split backward keeps from "
        "the end of its I to the end of its W (default 1: all; the Zero Bubble paper's "
        "M_W/M_B, e.g. 0.366 for its 1.5B model); memory and zb-auto's limit count it",
    )
    model.add_argument(
        "--memory-limit",
        type=int,
        metavar="K",
        help="zb-auto only: most activations a rank may hold at once, in one stage's "
        "micro-batch activations (default p; the Zero Bubble paper's ZB-1p is K = p, ZB-2p "
        "is K = 2p)",
    )
    communication.add_options(parser)
    devices.add_options(parser)
    run_group = parser.add_argument_group("several training steps")
    run_group.add_argument(
        "--steps",
        type=int,
        default=1,
        metavar="N",
        help="training steps in a row (default 1); the metrics add the period, the "
        "steady-state step time",
    )
    run_group.add_argument(
        "--sync",
        choices=tuple(SYNC_MODES),
        default="optimizer",
        help="what joins the steps: optimizer (default): every rank waits for the whole "
        "previous step; none: post-validation, a rank goes on as soon as its own work and "
        "inputs allow",
    )
    sizes = parser.add_argument_group("limits (refused up front, before building)")
    sizes.add_argument(
        "--max-stages",
        type=int,
        default=limits.MAX_STAGES,
        metavar="N",
        help="most ranks p, and most stage chunks p*v (default %(default)s)",
    )
    sizes.add_argument(
        "--max-microbatches",
        type=int,
        default=limits.MAX_MICROBATCHES,
        metavar="N",
        help="most micro-batches m (default %(default)s)",
    )
    sizes.add_argument(
        "--max-actions",
        type=int,
        default=limits.MAX_ACTIONS,
        metavar="N",
        help="most actions in the schedule (default %(default)s)",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    out.add_argument(
        "--width",
        type=int,
        help=f"columns of the text timeline (default: {DEFAULT_WIDTH}, or as many as show "
        f"every action, up to {MAX_AUTO_WIDTH}); a width that would drop actions is refused, "
        f"and so is one beyond {MAX_COLUMNS:,} columns or 10 million characters in all",
    )
    out.add_argument(
        "--png",
        metavar="PATH",
        help="write a timeline picture to PATH, which ends in .png or .svg",
    )
    out.add_argument("--trace", metavar="PATH", help="write a Chrome trace (JSON, for Perfetto)")
    out.add_argument("--csv", metavar="PATH", help="write the schedule in PyTorch's CSV form")
    parser.set_defaults(handler=run)
    return parser


def load_schedule(args: argparse.Namespace, costs: Costs | None = None) -> Schedule:
    """The schedule the arguments ask for: built by name, or read from a CSV file.

    ``costs`` go to the builders that plan with them (zb-auto).
    """
    if args.from_csv is not None:
        given = [
            f"--{n.replace('_', '-')}"
            for n in ("schedule", "stages", "microbatches", "chunks", "memory_limit")
            if getattr(args, n) is not None
        ]
        if given:
            raise ValueError(f"--from-csv reads the whole schedule; drop {', '.join(given)}")
        hint = "; raise --max-actions if memory allows"
        return read_csv_argument(args.from_csv, args.routes, hint)
    if args.routes is not None:
        raise ValueError("--routes goes with --from-csv; a schedule built by name has its own")
    if args.schedule is None:
        raise ValueError("give --schedule NAME (see --help for the list) or --from-csv PATH")
    missing = [f"--{n}" for n in ("stages", "microbatches") if getattr(args, n) is None]
    if missing:
        raise ValueError(f"--schedule {args.schedule} needs {' and '.join(missing)}")
    extra = {} if args.memory_limit is None else {"memory_limit": args.memory_limit}
    if args.schedule == "zb-auto":
        extra["costs"] = costs
    return build(args.schedule, args.stages, args.microbatches, args.chunks, **extra)


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse a bad width, a picture path of unknown kind, and an output path that is a
    folder, a FIFO or a socket, or lies in a missing folder."""
    if args.width is not None:
        check_width(args.width, 1, "--width")  # the ranks are checked once they are known
    if args.png is not None and Path(args.png).suffix.lower() not in PICTURES:
        raise ValueError(
            f"--png {_path(args.png)}: the path must end in .png or .svg "
            "(the file is written exactly where the path says)"
        )
    for flag in ("csv", "trace", "png"):
        if getattr(args, flag) is not None:
            check_output_file(getattr(args, flag), f"--{flag}")


def run(args: argparse.Namespace) -> int:
    """Simulate, print, and write the files asked for; return the exit status."""
    check_outputs(args)
    check_sizes(args)
    costs = Costs.parse(
        args.costs,
        activation_bytes=args.activation_bytes,
        w_memory=args.w_memory,
        **devices.costs_kwargs(args, communication.costs_kwargs(args)),
    )
    chosen = {"stages": args.max_stages, "microbatches": args.max_microbatches}
    try:
        with limits.use(actions=args.max_actions, **chosen):  # builders and readers check too
            schedule = load_schedule(args, costs)
            check_sizes(args, schedule)
            timeline = simulate(schedule, costs, steps=args.steps, sync=args.sync)
    except MemoryError:  # only past limits raised with --max-*: the defaults fit in memory
        raise ValueError(
            "ran out of memory building or simulating the schedule: lower --max-stages, "
            "--max-microbatches or --max-actions back towards their defaults, or the sizes"
        ) from None
    metrics = timeline.metrics()  # refuses results that are not finite numbers
    if args.json:
        print(json.dumps(metrics, allow_nan=False))
    else:
        print(_timeline_text(timeline, args.width))
        print()
        print(metrics_text(timeline))
    note = sys.stderr if args.json else sys.stdout
    for line in schedule.notes:
        print(f"note: {line}", file=note)
    for path, write in (
        (args.csv, lambda p: write_csv(schedule, p)),
        (args.trace, lambda p: _write_trace(timeline, p)),
        (args.png, lambda p: _write_picture(timeline, p)),
    ):
        if path is None:
            continue
        try:
            write(path)
        except OSError as exc:
            raise ValueError(f"cannot write {_path(path)}: {exc.strerror or exc}") from None
        print(f"wrote {path}", file=note)
    return 0


def _timeline_text(timeline, width: int | None) -> str:
    """The text timeline; without ``--width``, a note instead when it would be too wide."""
    most = most_columns(timeline.num_ranks)
    if width is not None:
        check_width(width, timeline.num_ranks, "--width")  # before anything is drawn
    needed = needed_width(timeline)  # counts no further than ``most``
    if width is None and needed > MAX_AUTO_WIDTH:
        advice = (
            f"give --width {needed} to draw it"
            if needed <= most
            else f"more than the {most:,} drawn at most: see --png or --trace"
        )
        return (
            f"(text timeline left out: showing every one of its {len(timeline.schedule):,} "
            f"actions needs {needed:,} columns; {advice})"
        )
    if width is not None and needed > width:
        advice = f"give --width {needed}" if needed <= most else "see --png or --trace"
        raise ValueError(
            f"--width {width} would drop actions shorter than a column: showing every action "
            f"needs {needed:,} columns; {advice}, or leave --width out"
        )
    return text_timeline(timeline, width=width)


def _write_trace(timeline, path) -> None:
    from ppbook.views.trace import to_chrome_trace

    to_chrome_trace(timeline, path)


def _write_picture(timeline, path) -> None:
    from ppbook.views.gantt import timeline_figure

    kind = Path(path).suffix.lower().lstrip(".")  # the format, so the path is kept as given
    timeline_figure(timeline, memory=True).savefig(path, format=kind, dpi=120)


def check_sizes(args: argparse.Namespace, schedule: Schedule | None = None) -> None:
    """Refuse sizes beyond ``--max-stages``, ``--max-microbatches`` and ``--max-actions``.

    As :mod:`ppbook.limits` counts them: ``--max-stages`` bounds ranks p and stage chunks
    p * v alike. Before building (``schedule`` None) a named schedule has at least two
    actions (F and B) per stage chunk and micro-batch; a built or read schedule counts its
    own.
    """
    for flag in ("max_stages", "max_microbatches", "max_actions", "steps"):
        if getattr(args, flag) < 1:
            raise ValueError(f"--{flag.replace('_', '-')} must be >= 1, got {getattr(args, flag)}")
    if schedule is not None:
        p, stages = schedule.num_ranks, schedule.num_stages
        m = schedule.num_microbatches * args.steps
        actions = len(schedule) * args.steps
        counted = "actions" if args.steps == 1 else f"actions in {args.steps} steps"
    elif args.schedule in SCHEDULES and args.stages is not None and args.microbatches is not None:
        rule = SCHEDULES[args.schedule].chunks
        chunks = {"none": 1, "two": 2}.get(rule, args.chunks if args.chunks is not None else 2)
        p, m = args.stages, args.microbatches * args.steps
        stages = p * max(1, chunks)
        actions = 2 * stages * m
        counted = "actions at least (F and B for each stage chunk and micro-batch of each step)"
    else:
        return
    for value, flag, what in (
        (p, "--max-stages", "ranks p"),
        (stages, "--max-stages", "stage chunks p * v"),
        (m, "--max-microbatches", "micro-batches m"),
        (actions, "--max-actions", counted),
    ):
        limit = getattr(args, flag[2:].replace("-", "_"))
        if value > limit:
            raise ValueError(
                f"{value:,} {what} is beyond the limit {flag} {limit:,}; "
                f"give {flag} {value} to go ahead, if time and memory allow"
            )


def _path(text: str) -> str:
    """A path for a message, cut to :data:`PATH_SHOWN` characters."""
    return capped(text, PATH_SHOWN)
