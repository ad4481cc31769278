"""Point-to-point messages between stages, each carrying its micro-batch identity.

Every message is a small int64 header, then the payload tensor::

    header = [stage, what, microbatch, dtype, ndim, *shape, 0-padding]

``stage`` is the receiving stage, ``what`` is ``ACTIVATION`` (for its forward) or
``GRADIENT`` (for its backward) (:mod:`ppbook.runtime.plan`). Why carry an identity at
all? A schedule may send two messages to a rank in another order than that rank uses them
(an interleaved or zero-bubble order, or simply a hand-written one). Messages without
identity would then pair up with the wrong micro-batch: the loss can still look right while
the gradients are wrong. The receiver therefore checks each header against what it
expects (``matching``):

- ``"mailbox"`` (the default): a message that arrives before it is needed is kept in a
  per-peer mailbox keyed by its identity, and taken out when asked for;
- ``"strict"``: the next message from the peer must be the one asked for, else
  :class:`MessageMismatch`, which names both;
- ``"order"``: take the next message, whatever it is (what an untagged runtime does; only
  to show what goes wrong).

Sends are non-blocking (``isend``; each kept until complete), so two neighbours that send
to each other at the same time (1F1B's steady state) never wait on each other. Receives are
posted ahead: the schedule says which messages each peer sends, in which order, and the
model says their shapes, so a rank keeps the next ``prefetch`` receives from each peer
posted (``irecv``) and waits on one only when it needs the data. Why: a transfer starts when
both sides have posted; posted late, it waits for the sender's communication thread, which
shares a core with the sender's busy compute (on this book's 2-core machine that cost ~4 ms
per message instead of ~0.3 ms). Messages between two ranks on one group arrive in the order
they were sent. Not ``batch_isend_irecv``: gloo is known to hang with it. With
``PPBOOK_VERBOSE=1`` every send and receive is traced on stderr with the rank as prefix.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ppbook.runtime.context import Context
from ppbook.runtime.plan import Identity, describe

Layout = Callable[[Identity], tuple[torch.dtype, tuple[int, ...]]]

MAX_DIMS = 6
HEADER_SIZE = 5 + MAX_DIMS
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
MATCHING = ("mailbox", "strict", "order")
PREFETCH = 4


def encode_header(identity: Identity, tensor: torch.Tensor) -> list[int]:
    """The header of a message carrying ``tensor`` to ``identity``."""
    if tensor.dim() > MAX_DIMS or tensor.dtype not in DTYPES:
        raise ValueError(
            f"a message holds a tensor of at most {MAX_DIMS} dimensions with a dtype in "
            f"{DTYPES}; got {tensor.dim()} dimensions of {tensor.dtype}"
        )
    shape = list(tensor.shape) + [0] * (MAX_DIMS - tensor.dim())
    return [*identity, DTYPES.index(tensor.dtype), tensor.dim(), *shape]


def decode_header(header: list[int]) -> tuple[Identity, torch.dtype, list[int]]:
    """``(identity, dtype, shape)`` from a header made by :func:`encode_header`."""
    stage, what, microbatch, dtype, ndim = header[:5]
    return (stage, what, microbatch), DTYPES[dtype], header[5 : 5 + ndim]


class MessageMismatch(RuntimeError):
    """A message arrived for another (stage, micro-batch) than the receiver expected."""


class CommError(RuntimeError):
    """A receive failed: the peer died, crashed, hung past the timeout, or sent the unexpected."""


@dataclass
class Posted:
    """A receive posted ahead: the message expected, its two requests and buffers."""

    identity: Identity
    header_work: dist.Work
    header: torch.Tensor
    payload_work: dist.Work
    payload: torch.Tensor


class Messenger:
    """One rank's messages: sends, receives posted ahead, and per-peer mailboxes.

    ``incoming[peer]`` lists the messages ``peer`` sends to this rank in each step, in its
    sending order (:func:`ppbook.runtime.plan.incoming`); ``layout(identity)`` gives the
    dtype and shape of a message's payload.
    """

    def __init__(
        self,
        ctx: Context,
        incoming: dict[int, list[Identity]],
        layout: Layout,
        matching: str = "mailbox",
        prefetch: int = PREFETCH,
    ):
        if matching not in MATCHING:
            raise ValueError(f"matching must be one of {', '.join(MATCHING)}, got {matching!r}")
        self.ctx = ctx
        self.incoming = incoming
        self.layout = layout
        self.matching = matching
        self.prefetch = prefetch
        self.expected: dict[int, deque[Identity]] = {}  # not posted yet, in sending order
        self.posted: dict[int, deque[Posted]] = {}  # posted, in sending order
        self.mailbox: dict[int, dict[Identity, torch.Tensor]] = {}
        self.in_flight: list[tuple[dist.Work, torch.Tensor]] = []  # sends, kept until done

    def start_step(self) -> None:
        """Expect this step's messages; post the first receives from every peer."""
        for src, messages in self.incoming.items():
            self.expected[src] = deque(messages)
            self.posted[src] = deque()
            self.mailbox[src] = {}
            self._post(src, self.prefetch)

    def send(self, tensor: torch.Tensor, dst: int, identity: Identity) -> None:
        """Start sending ``tensor`` to rank ``dst`` for ``identity``; do not wait."""
        ctx = self.ctx
        payload = tensor.detach().to(ctx.comm_device).contiguous()
        header = torch.tensor(encode_header(identity, payload), device=ctx.comm_device)
        ctx.trace(f"send {describe(identity)} to rank {dst}: {_shape(payload)}")
        group = ctx.group_to(dst)
        self.in_flight = [(work, t) for work, t in self.in_flight if not work.is_completed()]
        for message in (header, payload):
            self.in_flight.append((dist.isend(message, dst, group=group), message))

    def recv(self, src: int, identity: Identity) -> torch.Tensor:
        """Wait for the message for ``identity`` from rank ``src``; return its payload."""
        early = self.mailbox[src].pop(identity, None)
        if early is not None:
            self.ctx.trace(f"take {describe(identity)} from the mailbox of rank {src}")
            return early
        while True:
            got, payload = self._next(src, identity)
            if got == identity or self.matching == "order":
                return payload
            if self.matching == "strict":
                raise MessageMismatch(
                    f"rank {self.ctx.rank} expected the {describe(identity)} from rank {src}, "
                    f"but the next message was the {describe(got)}: the sender sends in "
                    "another order than this rank receives (use matching='mailbox')"
                )
            self.ctx.trace(f"keep {describe(got)} from rank {src} in the mailbox")
            self.mailbox[src][got] = payload

    def _post(self, src: int, count: int) -> None:
        """Post receives for the next ``count`` messages expected from ``src``."""
        ctx, group = self.ctx, self.ctx.group_from(src)
        for _ in range(min(count, len(self.expected[src]))):
            identity = self.expected[src].popleft()
            dtype, shape = self.layout(identity)
            header = torch.empty(HEADER_SIZE, dtype=torch.int64, device=ctx.comm_device)
            payload = torch.empty(shape, dtype=dtype, device=ctx.comm_device)
            header_work = dist.irecv(header, src, group=group)
            payload_work = dist.irecv(payload, src, group=group)
            self.posted[src].append(Posted(identity, header_work, header, payload_work, payload))

    def _next(self, src: int, wanted: Identity) -> tuple[Identity, torch.Tensor]:
        """Wait for the next message from ``src`` (in its sending order); check its header."""
        ctx = self.ctx
        if not self.posted[src]:
            raise CommError(
                f"rank {ctx.rank} waits for the {describe(wanted)} from rank {src}, but rank "
                f"{src} has nothing more to send in this step"
            )
        item = self.posted[src].popleft()
        self._post(src, 1)  # keep the window full
        self._wait(item.header_work, src, wanted)
        identity, dtype, shape = decode_header(item.header.tolist())
        expected = (item.identity, item.payload.dtype, list(item.payload.shape))
        if (identity, dtype, shape) != expected:
            raise CommError(
                f"rank {ctx.rank} expected the {describe(item.identity)} "
                f"({_shape(item.payload)}) from rank {src}, but the header says "
                f"{describe(identity)} ({dtype}, {tuple(shape)}): the ranks disagree on "
                "the schedule or the model"
            )
        self._wait(item.payload_work, src, wanted)
        ctx.trace(f"recv {describe(identity)} from rank {src}: {_shape(item.payload)}")
        return identity, item.payload.to(ctx.device)

    def _wait(self, work: dist.Work, src: int, wanted: Identity) -> None:
        """Wait for a posted receive; a failure or timeout becomes a CommError that says so."""
        try:
            work.wait()
        except RuntimeError as exc:
            raise CommError(
                f"rank {self.ctx.rank}: waiting for the {describe(wanted)} from rank {src} "
                f"failed (the peer died, crashed, or did not send within the "
                f"{self.ctx.timeout:g} s timeout): {exc}"
            ) from exc

    def finish_step(self) -> None:
        """Wait until every send is complete; check that every message was used."""
        for work, _ in self.in_flight:
            work.wait()
        self.in_flight.clear()
        unused = [
            f"{describe(i)} from rank {src}" for src, box in self.mailbox.items() for i in box
        ]
        unused += [
            f"{describe(i)} from rank {src} (not received)"
            for src in self.posted
            for i in [p.identity for p in self.posted[src]] + list(self.expected[src])
        ]
        if unused:
            raise CommError(f"rank {self.ctx.rank} ends a step with unused messages: {unused}")


def _shape(tensor: torch.Tensor) -> str:
    return f"{str(tensor.dtype).removeprefix('torch.')} {tuple(tensor.shape)}"
