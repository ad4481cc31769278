"""``ppbook run``: run a schedule on real processes and print what was measured.

``ppbook run --nproc 2 --schedule 1f1b --microbatches 8`` starts two local processes
(:func:`ppbook.runtime.launch.launch`); under ``torchrun`` (``RANK`` and ``WORLD_SIZE``
set) this process is one rank and rank 0 prints. Prints the typical step's timeline and
metrics, or with ``--json`` one JSON object; ``--compare`` adds the simulation of the same
schedule under the costs measured in the run; ``--check`` compares the loss and gradients
with a single-process run (trained the same way: in ``--dtype bfloat16``, mixed precision
in both, compared within the bound of :func:`ppbook.runtime.reference.mixed_tolerance`).

Every argument is checked before any process starts (the run's configuration, the
output options, what this machine's cores and memory allow, the model's parameters and
the data and activations each rank would hold): a bad one is one line on stderr, exit
status 2; so is a trace that cannot be written after the run. ``--from-csv`` reads
regular files only, up to a bounded size. A failed rank prints its error and traceback,
exit status 1; a run whose loss is not a finite number (it diverged) is one line on
stderr, nothing on stdout, exit status 1.
SIGINT (Ctrl-C), SIGTERM and SIGHUP stop every rank and remove the run's temporary
folder; the command says so in one line and exits with status 128 + the signal's number
(130 for Ctrl-C). Every message is cut to a bounded length (:data:`MAX_MESSAGE`).

torch is imported only inside the handler, so that ``ppbook simulate`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
from pathlib import Path

from ppbook import checks
from ppbook.checks import as_count, shown

MAX_MESSAGE = 500
"""Characters of a one-line error message; longer ones are cut."""

MAX_WIDTH = 400
"""Widest text timeline drawn when ``--width`` is too narrow for the measured actions."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``ppbook run`` on ``subparsers``."""
    parser = subparsers.add_parser(
        "run",
        help="run a schedule on real processes and measure it",
        description=(
            "Run a pipeline schedule on real processes (gloo on CPU; NCCL with one GPU per "
            "rank)\nand measure every action. Prints the timeline of a typical step, "
            "makespan, bubble fraction\nf = idle/total and bubble ratio r = idle/compute. "
            "Under torchrun, each process is one rank."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(handler=run)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``ppbook run``."""
    what = parser.add_argument_group("the pipeline")
    what.add_argument(
        "--nproc",
        type=int,
        help="p, ranks to start (default 2); leave it out under torchrun, which starts the ranks",
    )
    what.add_argument("--schedule", help="a schedule name, as for simulate (default 1f1b)")
    what.add_argument(
        "--from-csv", metavar="PATH", help="run a schedule read from PyTorch's CSV form instead"
    )
    what.add_argument(
        "--routes",
        choices=("two-way",),
        help="with --from-csv: two-way for DualPipe's routes, which CSV does not carry",
    )
    what.add_argument("--microbatches", type=int, help="m, micro-batches per step (default 8)")
    what.add_argument("--chunks", type=int, help="v, stage chunks per rank (interleaved)")
    what.add_argument(
        "--steps", type=int, default=3, help="steps to run (the first warms up; at most 10,000)"
    )
    what.add_argument(
        "--optimizer", default="sgd", choices=("sgd", "adam"), help="stepped after every step"
    )
    what.add_argument(
        "--lr",
        type=float,
        default=0.01,
        help="learning rate, 0 to 100 (0: no update); a run whose loss overflows fails",
    )
    model = parser.add_argument_group("the model")
    model.add_argument("--model", default="mlp", choices=("mlp", "transformer"))
    model.add_argument("--hidden", type=int, default=256, help="width of the model")
    model.add_argument(
        "--heads", type=int, default=2, help="attention heads (transformer; divides --hidden)"
    )
    model.add_argument("--blocks", type=int, help="number of blocks (default: one per stage)")
    model.add_argument("--microbatch-size", type=int, default=16, help="samples per micro-batch")
    model.add_argument(
        "--dtype",
        default="float32",
        choices=("float32", "float64", "bfloat16"),
        help="float32 or float64 throughout; bfloat16: mixed precision (bf16 compute and "
        "messages, fp32 master weights, gradient sums and optimizer state)",
    )
    model.add_argument("--seed", type=int, default=0, help="0 to 2**64 - 2 (torch's range)")
    where = parser.add_argument_group("processes")
    where.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    where.add_argument(
        "--engine",
        default="ppbook",
        choices=("ppbook", "torch"),
        help="who runs the schedule: ppbook's runtime or PyTorch's (torch.distributed.pipelining)",
    )
    where.add_argument("--timeout", type=float, default=60.0, help="seconds a rank may wait")
    where.add_argument("--threads", type=int, help="torch threads per rank (default: cores/p)")
    where.add_argument(
        "--matching",
        default="mailbox",
        choices=("mailbox", "strict", "order"),
        help="how a receiver pairs messages with micro-batches (see ppbook.runtime.comm)",
    )
    where.add_argument(
        "--fault",
        metavar="KIND@RANK:POS",
        help="fail on purpose: raise@1:2 makes rank 1 raise at its action 2 (also hang, exit, "
        "abort; POS 'end': after its last action)",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    out.add_argument("--compare", action="store_true", help="also simulate with measured costs")
    out.add_argument("--check", action="store_true", help="compare with a one-process run")
    out.add_argument(
        "--width",
        type=int,
        default=100,
        help="columns of the text timeline (at most 100,000, and 10 million characters in all)",
    )
    out.add_argument("--trace", metavar="PATH", help="write a Chrome trace of the typical step")


def make_config(args: argparse.Namespace, nproc: int | None):
    """The :class:`~ppbook.runtime.config.RunConfig` the arguments ask for; ``nproc`` None:
    as many ranks as a ``--from-csv`` schedule has rows, else two."""
    from ppbook.runtime.config import Fault, RunConfig

    schedule, microbatches = read_schedule(args)
    if nproc is None:
        nproc = 2 if args.from_csv is None else schedule.num_ranks
    return RunConfig(
        schedule=schedule,
        nproc=nproc,
        num_microbatches=microbatches,
        num_chunks=args.chunks,
        model=args.model,
        hidden=args.hidden,
        num_heads=args.heads,
        num_blocks=args.blocks,
        microbatch_size=args.microbatch_size,
        steps=args.steps,
        optimizer=args.optimizer,
        lr=args.lr,
        dtype=args.dtype,
        device=args.device,
        timeout=args.timeout,
        seed=args.seed,
        num_threads=args.threads,
        collect_grads=args.check,
        matching=args.matching,
        engine=args.engine,
        fault=Fault.parse(args.fault) if args.fault else None,
    )


def read_schedule(args: argparse.Namespace):
    """The schedule asked for (a name, or one read with ``--from-csv``) and its m."""
    if args.from_csv is None:
        if args.routes is not None:
            raise ValueError("--routes goes with --from-csv; a schedule built by name has its own")
        return args.schedule or "1f1b", 8 if args.microbatches is None else args.microbatches
    given = [f"--{flag}" for flag in ("schedule", "chunks") if getattr(args, flag) is not None]
    if given:
        raise ValueError(f"--from-csv reads the whole schedule; drop {', '.join(given)}")
    from ppbook.cli import read_csv_argument

    schedule = read_csv_argument(args.from_csv, args.routes, "; raise PPBOOK_MAX_ACTIONS")
    m = schedule.num_microbatches
    if args.microbatches not in (None, m):
        raise ValueError(f"--microbatches {args.microbatches}, but {args.from_csv} has {m}")
    return schedule, m


def run(args: argparse.Namespace) -> int:
    """Run, print the result; return the exit status (see the module's docstring)."""
    try:
        check_output(args)
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            return _run_one_rank(args)
        return _launch(args)
    except ValueError as exc:
        print(f"ppbook run: error: {checks.one_line(exc, MAX_MESSAGE)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # SIGINT, or launch's Interrupted for SIGTERM and SIGHUP
        signum = getattr(exc, "signum", signal.SIGINT)
        name = signal.Signals(signum).name
        print(f"ppbook run: stopped by {name}; every rank ended, nothing left", file=sys.stderr)
        return 128 + signum


def check_output(args: argparse.Namespace) -> None:
    """Refuse output options that would fail only after the run: ``--width`` (at most
    :data:`ppbook.views.text.MAX_COLUMNS`), ``--trace`` (a folder, a FIFO, a missing folder,
    no permission)."""
    from ppbook.cli import check_output_file
    from ppbook.views.text import check_width

    as_count(args.width, "--width", "ppbook run")
    check_width(args.width, 1, "--width")
    if args.trace is None:
        return
    path = Path(args.trace)
    folder = path.parent
    if not folder.is_dir():
        raise ValueError(
            f"--trace {shown(args.trace)}: the folder {shown(str(folder))} does not exist; "
            "create it first, or give a path in an existing folder"
        )
    if path.is_dir():
        raise ValueError(f"--trace {shown(args.trace)} is a folder; give a file name, e.g. t.json")
    check_output_file(args.trace, "--trace")  # a FIFO would wait for a reader
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ValueError(f"--trace {shown(args.trace)} cannot be written here (no permission)")


def _launch(args: argparse.Namespace) -> int:
    """Start the ranks here; print the result or the failure."""
    from ppbook.runtime.config import activation_bytes, check, model_bytes
    from ppbook.runtime.preflight import available_cores, check_machine, device_memory
    from ppbook.views.text import check_width

    config = make_config(args, args.nproc)
    schedule = check(config)
    check_machine(
        config.nproc,
        model_bytes(config, schedule),
        activation_bytes(config, schedule),
        **device_memory(config),
    )
    check_width(args.width, config.nproc, "--width")
    cores = available_cores()
    if config.nproc > cores:
        print(
            f"ppbook run: note: {config.nproc} ranks share {cores} CPU cores; measured times "
            f"include waiting for a core (--nproc {cores} or fewer measures without)",
            file=sys.stderr,
        )
    from ppbook.runtime.launch import PipelineError, launch  # torch: once all is checked

    try:
        result = launch(config)
    except PipelineError as exc:
        print(f"ppbook run: {exc}", file=sys.stderr)
        return 1
    return report(result, args)


def _run_one_rank(args: argparse.Namespace) -> int:
    """Under torchrun: be one rank; rank 0 prints the result."""
    from ppbook.runtime.config import check
    from ppbook.runtime.worker import serve
    from ppbook.views.text import check_width

    world_size = int(os.environ["WORLD_SIZE"])
    if args.nproc is not None and args.nproc != world_size:
        raise ValueError(f"--nproc {args.nproc} differs from torchrun's WORLD_SIZE {world_size}")
    config = make_config(args, world_size)
    schedule = check(config)
    check_width(args.width, world_size, "--width")
    results = serve(int(os.environ["RANK"]), world_size, [(config, schedule)], rendezvous=None)
    return report(results[0], args) if results else 0


def report(result, args: argparse.Namespace) -> int:
    """Print ``result`` as text or JSON; write the trace if asked; return 0.

    A run whose loss is not a finite number (it diverged: a learning rate too large for
    the model) failed: one line on stderr, nothing on stdout, status 1. JSON never holds
    NaN or Infinity. A trace that cannot be written is a one-line error, status 2.
    """
    from ppbook.runtime.measure import compare

    bad = next(
        ((step, loss) for step, loss in enumerate(result.losses) if not math.isfinite(loss)),
        None,
    )
    if bad is not None:
        print(
            f"ppbook run: the run diverged: the loss of step {bad[0]} is {bad[1]} (not a finite "
            f"number); use a smaller --lr than {args.lr:g}, or fewer --steps",
            file=sys.stderr,
        )
        return 1
    comparison = compare(result) if args.compare else None
    if args.check:
        from ppbook.runtime.reference import assert_matches_reference

        try:
            assert_matches_reference(result)
        except AssertionError as exc:
            message = checks.one_line(exc, MAX_MESSAGE)
            print(f"ppbook run: differs from the single-process run: {message}", file=sys.stderr)
            return 1
    if args.json:
        out = result.metrics()
        if comparison is not None:
            out["comparison"] = comparison.to_dict()
        if args.check:
            out["matches_single_process"] = True
        try:
            text = json.dumps(out, allow_nan=False)
        except ValueError:  # NaN or Infinity somewhere in the measurements
            raise ValueError(
                "the run measured a value that is not a finite number; JSON cannot hold it "
                "(run without --json to see the text report)"
            ) from None
        print(text)
    else:
        from ppbook.views.text import metrics_text

        timeline = result.timeline
        print(_drawn(timeline, args.width))
        print()
        print(metrics_text(timeline))
        print("(times in seconds)")
        print("step times (ms): " + ", ".join(f"{t * 1e3:.2f}" for t in result.step_times))
        print(f"loss: {result.loss:.6g}")
        if args.check:
            print("loss and gradients equal those of the single-process run")
        if comparison is not None:
            print()
            print(comparison.table())
    if args.trace:
        from ppbook.views.trace import to_chrome_trace

        try:
            to_chrome_trace(result.timeline, args.trace)
        except OSError as exc:
            raise ValueError(
                f"cannot write --trace {shown(args.trace)}: {exc.strerror or exc}"
            ) from None
        print(f"wrote {args.trace}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _drawn(timeline, width: int) -> str:
    """The text timeline in ``width`` columns; when measured actions are too short for
    that, in the columns they need (at most :data:`MAX_WIDTH`), with a note on stderr."""
    from ppbook.views.text import check_width, needed_width, text_timeline

    check_width(width, timeline.num_ranks, "--width")  # before anything is drawn
    try:
        return text_timeline(timeline, width=width)
    except ValueError:  # the width is checked up front: here it is too narrow for the run
        needed = needed_width(timeline)
        if needed > MAX_WIDTH:
            return f"(a text timeline needs {needed} columns to show every action; see --trace)"
        print(f"ppbook run: note: --width {width} drops short actions; {needed} columns drawn",
              file=sys.stderr)  # fmt: skip
        return text_timeline(timeline, width=needed)


def main(argv: list[str] | None = None) -> int:
    """``python -m ppbook.cli.run``: the ``run`` subcommand alone (also for torchrun)."""
    parser = argparse.ArgumentParser(prog="ppbook run", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
