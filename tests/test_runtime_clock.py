"""Clock alignment over a transport that does not block the host, as NCCL's does not.

No GPU and no process group: two ranks in two threads talk through a fake
``torch.distributed``. Its default group plays NCCL: ``send`` queues and returns, ``recv``
returns at once and holds the message only if it already arrived (the host reads before
the GPU has the data). A group made with ``backend="gloo"`` blocks until the data is there,
as gloo does. Rank 1's clock runs 5 s ahead of rank 0's, and rank 1 reaches the alignment
0.1 s late. The estimated offset must be 5 s within the error bound it reports.
"""

from __future__ import annotations

import queue
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from ppbook.runtime import clock

SKEW = 5.0  # rank 1's clock minus rank 0's, in seconds


class FakeDist:
    """Point-to-point messages between two threads; see the module docstring."""

    GLOO = "gloo group"

    def __init__(self):
        self.me = threading.local()
        self.queues = {
            (group, src, dst): queue.Queue()
            for group in (None, self.GLOO)
            for src, dst in ((0, 1), (1, 0))
        }

    def new_group(self, ranks, backend=None, **kwargs):
        assert backend == "gloo", "only a gloo group blocks the host"
        return self.GLOO

    def send(self, tensor, dst, group=None):
        self.queues[(group, self.me.rank, dst)].put(tensor.clone())

    def recv(self, tensor, src, group=None):
        messages = self.queues[(group, src, self.me.rank)]
        if group is self.GLOO:
            tensor.copy_(messages.get(timeout=10))
            return
        try:  # NCCL's part: return at once; the data lands later, if it has not yet
            tensor.copy_(messages.get_nowait())
        except queue.Empty:
            pass


def align(monkeypatch, backend: str) -> tuple[list[float], list[float]]:
    fake = FakeDist()
    monkeypatch.setattr(clock, "dist", fake)
    monkeypatch.setattr(clock, "now", lambda: time.perf_counter() + SKEW * fake.me.rank)
    results, errors = {}, []

    def rank(r: int) -> None:
        fake.me.rank = r
        if r == 1:
            time.sleep(0.1)  # arrives late, as a rank still importing or building does
        ctx = SimpleNamespace(
            rank=r, world_size=2, backend=backend, comm_device=torch.device("cpu")
        )
        try:
            results[r] = clock.clock_offsets(ctx)
        except Exception as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert not errors, errors
    return results[0]


def test_offsets_are_right_when_the_pipeline_transport_does_not_block(monkeypatch):
    offsets, bounds = align(monkeypatch, backend="nccl")
    assert offsets[0] == 0.0
    assert abs(offsets[1] - SKEW) <= bounds[1] + 1e-6, (offsets, bounds)
    assert bounds[1] < 0.05  # the best round trip is short, not the late arrival


@pytest.mark.parametrize("backend", ["nccl", "gloo"])
def test_alignment_uses_a_blocking_cpu_group(monkeypatch, backend):
    fake = FakeDist()
    monkeypatch.setattr(clock, "dist", fake)
    ctx = SimpleNamespace(rank=0, world_size=2, backend=backend)
    expected = FakeDist.GLOO if backend == "nccl" else None  # gloo: the default group
    assert clock.alignment_group(ctx) == expected
