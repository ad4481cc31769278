"""Stated size limits, checked before anything big is allocated, and a cap on messages.

A schedule is refused up front when it has more than

- :data:`MAX_STAGES` stages (4,096 by default): pipeline ranks p and stage chunks (p * v,
  the global stages as PyTorch counts them) alike;
- :data:`MAX_MICROBATCHES` micro-batches m (100,000 by default);
- :data:`MAX_ACTIONS` actions (2,000,000 by default; about a gigabyte to simulate). This
  also bounds stages * micro-batches, which every valid schedule has at least as many
  actions as, and the size of a CSV file (:data:`CSV_BYTES_PER_ACTION` bytes an action).

Raise a limit with an environment variable, read when ppbook is imported
(``PPBOOK_MAX_STAGES``, ``PPBOOK_MAX_MICROBATCHES``, ``PPBOOK_MAX_ACTIONS``), or for a block
of code with :func:`use`::

    with ppbook.limits.use(actions=10_000_000):
        timeline = simulate(build("1f1b", 64, 50_000))

Every message that lists problems is cut to :data:`MAX_MESSAGE` characters by :func:`capped`.
A file given as input is read by :func:`read_regular_file`: regular files only (a FIFO or
``/dev/zero`` would be read for ever) and at most a stated number of bytes.
Standard library only.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace


def _from_env(variable: str, default: int) -> int:
    text = os.environ.get(variable)
    if text is None:
        return default
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{variable} must be a whole number >= 1, got {text[:40]!r}")
    return value


MAX_STAGES = _from_env("PPBOOK_MAX_STAGES", 4096)
"""Most ranks, and most stage chunks, of a schedule (``PPBOOK_MAX_STAGES``)."""
MAX_MICROBATCHES = _from_env("PPBOOK_MAX_MICROBATCHES", 100_000)
"""Most micro-batches of a schedule (``PPBOOK_MAX_MICROBATCHES``)."""
MAX_ACTIONS = _from_env("PPBOOK_MAX_ACTIONS", 2_000_000)
"""Most actions of a schedule, and most stage-and-micro-batch pairs (``PPBOOK_MAX_ACTIONS``)."""
CSV_BYTES_PER_ACTION = 64
"""A CSV file may hold this many bytes per allowed action (PyTorch's with-communication
form spends about 30 on each compute action)."""
MAX_MESSAGE = 2000
"""Most characters of an error message that lists problems."""
MAX_PATH_SHOWN = 200
"""Characters of a path quoted in an error message."""


@dataclass(frozen=True)
class Limits:
    """The limits in force: most stages, micro-batches and actions."""

    stages: int = MAX_STAGES
    microbatches: int = MAX_MICROBATCHES
    actions: int = MAX_ACTIONS

    def __post_init__(self) -> None:
        for name in ("stages", "microbatches", "actions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"limit {name} must be a whole number >= 1, got {value!r}")

    def check(
        self,
        what: str,
        stages: int = 0,
        microbatches: int = 0,
        actions: int = 0,
        ranks: int = 0,
    ) -> None:
        """Raise a ValueError naming ``what`` if a count is beyond its limit."""
        for count, limit, name, variable in (
            (ranks, self.stages, "ranks", "stages"),
            (stages, self.stages, "stages", "stages"),
            (microbatches, self.microbatches, "micro-batches", "microbatches"),
            (actions, self.actions, "actions", "actions"),
            (stages * microbatches, self.actions, "stage and micro-batch pairs", "actions"),
        ):
            if count > limit:
                raise ValueError(
                    f"{what}: {count:,} {name} is beyond the limit of {limit:,}; raise it with "
                    f"PPBOOK_MAX_{variable.upper()}={count} or "
                    f"ppbook.limits.use({variable}={count}) if time and memory allow"
                )


_CURRENT: ContextVar[Limits | None] = ContextVar("ppbook_limits", default=None)


def current() -> Limits:
    """The limits in force here: those of the innermost :func:`use`, else the defaults."""
    limits = _CURRENT.get()
    return limits if limits is not None else Limits()


@contextmanager
def use(
    limits: Limits | None = None,
    *,
    stages: int | None = None,
    microbatches: int | None = None,
    actions: int | None = None,
) -> Iterator[Limits]:
    """Run a block under other limits: a whole :class:`Limits`, or some of them changed."""
    chosen = limits if limits is not None else current()
    changed = {
        k: v
        for k, v in (("stages", stages), ("microbatches", microbatches), ("actions", actions))
        if v is not None
    }
    token = _CURRENT.set(replace(chosen, **changed))
    try:
        yield _CURRENT.get()
    finally:
        _CURRENT.reset(token)


def capped(message: str, limit: int = MAX_MESSAGE) -> str:
    """``message`` cut to ``limit`` characters, saying how much was left out."""
    if len(message) <= limit:
        return message
    cut = message[: limit - 60].rstrip()
    return f"{cut} ... ({len(message) - len(cut):,} more characters left out)"


def listed(head: str, problems: list[str], most: int = 12) -> str:
    """``head`` and the first ``most`` problems, one a line, capped by :func:`capped`."""
    shown = problems[:most]
    more = len(problems) - len(shown)
    tail = f"\n  ... and {more:,} more" if more else ""
    return capped(head + "\n  " + "\n  ".join(shown) + tail)


KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)
"""What a path that is not a regular file is, in messages."""


def file_kind(mode: int) -> str:
    """What a file of ``os.stat`` mode ``mode`` is, in words ("a FIFO (named pipe)")."""
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


def read_regular_file(path: str, flag: str, most: int, hint: str = "") -> bytes:
    """The bytes of the regular file at ``path``; ``flag`` names it in messages (a command
    line flag such as ``"--from-csv"``, or a parameter's name).

    A FIFO, a device (``/dev/zero``), a socket or a folder is refused: reading one could
    wait or run for ever. The file is opened without waiting (``O_NONBLOCK``) and looked at
    through the open descriptor, so nothing swapped in after a check is read; at most
    ``most`` + 1 bytes are read, and a file longer than ``most`` bytes is refused (with
    ``hint``, how to raise the limit, at the end of the message).
    """
    shown = capped(path, MAX_PATH_SHOWN)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ValueError(f"cannot read {shown} ({flag}): {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(
                f"cannot read {shown} ({flag}): it is {file_kind(mode)}; give a regular file"
            )
        chunks, left = [], most + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise ValueError(f"cannot read {shown} ({flag}): {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > most:
        raise ValueError(f"{flag} {shown} is longer than the limit of {most:,} bytes{hint}")
    return data
