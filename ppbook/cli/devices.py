"""The shared-device options of ``ppbook simulate``: ranks that share a device, and copies.

:func:`add_options` registers the argument group, :func:`costs_kwargs` adds what it asks
for to the communication fields of :class:`ppbook.costs.Costs`
(:func:`ppbook.cli.communication.costs_kwargs`): ``send_copy``, ``recv_copy``,
``input_copy``, and with ``--ranks-per-device`` a :class:`ppbook.links.Topology` whose
devices hold that many ranks (the topology of ``--devices-per-node``, or one link of
``--comm`` and ``--bandwidth``). :mod:`ppbook.shared_device` simulates them (chapter 9).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from ppbook.checks import as_quantity
from ppbook.links import Link, Topology

OWNER = "ppbook simulate"


def add_options(parser: argparse.ArgumentParser) -> None:
    """Add the ``shared devices and copies`` argument group (:mod:`ppbook.shared_device`)."""
    group = parser.add_argument_group(
        "shared devices and copies (chapter 9: two ranks on one GPU, messages through host memory)"
    )
    group.add_argument(
        "--ranks-per-device",
        type=int,
        default=1,
        metavar="N",
        help="N ranks share each device (rank r on device r // N, unless --placement): while "
        "k of them compute at once, each runs 1 + (k-1) * --interference times slower "
        "(default 1: a device per rank)",
    )
    group.add_argument(
        "--interference",
        type=float,
        metavar="C",
        help="slowdown each further rank computing on a device adds (default 1: the device "
        "time-slices them; 0: they do not slow each other); needs --ranks-per-device >= 2",
    )
    for flag, what in (
        (
            "--send-copy",
            "the sender is busy after its action for each message to another "
            "rank (device-to-host copy)",
        ),
        (
            "--recv-copy",
            "the receiver is busy before its action for each message from "
            "another rank, once it is there (host-to-device copy)",
        ),
        (
            "--input-copy",
            "a rank is busy before a forward on the first stage of a route "
            "(copying the model's input to the device)",
        ),
    ):
        group.add_argument(
            flag, type=float, default=0.0, metavar="T", help=f"time units {what}; default 0"
        )


def costs_kwargs(args: argparse.Namespace, kwargs: dict) -> dict:
    """``kwargs`` (the communication fields of :class:`Costs`) with the shared-device
    options: the copies, and the devices' sharing in the topology."""
    copies = {
        name: as_quantity(getattr(args, name), f"--{name.replace('_', '-')}", OWNER)
        for name in ("send_copy", "recv_copy", "input_copy")
    }
    if args.ranks_per_device < 1:
        raise ValueError(f"--ranks-per-device must be >= 1, got {args.ranks_per_device}")
    if args.ranks_per_device == 1:
        if args.interference is not None:
            raise ValueError(
                "--interference needs --ranks-per-device 2 or more (ranks that share a device)"
            )
        return {**kwargs, **copies}
    interference = 1.0 if args.interference is None else args.interference
    interference = as_quantity(interference, "--interference", OWNER)
    sharing = {"ranks_per_device": args.ranks_per_device, "interference": interference}
    if "topology" in kwargs:  # --devices-per-node gave one
        topology = replace(kwargs["topology"], **sharing)
    else:
        link = Link(latency=kwargs.pop("comm"), bandwidth=kwargs.pop("bandwidth"), name="link")
        topology = Topology(intra_node=link, **sharing)
    return {**kwargs, **copies, "topology": topology}
