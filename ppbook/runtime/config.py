"""What a run is asked to do, checked before any process starts.

:class:`RunConfig` is plain, picklable data: the schedule (a name of
:data:`ppbook.schedules.SCHEDULES` or a :class:`~ppbook.schedule.Schedule`), the model
(an example's name, an ``nn.Sequential`` or a list of blocks), sizes, steps, device and
timeout. :func:`check` turns every bad argument into a ValueError that says what was
wrong, so a run never starts processes only to fail in all of them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field

from ppbook.checks import as_quantity
from ppbook.schedule import Schedule
from ppbook.simulate import simulate

DTYPES = ("float32", "float64")
DEVICES = ("cpu", "cuda")
FAULTS = ("raise", "hang", "exit")
OPTIMIZERS = ("sgd", "adam")


@dataclass(frozen=True)
class Fault:
    """A failure injected on purpose, to see how the run stops: tests and chapter 3.

    ``kind`` "raise" raises an exception, "hang" sleeps forever and "exit" ends the
    process without a word, when ``rank`` is about to run its action number ``position``
    (counted from 0). Written ``raise@1:2`` on the command line.
    """

    kind: str
    rank: int
    position: int

    @classmethod
    def parse(cls, text: str) -> Fault:
        """Read ``KIND@RANK:POSITION``, as ``raise@1:2``."""
        kind, _, where = text.partition("@")
        rank, _, position = where.partition(":")
        if kind not in FAULTS or not rank.isdigit() or not position.isdigit():
            raise ValueError(
                f"cannot read fault {text!r}: expected KIND@RANK:POSITION with KIND one of "
                f"{', '.join(FAULTS)}, e.g. 'raise@1:2' (rank 1 raises at its 3rd action)"
            )
        return cls(kind, int(rank), int(position))


@dataclass(frozen=True)
class RunConfig:
    """One pipeline run. The defaults make a small MLP run 1F1B on two CPU processes."""

    schedule: str | Schedule = "1f1b"
    nproc: int = 2
    num_microbatches: int = 8
    num_chunks: int | None = None
    model: object = "mlp"  # "mlp", "transformer", an nn.Sequential or a list of blocks
    hidden: int = 32
    num_blocks: int | None = None  # example models: None gives one block per model part
    seq_len: int = 8  # transformer only
    input_shape: tuple[int, ...] | None = None  # per sample; needed for a model given as modules
    microbatch_size: int = 4
    steps: int = 1
    optimizer: str = "sgd"  # stepped after every step; see ppbook.runtime.training
    lr: float = 0.01  # the optimizer's learning rate; 0 keeps the parameters as they are
    dtype: str = "float32"
    device: str = "cpu"
    timeout: float = 60.0
    seed: int = 0
    num_threads: int | None = None  # torch threads per rank; None: CPU cores / nproc
    collect_grads: bool = False  # gather every parameter gradient on rank 0
    matching: str = "mailbox"  # see ppbook.runtime.comm
    fault: Fault | None = None
    verbose: bool = False
    label: str = field(default="", compare=False)  # free text to tell runs apart


def build_schedule(config: RunConfig) -> Schedule:
    """The schedule ``config`` names, for p = ``nproc`` (or the one it holds)."""
    if isinstance(config.schedule, Schedule):
        return config.schedule
    from ppbook.schedules import build

    return build(config.schedule, config.nproc, config.num_microbatches, config.num_chunks)


def num_parts(schedule: Schedule) -> int:
    """How many parts the model is cut into: one per stage, or per route position (DualPipe)."""
    return len(schedule.route(0))


def check(config: RunConfig) -> Schedule:
    """Check ``config``; return its schedule. Raises ValueError saying what is wrong."""
    _positive_int("nproc", config.nproc)
    _positive_int("microbatch_size", config.microbatch_size)
    _positive_int("steps", config.steps)
    _positive_int("hidden", config.hidden)
    if config.num_threads is not None:
        _positive_int("num_threads", config.num_threads)
    if isinstance(config.timeout, bool) or not isinstance(config.timeout, numbers.Real):
        raise ValueError(f"timeout must be a number of seconds, got {config.timeout!r}")
    if not (math.isfinite(config.timeout) and config.timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds, got {config.timeout}")
    for name, value, allowed in (
        ("dtype", config.dtype, DTYPES),
        ("device", config.device, DEVICES),
        ("matching", config.matching, ("mailbox", "strict", "order")),
        ("optimizer", config.optimizer, OPTIMIZERS),
    ):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    as_quantity(config.lr, "lr", "a run")
    if config.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ValueError("device 'cuda' needs a GPU, but torch.cuda.is_available() is False")

    schedule = build_schedule(config)
    if schedule.num_ranks != config.nproc:
        raise ValueError(
            f"the schedule runs on {schedule.num_ranks} ranks, but nproc is {config.nproc}"
        )
    if schedule.num_stages < config.nproc:
        raise ValueError(
            f"more ranks ({config.nproc}) than stages ({schedule.num_stages}): "
            "every rank needs at least one stage"
        )
    simulate(schedule)  # validates, and names the stuck ranks of a schedule that deadlocks

    parts = num_parts(schedule)
    blocks = _count_blocks(config, parts)
    if blocks < parts:
        raise ValueError(
            f"the model has {blocks} block{'s' if blocks != 1 else ''}, fewer than the {parts} "
            f"pipeline parts of "
            f"{schedule.name!r} with {config.nproc} ranks: give it at least {parts} blocks"
        )
    if config.fault is not None and not 0 <= config.fault.rank < config.nproc:
        raise ValueError(f"fault on rank {config.fault.rank}, but ranks are 0..{config.nproc - 1}")
    return schedule


def _count_blocks(config: RunConfig, parts: int) -> int:
    from ppbook.runtime.models import MODELS

    if isinstance(config.model, str):
        if config.model not in MODELS:
            raise ValueError(f"unknown model {config.model!r}; choose one of {', '.join(MODELS)}")
        if config.num_blocks is None:
            return parts
        _positive_int("num_blocks", config.num_blocks)
        return config.num_blocks
    from ppbook.runtime.models import as_blocks

    if config.input_shape is None:
        raise ValueError("a model given as modules needs input_shape (the shape of one sample)")
    return len(as_blocks(config.model))


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def input_shape(config: RunConfig) -> tuple[int, ...]:
    """The shape of one input sample."""
    if config.input_shape is not None:
        return tuple(config.input_shape)
    if config.model == "transformer":
        return (config.seq_len, config.hidden)
    return (config.hidden,)


def same_group(configs: Sequence[RunConfig]) -> None:
    """Runs launched together share processes: they need the same ranks, device and timeout."""
    first = configs[0]
    for config in configs[1:]:
        for name in ("nproc", "device", "timeout", "num_threads", "verbose"):
            if getattr(config, name) != getattr(first, name):
                raise ValueError(
                    f"runs launched together must share {name}: got {getattr(first, name)!r} "
                    f"and {getattr(config, name)!r}"
                )
