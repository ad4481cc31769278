"""What every rank process runs: join the group, build its stages, run the steps, report.

:func:`main` is the target of the processes :mod:`ppbook.runtime.launch` starts (it lives
in this importable module, as ``spawn`` needs: a function defined in a notebook cannot be
started). :func:`serve` is the same work for a process that torchrun started.

One launch can serve several runs (``jobs``) with the same ranks, so that tests and
benchmarks pay for starting processes and importing torch once.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn import functional

from ppbook.pipeline_schedule import Schedule
from ppbook.runtime.clock import clock_offsets
from ppbook.runtime.comm import Messenger
from ppbook.runtime.config import END, RunConfig, num_parts
from ppbook.runtime.context import Context, init_distributed, listening_addresses
from ppbook.runtime.execute import StepRunner, inject
from ppbook.runtime.models import (
    build_blocks,
    part_bounds,
    split_blocks,
    step_data,
)
from ppbook.runtime.plan import ACTIVATION, Identity, incoming
from ppbook.runtime.precision import MIXED, MasterWeights, master_dtype
from ppbook.runtime.result import RankRecord, RunResult, assemble, keep_parameters
from ppbook.runtime.stage import Stage
from ppbook.runtime.training import combine_copies, make_optimizer, stepped_weights

Job = tuple[RunConfig, Schedule]


def main(rank: int, world_size: int, jobs: list[Job], folder: str) -> None:
    """Entry point of a launched rank: results (rank 0) or its error go to files in ``folder``.

    On an error the rank writes its traceback to ``error-<rank>.json`` and exits at once
    with status 1, leaving the launcher to stop the other ranks and show the error. Rank 0
    marks each finished run ``k`` with an empty file ``done-<k>``, for the launcher's progress.

    When its last message is through, before it leaves the process group, a rank writes
    ``finished-<rank>`` (rank 0 its results first): a rank that gloo's teardown then aborts
    has still done all its work (see :mod:`ppbook.runtime.launch`). Its stderr goes to
    ``stderr-<rank>.log``, which the launcher passes on and quotes when the rank dies
    without a report; with ``PPBOOK_VERBOSE=1`` it stays on the terminal, to be read live.
    """
    _exit_with_parent()
    if not (jobs[0][0].verbose or os.environ.get("PPBOOK_VERBOSE") == "1"):
        _stderr_to(Path(folder) / f"stderr-{rank}.log")

    def finished(results: list[RunResult] | None) -> None:
        if rank == 0:
            partial = Path(folder) / "results.partial"
            partial.write_bytes(pickle.dumps(results))
            partial.rename(Path(folder) / "results.pkl")
        (Path(folder) / f"finished-{rank}").touch()

    try:
        serve(
            rank,
            world_size,
            jobs,
            rendezvous=Path(folder) / "rendezvous",
            on_done=lambda k: (Path(folder) / f"done-{k}").touch(),
            on_finished=finished,
        )
    except BaseException as exc:  # reported to the launcher, which shows it to the user
        report = {
            "rank": rank,
            "time": time.time(),
            "type": type(exc).__name__,
            "message": str(exc),
            "traceback": traceback.format_exc(),
        }
        (Path(folder) / f"error-{rank}.json").write_text(json.dumps(report))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # no clean-up that could wait on a dead peer


def _stderr_to(path: Path) -> None:
    """Send this process's standard error (file descriptor 2, so also what C++ code prints
    before an abort) to ``path``."""
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.close(fd)


def _exit_with_parent() -> None:
    """Exit if the launcher dies (killed before it could stop its ranks): no orphans."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="ppbook-parent-watch", daemon=True).start()


def serve(
    rank: int,
    world_size: int,
    jobs: list[Job],
    rendezvous: Path | None,
    on_done: Callable[[int], None] | None = None,
    on_finished: Callable[[list[RunResult] | None], None] | None = None,
) -> list[RunResult] | None:
    """Run ``jobs`` as ``rank``; rank 0 returns one :class:`RunResult` per job, and calls
    ``on_done(k)`` when job ``k`` (from 0) has finished. ``on_finished(results)`` is called
    when this rank's last message is through, before it leaves the process group."""
    first = jobs[0][0]
    ctx = init_distributed(
        rank,
        world_size,
        device=first.device,
        timeout=first.timeout,
        rendezvous=rendezvous,
        verbose=first.verbose or os.environ.get("PPBOOK_VERBOSE") == "1",
    )
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    torch.set_num_threads(first.num_threads or max(1, (os.cpu_count() or 1) // local_world))
    offsets, errors = clock_offsets(ctx)
    results = []
    for config, schedule in jobs:
        if config.engine == "torch":  # PyTorch's engine runs the schedule
            from ppbook.runtime import torch_engine

            record = torch_engine.run_job(ctx, config, schedule)
        else:
            record = run_job(ctx, config, schedule)
        gathered = [None] * world_size if rank == 0 else None
        dist.gather_object(record, gathered, dst=0)
        if rank == 0:
            results.append(assemble(config, schedule, gathered, offsets, errors))
            if on_done is not None:
                on_done(len(results) - 1)
    if on_finished is not None:
        on_finished(results if rank == 0 else None)
    for config, _ in jobs:  # a fault at the end: after all the work, before leaving the group
        if config.fault is not None and config.fault.position == END and config.fault.rank == rank:
            inject(config.fault)
    ctx.close()
    return results if rank == 0 else None


def run_job(ctx: Context, config: RunConfig, schedule: Schedule) -> RankRecord:
    """Build this rank's stages for ``config`` and run its training steps: each is the
    schedule's actions, then the optimizer step (:mod:`ppbook.runtime.training`). In
    bfloat16 each stage keeps fp32 master weights and gradient sums, which the optimizer
    steps (:mod:`ppbook.runtime.precision`)."""
    parts = num_parts(schedule)
    blocks = build_blocks(config, parts)
    bounds = part_bounds(len(blocks), parts)
    modules = split_blocks(blocks, parts)
    inputs, targets, layouts = step_data(config, modules)  # layouts: what parts send
    log: list[str] = []
    stages = {}
    for stage in schedule.stages_on(ctx.rank):
        part = schedule.model_part(stage)
        module = copy.deepcopy(modules[part]).to(ctx.device)
        held = [w for w in module.parameters() if w.requires_grad]
        stages[stage] = Stage(
            stage,
            module,
            num_microbatches=config.num_microbatches,
            first=part == 0,
            loss_fn=functional.mse_loss if part == parts - 1 else None,
            log=log,
            masters=MasterWeights(held) if config.dtype == MIXED else None,
        )
    weights = [w for stage in stages.values() for w in stepped_weights(stage)]
    optimizer = make_optimizer(config, weights) if weights else None

    def layout(identity: Identity) -> tuple[torch.dtype, tuple[int, ...]]:
        """A message's payload: the output of the part before (activation) or its own."""
        stage, what, _ = identity
        part = schedule.model_part(stage)
        return layouts[part - 1 if what == ACTIVATION else part]

    messenger = Messenger(ctx, incoming(schedule, ctx.rank), layout, config.matching)
    record = RankRecord(ctx.rank)
    for _ in range(config.steps):
        for stage in stages.values():
            stage.module.zero_grad(set_to_none=True)
            if stage.masters is not None:
                stage.masters.zero()
        log.clear()
        dist.barrier()  # the ranks start each step together
        runner = StepRunner(
            schedule, ctx.rank, stages, messenger, inputs, targets, config.fault, config.transport
        )
        starts, ends, losses = runner.run()
        # DualPipe: sum the copies' gradients (in fp32 in mixed precision)
        combine_copies(schedule, stages, modules, ctx.comm_device, master_dtype(config.dtype))
        if optimizer is not None:
            optimizer.step()
        for stage in stages.values():
            if stage.masters is not None:  # the stepped fp32 masters, rounded into bf16
                stage.masters.copy_back()
        record.starts.append(starts)
        record.ends.append(ends)
        record.executed.append(list(log))
        record.losses.append(float(sum(loss.item() for loss in losses)))
    if config.collect_grads:
        held = [(schedule.model_part(s.stage), s.module, s.masters) for s in stages.values()]
        keep_parameters(record, bounds, held)
    record.listening = listening_addresses()
    return record
