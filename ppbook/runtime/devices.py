"""Which devices a run uses on this machine, and why (chapter 9, ``benchmarks/gpu_demo.py``).

Three modes, decided from what torch sees:

- ``"nccl"``: two or more GPUs and a torch built with NCCL: one rank per GPU, messages
  from GPU to GPU over NCCL;
- ``"shared-gpu"``: one GPU: two ranks share it. NCCL cannot put two ranks on one device,
  so the ranks talk gloo and every message goes through host (CPU) memory;
- ``"cpu"``: no GPU (or GPUs without NCCL): ranks are CPU processes talking gloo.

:func:`mode_for` decides for a described machine (no torch call: exercises and tests),
:func:`choose_mode` for this one. The runtime applies the same rule when it starts a rank
(:func:`ppbook.runtime.context.pick_device`: NCCL when there are at least as many GPUs as
ranks on the machine, else gloo with rank ``r`` on GPU ``r % GPUs``);
``tests/test_gpu_demo.py`` holds the two to the same answer.

:func:`dependency_violations` checks a measured timeline on the aligned clocks
(:mod:`ppbook.runtime.clock`): no action starts before a message it needs was produced.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppbook.checks import as_count
from ppbook.timeline import Timeline
from ppbook.validate import ScheduleIndex

MODES = ("nccl", "shared-gpu", "cpu")
"""The modes, from the fastest messages to the slowest."""

GPU_MARK_SLACK = 1e-3
"""Seconds a GPU action's mark may be off on the host clock: a CUDA event becomes host time
through a reference event read after it completed (:class:`~ppbook.runtime.clock.
ActionClock`), late by the time that read takes, differently on each rank."""


@dataclass(frozen=True)
class Mode:
    """How a run uses this machine: ``name`` (one of :data:`MODES`), ``device`` for
    :class:`~ppbook.runtime.config.RunConfig` ("cuda" or "cpu"), ``nproc`` ranks, the
    ``backend`` that carries their messages, where each rank runs (``rank_devices``), and
    the ``reason`` in words."""

    name: str
    device: str
    nproc: int
    backend: str
    rank_devices: tuple[str, ...]
    reason: str

    def __str__(self) -> str:
        return f"{self.name}: {self.reason}"


def mode_for(num_gpus: int, nccl: bool = True, nproc: int | None = None) -> Mode:
    """The mode for a machine with ``num_gpus`` GPUs, whose torch has NCCL or not.

    ``nproc``: the ranks wanted; by default every GPU (at least 2) with NCCL, else 2.
    """
    num_gpus = as_count(num_gpus, "num_gpus", "mode_for", minimum=0)
    if nproc is not None:
        nproc = as_count(nproc, "nproc", "mode_for", minimum=2)
    if num_gpus == 0 or (num_gpus >= 2 and not nccl and nproc is None):
        ranks = nproc or 2
        why = "no GPU" if num_gpus == 0 else f"{num_gpus} GPUs but a torch without NCCL"
        return Mode(
            "cpu",
            "cpu",
            ranks,
            "gloo",
            ("cpu",) * ranks,
            f"{why}: {ranks} CPU processes talk gloo; these are CPU numbers, not GPU numbers",
        )
    ranks = nproc or max(2, num_gpus if nccl else 2)
    devices = tuple(f"cuda:{rank % num_gpus}" for rank in range(ranks))
    if ranks <= num_gpus:
        if not nccl:
            raise ValueError(
                f"{ranks} ranks on {num_gpus} GPUs need NCCL, which this torch lacks: "
                f"use more ranks than GPUs (the shared path) or device 'cpu'"
            )
        return Mode(
            "nccl",
            "cuda",
            ranks,
            "nccl",
            devices,
            f"{num_gpus} GPUs: {ranks} ranks, one per GPU, send GPU to GPU over NCCL",
        )
    gpus = "one GPU" if num_gpus == 1 else f"{num_gpus} GPUs"
    return Mode(
        "shared-gpu",
        "cuda",
        ranks,
        "gloo",
        devices,
        f"{gpus} for {ranks} ranks: ranks share a GPU (NCCL cannot put two ranks on one "
        "device), so they talk gloo and every message goes through host memory",
    )


def choose_mode(nproc: int | None = None) -> Mode:
    """The mode for this machine, from ``torch.cuda`` and ``torch.distributed``.

    A CPU-only machine makes no CUDA call beyond ``torch.cuda.is_available()``.
    """
    import torch
    import torch.distributed as dist

    num_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return mode_for(num_gpus, dist.is_nccl_available(), nproc)


def dependency_violations(timeline: Timeline, tolerance: float) -> list[str]:
    """Every action of ``timeline`` that starts more than ``tolerance`` seconds before the
    end of an action on another rank that it waits for, in words; [] when the clocks agree.

    On one machine the ranks share a clock, so with the offsets :func:`~ppbook.runtime.
    clock.clock_offsets` estimates (each within its error bound) a correct run gives [].
    """
    index = ScheduleIndex(timeline.schedule)
    found = []
    for rank, row in enumerate(timeline.intervals):
        for interval in row:
            for part in interval.action.parts:
                for key in index.dependencies(*part):
                    sid = index.where[key]
                    if sid < 0 or index.step_rank[sid] == rank:
                        continue
                    producer_rank = index.step_rank[sid]
                    producer = timeline.intervals[producer_rank][sid - index.first[producer_rank]]
                    early = producer.end - interval.start
                    if early > tolerance:
                        found.append(
                            f"rank {rank}'s {part} starts {early:.3g} s before rank "
                            f"{producer_rank}'s {producer.action} ends"
                        )
    return found


def order_problems(result) -> list[str]:
    """The ranks that did not run exactly their row of the schedule, in order, in some step
    of ``result`` (a :class:`~ppbook.runtime.result.RunResult`), in words; [] if none."""
    expected = [
        [str(part) for step in row for part in step.parts] for row in result.schedule.actions
    ]
    return [
        f"step {step}: rank {rank} ran other actions than its row of the schedule"
        for step, executed in enumerate(result.executed)
        for rank, (ran, row) in enumerate(zip(executed, expected, strict=True))
        if ran != row
    ]


def clock_problems(result, slack: float = 1e-6) -> list[str]:
    """What is wrong with the clocks of a run of ranks on this machine, in words; [] if nothing.

    The ranks share one clock, so each estimated offset must lie within its own error bound
    (half the best round trip, :func:`~ppbook.runtime.clock.clock_offsets`), and on the
    aligned clocks no action may start before an input from another rank was produced
    (:func:`dependency_violations`, with the clock errors plus ``slack`` seconds: use
    :data:`GPU_MARK_SLACK` on a GPU). ``result``: a :class:`~ppbook.runtime.result.RunResult`.
    """
    problems = [
        f"rank {rank}'s clock offset {offset:.3g} s exceeds its error bound {error:.3g} s"
        for rank, (offset, error) in enumerate(
            zip(result.clock_offsets, result.clock_errors, strict=True)
        )
        if abs(offset) > error + 1e-9
    ]
    tolerance = 2 * max(result.clock_errors) + slack
    for step, timeline in enumerate(result.timelines):
        problems += [f"step {step}: {v}" for v in dependency_violations(timeline, tolerance)]
    return problems
