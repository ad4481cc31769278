"""Exercises 10.1 and 10.5 of chapter 10, whose checks ask PyTorch (``notebooks/10_cluster.ipynb``).

10.1 reads the reader's command with torchrun's own parser
(``torch.distributed.run.get_args_parser``), then its ``ppbook run`` options with
:func:`ppbook.cli.run.add_arguments`; 10.5 builds PyTorch's order of the class the reader
names with :func:`ppbook.runtime.torch_import.from_pytorch` and compares it with ppbook's,
action for action. torch is imported only inside the checks.
:mod:`ppbook.exercises.ch10` registers them with the chapter's other exercises.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex

from ppbook.checks import shown
from ppbook.exercises import exercise, right, wrong
from ppbook.schedules import interleaved_1f1b

# ----- construct: the command -------------------------------------------------------------


def _parse(parser, argv: list[str]):
    """``parser.parse_args(argv)``, or None and argparse's complaint (it exits on errors)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(argv), ""
    except SystemExit:
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        return None, lines[-1].split("error: ", 1)[-1] if lines else "it does not parse"


@exercise(
    "10.1",
    "Construct the command (a string) that runs ppbook run's 1F1B with 16 micro-batches on "
    "2 nodes of 4 GPUs each, meeting through c10d rendezvous at node0:29500; the same "
    "command runs on both nodes.",
    kind="construct",
    solution="`torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint "
    "node0:29500 --rdzv-id ppbook-1 -m ppbook.cli.run --schedule 1f1b --microbatches 16 "
    "--device cuda`: `--nproc-per-node` counts the processes of one node (4, one per GPU; "
    "8 ranks in all), the c10d rendezvous at node 0's address lets both nodes run the same "
    "line, `-m` runs ppbook's command as a module, and `--device cuda` makes each rank use "
    "its GPU with NCCL (the default is the CPU with gloo). `--rdzv-id` names the job (any "
    "string both nodes share).",
    answer_name="answer_1",
)
def _torchrun_command(answer):
    if not isinstance(answer, str):
        return wrong(f"this exercise wants the command as a string, got {shown(answer)}.")
    try:
        words = shlex.split(answer)
    except ValueError as error:
        return wrong(f"the command does not split into words: {error}.")
    for prefix in (["torchrun"], ["python", "-m", "torch.distributed.run"]):
        if words[: len(prefix)] == prefix:
            words = words[len(prefix) :]
            break
    else:
        return wrong("the command should start with torchrun.", "torchrun starts the ranks.")
    from torch.distributed.run import get_args_parser

    args, complaint = _parse(get_args_parser(), words)
    if args is None and "--nproc could match" in complaint:
        return wrong(
            f"torchrun refuses it: {complaint}. It reads ppbook run's --nproc as its own.",
            "leave --nproc out: under torchrun, ppbook run takes its ranks from WORLD_SIZE.",
        )
    if args is None:
        return wrong(f"torchrun refuses it: {complaint}.")
    if args.standalone:
        return wrong(
            "--standalone starts a rendezvous on this machine alone: one node.",
            "for two nodes, name the rendezvous: --rdzv-backend c10d --rdzv-endpoint HOST:PORT.",
        )
    if args.nnodes not in ("2", "2:2"):
        return wrong(f"--nnodes {args.nnodes}: the job has 2 nodes.")
    if args.nproc_per_node != "4":
        hint = "it counts one node's processes, one per GPU." if args.nproc_per_node == "8" else ""
        return wrong(f"--nproc-per-node {args.nproc_per_node}: each node has 4 GPUs.", hint)
    if args.rdzv_backend != "c10d":
        return wrong(f"--rdzv-backend {args.rdzv_backend}: the question asks for c10d.")
    if args.rdzv_endpoint != "node0:29500":
        host = args.rdzv_endpoint.rsplit(":", 1)[0]
        if host in ("localhost", "127.0.0.1", "::1", "[::1]"):
            return wrong(
                f"--rdzv-endpoint {args.rdzv_endpoint} is the loopback address: the other "
                "node cannot reach it.",
                "name node 0's address and port: node0:29500.",
            )
        return wrong(f"--rdzv-endpoint {shown(args.rdzv_endpoint)}: the rendezvous is node0:29500.")
    if not args.module or args.training_script != "ppbook.cli.run":
        return wrong(
            f"torchrun would run {shown(args.training_script)}.",
            "run ppbook's command as a module: -m ppbook.cli.run, then its options.",
        )
    from ppbook.cli.run import add_arguments

    ppbook_parser = argparse.ArgumentParser(prog="ppbook run")
    add_arguments(ppbook_parser)
    run, complaint = _parse(ppbook_parser, args.training_script_args)
    if run is None:
        return wrong(f"ppbook run refuses its options: {complaint}.")
    if (run.schedule or "1f1b") != "1f1b" or run.from_csv is not None:
        return wrong(f"the question asks for 1F1B, got --schedule {run.schedule}.")
    if run.microbatches != 16:
        return wrong(f"--microbatches {run.microbatches}: the question asks for 16.")
    if run.device != "cuda":
        return wrong(
            "each rank would run on the CPU with gloo: ppbook run's default device is cpu.",
            "add --device cuda, so that each rank takes its GPU and NCCL.",
        )
    return right("8 ranks, 4 per node, one per GPU, meeting at node0:29500 (torchrun's parser).")


# ----- choose: PyTorch's class ------------------------------------------------------------


def _class_name(answer: str) -> str:
    """A class name, also from the short name TorchTitan's config and ``get_schedule_class``
    take (``"Interleaved1F1B"``); the answer itself when torch knows neither."""
    from torch.distributed.pipelining import schedules

    if hasattr(schedules, answer):
        return answer
    try:
        return schedules.get_schedule_class(answer).__name__
    except ValueError:
        return answer


@exercise(
    "10.5",
    "Choose the class of torch.distributed.pipelining whose order is ppbook's "
    "interleaved_1f1b(4, 8, 2), action for action (its name as a string).",
    kind="choose",
    solution='"ScheduleInterleaved1F1B" (TorchTitan\'s "Interleaved1F1B"): '
    '`from_pytorch("ScheduleInterleaved1F1B", 4, 8, 2).actions == interleaved_1f1b(4, 8, '
    "2).actions`. ScheduleLoopedBFS holds the same stages (rank r: r and r + 4) but runs "
    "every micro-batch through a chunk before the next chunk (breadth-first); "
    "ScheduleInterleavedZeroBubble splits the backward into I and W.",
    answer_name="answer_5",
)
def _pytorch_class(answer):
    if not isinstance(answer, str) or not answer.strip():
        return wrong(
            f'this exercise wants a class name such as "ScheduleGPipe", got {shown(answer)}.'
        )
    from ppbook.runtime.torch_import import PLACEMENT, from_pytorch

    name = _class_name(answer.strip())
    if name not in PLACEMENT:
        return wrong(
            f"{shown(answer)} is not one of PyTorch's schedule classes: {', '.join(PLACEMENT)}."
        )
    if PLACEMENT[name] != "loop":
        held = "one stage" if PLACEMENT[name] == "single" else "two stages in a V (r and 2p-1-r)"
        return wrong(
            f"{name} gives each rank {held}; interleaved_1f1b(4, 8, 2) gives rank r the "
            "stages r and r + 4.",
            "look among the looped classes.",
        )
    ours = interleaved_1f1b(4, 8, 2)
    theirs = from_pytorch(name, 4, 8, 2)
    for rank, (mine, other) in enumerate(zip(ours.actions, theirs.actions, strict=True)):
        for position, (a, b) in enumerate(zip(mine, other, strict=False)):
            if a != b:
                split = any(action.kind == "I" for row in theirs.actions for action in row)
                return wrong(
                    f"{name}'s order differs: rank {rank}, position {position} runs {b}, "
                    f"interleaved 1F1B runs {a}.",
                    "that class splits the backward into I and W; interleaved 1F1B runs B."
                    if split
                    else "interleaved 1F1B goes depth-first: a micro-batch's next chunk "
                    "before the next micro-batch's first, p at a time.",
                )
        if len(mine) != len(other):
            return wrong(
                f"{name}'s order on rank {rank} has {len(other)} actions, ours {len(mine)}."
            )
    return right(f"{name} runs the same {sum(map(len, ours.actions))} actions in the same order.")
