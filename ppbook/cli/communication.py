"""The communication options of ``ppbook simulate``: message size, links, contention, overlap.

:func:`add_options` registers the argument group, :func:`costs_kwargs` turns the parsed
options into the communication fields of :class:`ppbook.costs.Costs` (``comm``,
``comm_bytes``, ``bandwidth``, ``topology``, ``contention``, ``overlap_send``). Without
``--devices-per-node`` every pair of ranks is joined by one link of latency ``--comm``
and bandwidth ``--bandwidth``; with it, that link joins the devices of a node and the
``--inter-node-*`` link joins nodes (:class:`ppbook.links.Topology`), one such link per
device (rails: each GPU its own NIC, as in HGX H100/H200 nodes).
"""

from __future__ import annotations

import argparse

from ppbook.checks import as_quantity, shown
from ppbook.links import Link, Topology

OWNER = "ppbook simulate"


def add_options(parser: argparse.ArgumentParser) -> None:
    """Add the ``communication`` argument group to ``parser`` (``--comm`` is the latency)."""
    group = parser.add_argument_group(
        "communication (a transfer takes --comm + --message-bytes / --bandwidth)"
    )
    group.add_argument(
        "--message-bytes",
        type=float,
        default=0.0,
        metavar="N",
        help="bytes of one message across a stage boundary, b*s*h*bytes per element; "
        "under t-way tensor parallelism with Megatron's scatter/gather each of the t ranks "
        "sends 1/t of it (ppbook.links.pipeline_message_bytes) (default 0; needs --bandwidth)",
    )
    group.add_argument(
        "--bandwidth",
        type=float,
        metavar="B",
        help="bytes per time unit of the link between ranks (inside a node with "
        "--devices-per-node); default: unlimited",
    )
    group.add_argument(
        "--contention",
        action="store_true",
        help="messages on the same link (one direction between two ranks) queue, each "
        "holding it for --message-bytes / bandwidth, in the order the sender runs them",
    )
    group.add_argument(
        "--no-overlap-send",
        action="store_true",
        help="a rank sends its output itself after computing it and is busy until the bytes "
        "have left (default: sends overlap compute)",
    )
    group.add_argument(
        "--devices-per-node",
        type=int,
        metavar="K",
        help="nodes of K devices: ranks on different nodes use the --inter-node-* link "
        "(rank r on device r, device d on node d // K, unless --placement)",
    )
    group.add_argument(
        "--inter-node-bandwidth",
        type=float,
        metavar="B",
        help="bytes per time unit of the link between nodes, per device: each device has "
        "its own NIC (rails, as HGX H100/H200 nodes' eight 400 Gb/s NICs), so each rank's "
        "messages to another node queue on its own link (default: unlimited)",
    )
    group.add_argument(
        "--inter-node-latency",
        type=float,
        default=0.0,
        metavar="T",
        help="latency of the link between nodes, in time units (default 0)",
    )
    group.add_argument(
        "--placement",
        metavar="D0,D1,...",
        help="the device of each rank, one per rank (default rank r on device r)",
    )


def costs_kwargs(args: argparse.Namespace) -> dict:
    """The communication fields of :class:`~ppbook.costs.Costs` the options ask for."""
    kwargs = {
        "comm_bytes": as_quantity(args.message_bytes, "--message-bytes", OWNER),
        "contention": args.contention,
        "overlap_send": not args.no_overlap_send,
    }
    comm = as_quantity(args.comm, "--comm", OWNER)
    bandwidth = _bandwidth(args.bandwidth, "--bandwidth")
    if args.devices_per_node is None:
        given = [
            flag
            for flag, value in (
                ("--inter-node-bandwidth", args.inter_node_bandwidth),
                ("--inter-node-latency", args.inter_node_latency or None),
                ("--placement", args.placement),
            )
            if value is not None
        ]
        if given:
            raise ValueError(f"{', '.join(given)} needs --devices-per-node (devices in a node)")
        return {**kwargs, "comm": comm, "bandwidth": bandwidth}
    inter = Link(
        latency=as_quantity(args.inter_node_latency, "--inter-node-latency", OWNER),
        bandwidth=_bandwidth(args.inter_node_bandwidth, "--inter-node-bandwidth"),
        name="inter-node",
    )
    topology = Topology(
        intra_node=Link(latency=comm, bandwidth=bandwidth, name="intra-node"),
        inter_node=inter,
        devices_per_node=_devices_per_node(args.devices_per_node),
        placement=None if args.placement is None else _placement(args.placement),
    )
    return {**kwargs, "topology": topology}


def _bandwidth(value: float | None, flag: str) -> float | None:
    return None if value is None else as_quantity(value, flag, OWNER, inclusive=False)


def _devices_per_node(value: int) -> int:
    if value < 1:
        raise ValueError(f"--devices-per-node must be >= 1, got {value}")
    return value


def _placement(text: str) -> tuple[int, ...]:
    items = [item.strip() for item in text.split(",")]
    if not all(item.isdigit() for item in items):
        raise ValueError(
            f"--placement must be device numbers (integers >= 0) separated by commas, "
            f"one per rank, got {shown(text)}"
        )
    return tuple(int(item) for item in items)
