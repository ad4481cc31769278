"""The context object a rank passes around instead of process-global state.

:func:`init_distributed` joins the process group and returns a :class:`Context` (rank,
world size, device, backend, the two point-to-point groups, timeout, tracing).

Rendezvous. ``ppbook run`` and :func:`ppbook.runtime.launch.launch` start the ranks on one
machine and meet through a file (``torch.distributed.FileStore`` in a fresh temporary
folder): no port is chosen and nothing listens for the rendezvous. PyTorch's default
TCP store would listen on every interface, whatever ``MASTER_ADDR`` says. Gloo's own
transport opens one listening socket per rank; :func:`init_distributed` binds it to the
loopback interface (``GLOO_SOCKET_IFNAME``, set in the rank's own process), so a local run
is reachable from this machine only (:func:`listening_addresses` lets a test check).
Under ``torchrun`` (``RANK`` and ``WORLD_SIZE`` set) the ranks meet through ``env://`` as
torchrun arranges, for real multi-node runs.

Backends: gloo on CPU; NCCL when each rank has its own GPU; when ranks share a GPU, gloo
with every transfer staged through CPU memory (NCCL cannot run two ranks on one GPU).

The device first. A rank on a GPU makes its device current before anything else touches
CUDA, before the rendezvous and the process group, before its model is built
(:func:`make_current`): ``torch.cuda.set_device``, then one tiny backward on the device,
which makes the device's primary context current in the thread where autograd runs the
rank's backward passes. The H200 recording's ranks (two on device 0) each warned
"Attempting to run cuBLAS, but there was no current CUDA context!" at their first backward:
as we read PyTorch, a new thread's current device is already 0, so autograd's setting of
device 0 there binds no context, and its first cuBLAS call finds none. Not yet run on a
GPU since: ``benchmarks/gpu_check.py`` looks for the warning in the demo's output.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

STARTUP_TIMEOUT = 120.0
"""Seconds every rank may take to start (importing torch) before the others give up."""


@dataclass
class Context:
    """What one rank knows about the run: who it is and how it talks to the others.

    ``up`` carries messages from a lower to a higher rank and ``down`` the other way, so
    that a send never waits behind a transfer in the opposite direction (with NCCL, the
    operations between two ranks of one group run in order on one stream).
    """

    rank: int
    world_size: int
    device: torch.device
    backend: str  # "gloo" or "nccl"
    via_cpu: bool  # ranks share a GPU: transfers go through CPU memory over gloo
    timeout: float  # seconds a receive may wait before it is an error
    verbose: bool = False
    up: object = None  # process group: messages to a higher rank
    down: object = None  # process group: messages to a lower rank

    @property
    def comm_device(self) -> torch.device:
        """Where message tensors live: the GPU for NCCL, CPU memory for gloo."""
        return self.device if self.backend == "nccl" else torch.device("cpu")

    def group_to(self, peer: int):
        """The group that carries messages between this rank and ``peer``, either way."""
        return self.up if peer > self.rank else self.down

    def group_from(self, peer: int):
        """The group on which messages from ``peer`` arrive."""
        return self.down if peer > self.rank else self.up

    def trace(self, text: str) -> None:
        """With ``PPBOOK_VERBOSE=1``: print ``text`` to stderr with the rank as prefix."""
        if self.verbose:
            print(f"[rank {self.rank}] {text}", file=sys.stderr, flush=True)

    def close(self) -> None:
        """Leave the process group."""
        if dist.is_initialized():
            dist.destroy_process_group()


def pick_device(
    kind: str, local_rank: int, local_world_size: int
) -> tuple[torch.device, str, bool]:
    """``(device, backend, via_cpu)`` for a rank asked to run on ``kind`` ("cpu" or "cuda").

    CUDA is touched only when asked for: a CPU run makes no CUDA call.
    """
    if kind == "cpu":
        return torch.device("cpu"), "gloo", False
    num_gpus = torch.cuda.device_count()
    if num_gpus == 0:
        raise ValueError("device 'cuda' needs a GPU, but torch.cuda.device_count() is 0")
    if local_world_size <= num_gpus:
        return torch.device("cuda", local_rank), "nccl", False
    return torch.device("cuda", local_rank % num_gpus), "gloo", True


def make_current(device: torch.device) -> None:
    """Make ``device`` this rank's current device, in this thread and in autograd's (a CPU
    device: nothing, and no CUDA call)."""
    if device.type != "cuda":
        return
    torch.cuda.set_device(device)
    bind_backward_thread(device)


def bind_backward_thread(device: torch.device) -> None:
    """Run one element-wise backward on ``device``: its first kernel launch, before any
    cuBLAS call, binds the device's primary context in autograd's thread for the device."""
    x = torch.ones(2, device=device, requires_grad=True)
    (x * 2.0).sum().backward()
    torch.cuda.synchronize(device)


def local_placement(rank: int, world_size: int, rendezvous: object) -> tuple[int, int]:
    """``(local_rank, local_world_size)``: this machine's share of the ranks (a local run:
    all of them; under torchrun: ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE``)."""
    if rendezvous is not None:
        return rank, world_size
    rank = int(os.environ.get("RANK", rank))
    world_size = int(os.environ.get("WORLD_SIZE", world_size))
    return (
        int(os.environ.get("LOCAL_RANK", rank)),
        int(os.environ.get("LOCAL_WORLD_SIZE", world_size)),
    )


def loopback_interface() -> str:
    """The name of the loopback network interface ("lo" on Linux, "lo0" on macOS)."""
    return "lo0" if sys.platform == "darwin" else "lo"


def init_distributed(
    rank: int,
    world_size: int,
    *,
    device: str = "cpu",
    timeout: float = 60.0,
    rendezvous: str | Path | None = None,
    verbose: bool = False,
) -> Context:
    """Join the process group; return this rank's :class:`Context`.

    ``rendezvous``: a file path in a fresh folder that every rank of a local run shares
    (gloo then listens on loopback only), or None for ``env://`` (torchrun). Ranks first
    wait up to :data:`STARTUP_TIMEOUT` for each other, then make the process group with
    ``timeout``, which bounds every later wait: a dead or hung peer is an error after
    ``timeout`` seconds, not an endless wait. The rank's device is made current first of
    all (:func:`make_current`).
    """
    torch_device, backend, via_cpu = pick_device(
        device, *local_placement(rank, world_size, rendezvous)
    )
    make_current(torch_device)  # before the rendezvous, the process group and the model
    if rendezvous is not None:
        os.environ["GLOO_SOCKET_IFNAME"] = loopback_interface()  # this rank's process only
        store = dist.FileStore(str(rendezvous), world_size)
    else:
        store, rank, world_size = next(
            dist.rendezvous("env://", rank, world_size, timeout=timedelta(seconds=STARTUP_TIMEOUT))
        )
    store.set_timeout(timedelta(seconds=STARTUP_TIMEOUT))
    store.set(f"ppbook/arrived/{rank}", "1")  # wait for all ranks before the short timeout
    store.wait([f"ppbook/arrived/{r}" for r in range(world_size)])
    wait = timedelta(seconds=timeout)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=wait)
    ranks = list(range(world_size))
    up, down = dist.new_group(ranks, timeout=wait), dist.new_group(ranks, timeout=wait)
    return Context(rank, world_size, torch_device, backend, via_cpu, timeout, verbose, up, down)


def listening_addresses() -> list[str] | None:
    """The ``address:port`` of every TCP socket this process listens on (None off Linux)."""
    proc = Path("/proc/self")
    if not (proc / "net" / "tcp").exists():
        return None
    inodes = set()
    for fd in (proc / "fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed while we looked
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = []
    for table in ("tcp", "tcp6"):
        path = proc / "net" / table
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # state 0A: LISTEN
                found.append(_decode_address(fields[1]))
    return found


def _decode_address(text: str) -> str:
    """``/proc/net/tcp``'s ``0100007F:1F90`` (little-endian words) as ``127.0.0.1:8080``."""
    hex_ip, hex_port = text.split(":")
    raw = b"".join(bytes.fromhex(hex_ip[i : i + 8])[::-1] for i in range(0, len(hex_ip), 8))
    address = ipaddress.ip_address(raw)
    host = f"[{address}]" if address.version == 6 else str(address)
    return f"{host}:{int(hex_port, 16)}"


def is_loopback(address: str) -> bool:
    """Whether ``address:port`` (as :func:`listening_addresses` gives it) is on loopback."""
    host = address.rsplit(":", 1)[0].strip("[]")
    ip = ipaddress.ip_address(host)
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback
