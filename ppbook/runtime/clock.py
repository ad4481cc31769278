"""Clocks: when each action starts and ends, on one time axis shared by all ranks.

Marks. On CPU a mark is ``time.perf_counter()``. On a GPU the work is asynchronous, so a
mark is a CUDA event recorded on the stream; at the end of a step the events are turned
into host time through a reference event whose host time is known (recorded and waited
for at the start of the step). Only those events are waited for: never
``torch.cuda.synchronize()``, and no CUDA call at all on a CPU run.

Alignment. Every rank measures with its own clock. Processes on one machine share
``perf_counter`` (CLOCK_MONOTONIC on Linux), but ranks on several machines do not, so
:func:`clock_offsets` estimates each rank's offset from rank 0 as NTP does (Mills 1991,
RFC 1305): rank 0 sends its time ``a``, the peer answers with its time ``b``, rank 0 reads
``c`` on return; then ``offset = b - (a + c) / 2``, wrong by at most half the round trip
``c - a``; of several rounds the one with the shortest round trip is kept. On one machine
the offsets come out within a few microseconds of zero, which checks the method.

The stamps travel over a CPU (gloo) group, whatever carries the pipeline's messages: an
NCCL ``send`` or ``recv`` only queues the transfer on the GPU and returns at once, so a
host clock read around it would say nothing about when the peer's stamp arrived. A gloo
transfer of a CPU tensor returns when the data is there. On a gloo run the default group
is that group; on NCCL, :func:`alignment_group` makes one.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from ppbook.runtime.context import Context

now = time.perf_counter


class ActionClock:
    """Marks the start and end of actions on ``device``; :meth:`resolve` gives seconds."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self._reference = None
        self._reference_time = 0.0

    def begin_step(self) -> None:
        """Start a step: on a GPU, pin a reference event to host time."""
        if self.cuda:
            self._reference = torch.cuda.Event(enable_timing=True)
            self._reference.record()
            self._reference.synchronize()
            self._reference_time = now()

    def mark(self):
        """A mark of now: host seconds on CPU, a recorded CUDA event on a GPU."""
        if not self.cuda:
            return now()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def resolve(self, marks: list) -> list[float]:
        """The host times, in seconds, of ``marks`` made during this step."""
        if not self.cuda or not marks:
            return list(marks)
        marks[-1].synchronize()  # the last mark: every earlier one is done too
        reference, t0 = self._reference, self._reference_time
        return [t0 + reference.elapsed_time(event) / 1e3 for event in marks]


def alignment_group(ctx: Context):
    """A group whose transfers block the host: the default group on gloo, else a new gloo
    group (a collective call: every rank calls it)."""
    if ctx.backend == "gloo":
        return None
    return dist.new_group(list(range(ctx.world_size)), backend="gloo")


def clock_offsets(ctx: Context, rounds: int = 8) -> tuple[list[float], list[float]]:
    """Each rank's clock minus rank 0's, and the bound on its error (half the round trip),
    in seconds. Known on rank 0; the other ranks get empty lists. A collective call."""
    group = alignment_group(ctx)
    stamp = torch.zeros(1, dtype=torch.float64)  # CPU memory: the transfer blocks the host
    if ctx.rank != 0:
        for _ in range(rounds):
            dist.recv(stamp, 0, group=group)
            stamp.fill_(now())
            dist.send(stamp, 0, group=group)
        return [], []
    offsets, errors = [0.0], [0.0]
    for peer in range(1, ctx.world_size):
        best_round_trip, best_offset = float("inf"), 0.0
        for _ in range(rounds):
            sent = now()
            stamp.fill_(sent)
            dist.send(stamp, peer, group=group)
            dist.recv(stamp, peer, group=group)
            back = now()
            if back - sent < best_round_trip:
                best_round_trip, best_offset = back - sent, stamp.item() - (sent + back) / 2
        offsets.append(best_offset)
        errors.append(best_round_trip / 2)
    return offsets, errors
