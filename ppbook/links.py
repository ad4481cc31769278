"""Links between devices, and where each rank sits: the topology that transfers pay.

Chapter 7 (communication). A point-to-point transfer of ``nbytes`` over a :class:`Link`
takes ``latency + nbytes / bandwidth``: ``nbytes / bandwidth`` is its *serialisation*,
the time the bytes take to leave the sender over the link (the part that occupies the
link, so that messages behind it on the same link wait), and ``latency`` is the time from
then until the receiver has them (a message in flight does not hold the link: the next
one may start serialising at once). This is the usual latency-bandwidth ("alpha-beta")
model, with LogP's rule that only the bandwidth term occupies the link (Culler et al.
1993).

A :class:`Topology` says which link a pair of ranks uses: nodes of ``devices_per_node``
devices joined inside a node by a fast link (NVLink, PCIe) and across nodes by a slower
one (InfiniBand, Ethernet), and the device each rank runs on (rank r on device r unless
``placement`` says otherwise; device d is on node ``d // devices_per_node``). So a
stage placement across nodes decides which stage boundaries pay the slow link: p = 16
ranks on two nodes of 8 cross nodes between ranks 7 and 8 only.

Ranks may share a device (``ranks_per_device`` > 1: rank r on device r // ranks_per_device
by default), as two ranks on one GPU do in the GPU demo's shared-GPU mode (chapter 9).
Their compute then competes for the device: while k of its ranks compute at once, each
progresses ``1 + (k - 1) * interference`` times slower than alone (``interference`` 1:
the device time-slices them, their total rate is that of one; 0: they do not slow each
other). :mod:`ppbook.shared_device` simulates it.

Bandwidths are in bytes per time unit of the costs and latencies in time units, as the
simulator knows no seconds; :meth:`Link.from_gb_per_s` converts the nominal figures of
``data/links.csv`` (GB/s, 1 GB = 10^9 bytes, per direction; :func:`nominal_links` reads
them from a clone of the repository). :func:`boundary_bytes` is
the size of the message that crosses one stage boundary of a transformer: b x s x h
elements (the activation forward, the gradient of the same shape backward).

Two assumptions about real clusters are stated where they are used.
:func:`collective_gbps` assumes nodes with one NIC per GPU (rails: an HGX H100 or H200 node
has eight 400 Gb/s NICs), so a collective spanning nodes crosses on the NICs of all its
members in a node, not on one NIC per node. :func:`pipeline_message_bytes` assumes
Megatron-LM's scatter/gather for a stage boundary under tensor parallelism: each of the t
ranks sends 1/t of the boundary on its own NIC, and the receiving node all-gathers it.

Standard library only.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from ppbook.checks import as_count, as_quantity, finite_result, shown

LINKS_CSV = Path(__file__).resolve().parent / "data" / "links.csv"
"""Nominal link figures with their sources: the ``data/`` folder of a clone (not installed)."""


def boundary_bytes(microbatch_size: int, seq_len: int, hidden: int, dtype_bytes: float) -> float:
    """Bytes of one message across a stage boundary: b x s x h x bytes per element.

    A transformer's stage hands the next one its hidden states, a (b, s, h) tensor, and
    gets back their gradient, the same shape; 2 bytes per element in bf16 or fp16.
    """
    b = as_count(microbatch_size, "microbatch_size", "boundary_bytes")
    s = as_count(seq_len, "seq_len", "boundary_bytes")
    h = as_count(hidden, "hidden", "boundary_bytes")
    size = as_quantity(dtype_bytes, "dtype_bytes", "boundary_bytes", inclusive=False)
    return finite_result(float(b * s * h) * size, "the message size b * s * h * dtype_bytes")


@dataclass(frozen=True)
class Link:
    """One direction of a point-to-point link: ``latency`` (time units) and ``bandwidth``.

    ``bandwidth`` is in bytes per time unit, or None for a link whose bandwidth is not
    modelled (a transfer then takes ``latency`` alone, whatever its size). ``name`` is
    for messages and plots only.
    """

    latency: float = 0.0
    bandwidth: float | None = None
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "latency", as_quantity(self.latency, "latency", "Link"))
        if self.bandwidth is not None:
            bandwidth = as_quantity(
                self.bandwidth, "bandwidth (bytes per time unit)", "Link", inclusive=False
            )
            object.__setattr__(self, "bandwidth", bandwidth)
        if not isinstance(self.name, str):
            raise ValueError(f"Link needs name to be a string, got {shown(self.name)}")

    def serialisation(self, nbytes: float) -> float:
        """Time ``nbytes`` take to leave the sender: ``nbytes / bandwidth`` (0 if unlimited)."""
        if self.bandwidth is None:
            return 0.0
        return finite_result(nbytes / self.bandwidth, "the serialisation time bytes / bandwidth")

    def time(self, nbytes: float) -> float:
        """Time of one transfer of ``nbytes`` on an idle link: ``latency + nbytes / bandwidth``."""
        return finite_result(self.latency + self.serialisation(nbytes), "the transfer time")

    @classmethod
    def from_gb_per_s(
        cls, gb_per_s: float, latency_us: float = 0.0, *, time_unit_s: float, name: str = ""
    ) -> Link:
        """A link from nominal figures: GB/s per direction (10^9 bytes) and microseconds.

        ``time_unit_s`` is how many seconds one time unit of the costs is (1e-3 when the
        costs are in milliseconds), so that bandwidth and latency come out in that unit.
        """
        rate = as_quantity(gb_per_s, "gb_per_s", "Link.from_gb_per_s", inclusive=False)
        micro = as_quantity(latency_us, "latency_us", "Link.from_gb_per_s")
        unit = as_quantity(time_unit_s, "time_unit_s", "Link.from_gb_per_s", inclusive=False)
        return cls(
            latency=finite_result(micro * 1e-6 / unit, "the latency in time units"),
            bandwidth=finite_result(rate * 1e9 * unit, "the bandwidth in bytes per time unit"),
            name=name,
        )


@dataclass(frozen=True)
class Topology:
    """Which :class:`Link` joins each pair of ranks.

    ``intra_node`` joins devices of one node; ``inter_node`` joins devices of different
    nodes, each node holding ``devices_per_node`` devices (give both, or neither: then
    every device is on one node). ``placement[rank]`` is the device of each rank (default
    rank r on device r // ranks_per_device); given, it names a device for every rank of
    the schedule (:meth:`check`), no device for more than ``ranks_per_device`` ranks.
    Each direction between two ranks is its own link: messages from rank a to rank b
    queue behind each other, not behind those from b to a.

    ``ranks_per_device`` (default 1) ranks share each device; while k ranks of one device
    compute at once, each runs ``1 + (k - 1) * interference`` times slower than alone
    (the module's docstring). Two ranks on one device still talk over ``intra_node``.
    """

    intra_node: Link
    inter_node: Link | None = None
    devices_per_node: int | None = None
    placement: tuple[int, ...] | None = None
    ranks_per_device: int = 1
    interference: float = 1.0

    def __post_init__(self) -> None:
        for name in ("intra_node", "inter_node"):
            value = getattr(self, name)
            if not isinstance(value, Link) and not (name == "inter_node" and value is None):
                raise ValueError(
                    f"Topology needs {name} to be a ppbook.links.Link, got "
                    f"{type(value).__name__}; for example Link(latency=0.01, bandwidth=1e6)"
                )
        if (self.devices_per_node is None) != (self.inter_node is None):
            raise ValueError(
                "Topology needs devices_per_node and inter_node together (nodes of that many "
                "devices joined by the inter-node link), or neither (one node)"
            )
        if self.devices_per_node is not None:
            count = as_count(self.devices_per_node, "devices_per_node", "Topology")
            object.__setattr__(self, "devices_per_node", count)
        sharing = as_count(self.ranks_per_device, "ranks_per_device", "Topology")
        object.__setattr__(self, "ranks_per_device", sharing)
        interference = as_quantity(
            self.interference,
            "interference (slowdown each further rank computing on a device adds, 0 to 1 "
            "and beyond)",
            "Topology",
        )
        object.__setattr__(self, "interference", interference)
        if self.placement is not None:
            if isinstance(self.placement, str | bytes) or not hasattr(self.placement, "__iter__"):
                raise ValueError(
                    "Topology needs placement to be a list of devices, one per rank, got "
                    f"{shown(self.placement)}"
                )
            devices = tuple(
                as_count(d, f"placement[{r}] (a device)", "Topology", minimum=0)
                for r, d in enumerate(self.placement)
            )
            seen: dict[int, list[int]] = {}
            for rank, device in enumerate(devices):
                seen.setdefault(device, []).append(rank)
                if len(seen[device]) <= sharing:
                    continue
                if sharing == 1:
                    raise ValueError(
                        f"Topology placement puts ranks {seen[device][0]} and {rank} on device "
                        f"{device}: give each rank its own device (or raise ranks_per_device)"
                    )
                raise ValueError(
                    f"Topology placement puts ranks {', '.join(map(str, seen[device]))} on "
                    f"device {device}, more than ranks_per_device = {sharing}: spread them out "
                    "or raise ranks_per_device"
                )
            object.__setattr__(self, "placement", devices)

    def check(self, num_ranks: int) -> None:
        """Refuse a placement that does not give exactly one device to each of ``num_ranks``."""
        if self.placement is not None and len(self.placement) != num_ranks:
            raise ValueError(
                f"Topology placement gives devices for {len(self.placement)} ranks, but the "
                f"schedule has {num_ranks}: give one device per rank"
            )

    def device(self, rank: int) -> int:
        """The device ``rank`` runs on."""
        if self.placement is None:
            return rank // self.ranks_per_device
        return self.placement[rank]

    def shares_devices(self, num_ranks: int) -> bool:
        """Whether two of ``num_ranks`` ranks run on one device."""
        return len({self.device(rank) for rank in range(num_ranks)}) < num_ranks

    def node(self, rank: int) -> int:
        """The node ``rank``'s device is on (0 when there is one node)."""
        if self.devices_per_node is None:
            return 0
        return self.device(rank) // self.devices_per_node

    def link(self, sender: int, receiver: int) -> Link:
        """The link from rank ``sender`` to rank ``receiver``."""
        if self.inter_node is not None and self.node(sender) != self.node(receiver):
            return self.inter_node
        return self.intra_node

    @property
    def links(self) -> tuple[Link, ...]:
        """The distinct links of this topology."""
        return (self.intra_node,) if self.inter_node is None else (self.intra_node, self.inter_node)


def nominal_links(path: Path | str = LINKS_CSV) -> dict[str, float]:
    """Each link of ``data/links.csv`` and its nominal bandwidth, GB/s in each direction.

    For :meth:`Link.from_gb_per_s`: ``Link.from_gb_per_s(nominal_links()["NVLink 4"],
    time_unit_s=1e-3)``. ``data/README.md`` says where each figure comes from.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(
            f"cannot find {shown(str(path))}: the data/ folder comes with a clone of the "
            "repository, not with the installed package"
        )
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return {row["link"]: float(row["GB_per_s_each_direction"]) for row in rows}


RAIL_NICS_PER_NODE = 8
"""NICs of an HGX/DGX H100 or H200 node: eight single-port ConnectX-7 adapters of
400 Gb/s, one per GPU (``data/links.csv``, "InfiniBand NDR rails (8-GPU node)")."""


def collective_gbps(
    group_size: int, members_per_node: int, intra_gbps: float, nic_gbps: float
) -> float:
    """The per-direction GB/s (bus bandwidth before NCCL's efficiency) a ring collective of
    ``group_size`` ranks gets, ``members_per_node`` of them in each node.

    Assumes nodes with one NIC per GPU (rails, as HGX H100/H200 nodes have eight NICs of
    400 Gb/s = 50 GB/s each way): inside one node the ring runs on ``intra_gbps``
    (NVLink); across nodes NCCL runs one ring channel per member, each leaving the node on
    that member's own NIC, so the ``k = members_per_node`` members' NICs carry the
    crossing together: ``min(intra_gbps, k * nic_gbps)``, not one NIC per node."""
    n = as_count(group_size, "group_size", "collective_gbps")
    k = as_count(members_per_node, "members_per_node", "collective_gbps")
    intra = as_quantity(intra_gbps, "intra_gbps", "collective_gbps", inclusive=False)
    nic = as_quantity(nic_gbps, "nic_gbps", "collective_gbps", inclusive=False)
    if k > n:
        raise ValueError(f"collective_gbps needs members_per_node <= group_size = {n}, got {k}")
    if k == n:
        return intra
    return min(intra, k * nic)


def pipeline_message_bytes(
    microbatch_size: int,
    seq_len: int,
    hidden: int,
    dtype_bytes: float,
    tp: int = 1,
    *,
    scatter_gather: bool = True,
) -> dict[str, float]:
    """What one pipeline boundary costs each of the ``tp`` tensor-parallel ranks of a stage,
    per message, in bytes: ``"sent"`` over the link between stages and ``"gathered"``, an
    all-gather's bytes inside the receiving node.

    Every tensor-parallel rank holds the whole (b, s, h) boundary (without sequence
    parallelism). With Megatron-LM's scatter/gather (Narayanan et al. 2021, sec. 4.1;
    ``scatter_gather``, the default) each of the t ranks sends only its 1/t of it, over
    its own NIC (rails), and the receiving stage all-gathers the pieces over NVLink:
    ``b s h e / t`` sent and ``(t-1)/t b s h e`` gathered per rank. Without it, each rank
    sends the whole boundary to its peer: ``b s h e``, nothing gathered. (With sequence
    parallelism each rank already holds 1/t: it sends that, and the next stage needs no
    gather; pass ``scatter_gather=True`` and ignore ``"gathered"``.)"""
    whole = boundary_bytes(microbatch_size, seq_len, hidden, dtype_bytes)
    t = as_count(tp, "tp", "pipeline_message_bytes")
    if not isinstance(scatter_gather, bool):
        raise ValueError(
            "pipeline_message_bytes needs scatter_gather True or False, got "
            f"{shown(scatter_gather)}"
        )
    if not scatter_gather or t == 1:
        return {"sent": whole, "gathered": 0.0}
    return {"sent": whole / t, "gathered": (t - 1) / t * whole}
