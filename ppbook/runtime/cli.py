"""``ppbook run``: placeholder until the runtime lands (being written)."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    """Register ``ppbook run``."""
    parser = subparsers.add_parser("run", help="run a schedule on real processes (coming)")
    parser.set_defaults(handler=_not_yet)


def _not_yet(args) -> int:
    raise NotImplementedError("ppbook run is being written")
