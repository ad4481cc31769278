"""What a run is asked to do, checked before any process starts.

:class:`RunConfig` is plain, picklable data: the schedule (a name of
:data:`ppbook.schedules.SCHEDULES` or a :class:`~ppbook.pipeline_schedule.Schedule`), the model
(an example's name, an ``nn.Sequential`` or a list of blocks), sizes, steps, device and
timeout. :func:`check` turns every bad argument into a ValueError that says what was
wrong, so a run never starts processes only to fail in all of them. Numbers follow the
package's one rule (:mod:`ppbook.checks`).

This module is the bottom of the runtime: it imports no other runtime module, and torch
only to look at a model given as modules or to ask whether there is a GPU.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from importlib.machinery import ModuleSpec

from ppbook.checks import as_count, as_quantity, shown
from ppbook.pipeline_schedule import Schedule
from ppbook.simulate import simulate

DTYPES = ("float32", "float64", "bfloat16")
"""Training precisions: float32 and float64 train in that dtype throughout; bfloat16 is
mixed precision (bf16 compute, fp32 master weights, gradient accumulation and optimizer
state: :mod:`ppbook.runtime.precision`)."""
DEVICES = ("cpu", "cuda")
FAULTS = ("raise", "hang", "exit", "abort")
OPTIMIZERS = ("sgd", "adam")
MATCHINGS = ("mailbox", "strict", "order")
MODELS = ("mlp", "transformer")
"""The example models of :mod:`ppbook.runtime.models`, by name."""
ENGINES = ("ppbook", "torch")
"""Who runs the schedule: ppbook's runtime, or PyTorch's (:mod:`ppbook.runtime.torch_engine`)."""

MAX_TIMEOUT = 7 * 24 * 3600.0
"""The longest wait a rank may be given, in seconds (a week); longer overflows torch's timers."""

MAX_LR = 100.0
"""The largest learning rate a run accepts: a bound against typos, far above what trains.
The example models already diverge below it (SGD at lr 100 makes the transformer's loss
NaN within four steps, ``tests/test_cli_hostile.py``); a run whose loss is not finite
fails (``ppbook run``)."""

MAX_SEED = 2**64 - 2
"""The largest seed: ``torch.manual_seed`` takes 0 .. 2**64 - 1, and the data is drawn
from ``seed + 1`` (:func:`ppbook.runtime.models.step_data`)."""

MAX_STEPS = 10_000
"""The most training steps of one run: every rank keeps each step's measured timeline, and
ten thousand steps of a small model already take minutes."""

MAX_THREADS = 1024
"""The most torch threads per rank (``torch.set_num_threads`` takes a C int; more threads
than cores only wait for one)."""

OWNER = "the run"  # who asks, in messages: "the run needs steps >= 1, got 0"


@dataclass(frozen=True)
class Fault:
    """A failure injected on purpose, to see how the run stops: tests and chapter 3.

    ``kind`` "raise" raises an exception, "hang" sleeps forever, "exit" ends the process
    without a word and "abort" prints a line to stderr and aborts the process (SIGABRT), as
    a C++ library does when it cannot raise, when ``rank`` is about to run its action
    number ``position`` (counted from 0) in the first step. ``position`` "end" fails the
    rank after all its work, as it leaves the process group: the run's results are then
    complete. Written ``raise@1:2`` or ``abort@1:end`` on the command line.
    """

    kind: str
    rank: int
    position: int | str

    @classmethod
    def parse(cls, text: str) -> Fault:
        """Read ``KIND@RANK:POSITION``, as ``raise@1:2`` or ``abort@1:end``."""
        kind, _, where = text.partition("@")
        rank, _, position = where.partition(":")
        if kind not in FAULTS or not rank.isdigit() or not (position.isdigit() or position == END):
            raise ValueError(
                f"cannot read fault {shown(text)}: expected KIND@RANK:POSITION with KIND one of "
                f"{', '.join(FAULTS)} and POSITION an action number or 'end', e.g. 'raise@1:2' "
                "(rank 1 raises at its 3rd action)"
            )
        return cls(kind, int(rank), END if position == END else int(position))


END = "end"
"""A :class:`Fault`'s position after the rank's last action: as it leaves the process group."""


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
    num_heads: int = 2  # transformer only: attention heads, a divisor of hidden
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
    transport: str | None = None  # a module's receive/deliver replace the runner's (execute.py)
    engine: str = "ppbook"  # "torch": PyTorch's pipelining runtime runs the schedule
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
    check_numbers(config)
    for name, value, allowed in (
        ("dtype", config.dtype, DTYPES),
        ("device", config.device, DEVICES),
        ("matching", config.matching, MATCHINGS),
        ("optimizer", config.optimizer, OPTIMIZERS),
        ("engine", config.engine, ENGINES),
    ):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {shown(value)}")
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
    if config.transport is not None:
        check_transport(config.transport)
    if config.engine == "torch":
        check_engine(config, schedule)
    if config.fault is not None:
        check_fault(config.fault, schedule, config.nproc)
    return schedule


def check_fault(fault: object, schedule: Schedule, nproc: int) -> None:
    """A :class:`Fault` that will fire: a rank of the run, at one of its actions or "end"."""
    if not isinstance(fault, Fault) or fault.kind not in FAULTS:
        raise ValueError(
            f"fault must be a Fault with kind one of {', '.join(FAULTS)}, got {shown(fault)}"
        )
    if not 0 <= fault.rank < nproc:
        raise ValueError(f"fault on rank {fault.rank}, but ranks are 0..{nproc - 1}")
    count = len(schedule.actions[fault.rank])
    if fault.position != END and (
        isinstance(fault.position, bool)
        or not isinstance(fault.position, int)
        or not 0 <= fault.position < count
    ):
        raise ValueError(
            f"fault at action {shown(fault.position)} of rank {fault.rank}, which runs actions "
            f"0..{count - 1} in a step: give one of those, or 'end' (after its last action)"
        )


def check_transport(name: object) -> ModuleSpec:
    """A transport module (:mod:`ppbook.runtime.execute`) that the ranks will find: a
    module name that this process can import (the ranks get its ``sys.path``). Returns
    its spec (``origin``: its file)."""
    if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
        raise ValueError(
            f"transport must be a module's name such as 'my_transport', got {shown(name)}"
        )
    try:
        found = importlib.util.find_spec(name)
    except ImportError:  # a parent package is missing
        found = None
    if found is None:
        raise ValueError(
            f"cannot find the transport module {name!r}: write it to {name.replace('.', '/')}.py "
            "in the folder the run starts from, or in another folder on sys.path"
        )
    return found


def check_engine(config: RunConfig, schedule: Schedule) -> None:
    """What PyTorch's engine (``engine="torch"``) cannot run: a micro-batch that skips a
    stage or meets a part twice (DualPipe's two directions), and ppbook's own hooks."""
    for name, value, default in (
        ("fault", config.fault, None),
        ("transport", config.transport, None),
        ("matching", config.matching, "mailbox"),
    ):
        if value != default:
            raise ValueError(
                f"{name} is a hook of ppbook's runtime: drop it, or use engine 'ppbook' "
                "(--engine ppbook)"
            )
    if config.dtype == "bfloat16":
        raise ValueError(
            "dtype bfloat16 trains with fp32 master weights and fp32 gradient accumulation, "
            "which ppbook's runtime keeps and PyTorch's engine here does not: use engine "
            "'ppbook' (--engine ppbook), or dtype float32"
        )
    import torch
    from torch.distributed.pipelining import schedules

    runtime = getattr(schedules, "_PipelineScheduleRuntime", None)
    if not hasattr(runtime, "_prepare_schedule_with_comms"):
        raise ValueError(
            f"torch {torch.__version__} lacks the pipeline runtime PyTorch's engine drives "
            "(_PipelineScheduleRuntime); engine 'torch' is tested on torch 2.13"
        )
    stages = tuple(range(schedule.num_stages))
    if any(schedule.route(j) != stages for j in range(schedule.num_microbatches)):
        raise ValueError(
            f"PyTorch's engine runs every micro-batch through stages 0..{stages[-1]} in order; "
            f"{schedule.name!r} routes micro-batches otherwise (two directions): use engine "
            "'ppbook' (--engine ppbook)"
        )


def check_numbers(config: RunConfig) -> None:
    """The counts and quantities of ``config`` (:mod:`ppbook.checks`), and the heads."""
    for name in ("nproc", "microbatch_size", "steps", "hidden", "num_heads", "seq_len"):
        as_count(getattr(config, name), name, OWNER)
    seed = as_count(config.seed, "seed", OWNER, minimum=0)
    if seed > MAX_SEED:
        raise ValueError(
            f"{OWNER} needs seed <= {MAX_SEED} (2**64 - 2: torch seeds are 64-bit and the data "
            f"uses seed + 1), got {shown(seed)}"
        )
    for name in ("num_threads", "num_blocks"):
        if getattr(config, name) is not None:
            as_count(getattr(config, name), name, OWNER)
    for name, most, why in (
        ("steps", MAX_STEPS, "each step's timeline is kept"),
        ("num_threads", MAX_THREADS, "torch's limit is a C int, and more threads than cores wait"),
    ):
        value = getattr(config, name)
        if value is not None and value > most:
            raise ValueError(f"{OWNER} needs {name} <= {most:,} ({why}), got {shown(value)}")
    lr = as_quantity(config.lr, "lr", OWNER)
    if lr > MAX_LR:
        raise ValueError(
            f"{OWNER} needs lr <= {MAX_LR:g} (0 keeps the parameters; the example models "
            f"diverge well below {MAX_LR:g}), got {shown(config.lr)}"
        )
    timeout = as_quantity(config.timeout, "timeout (seconds)", OWNER, inclusive=False)
    if timeout > MAX_TIMEOUT:
        raise ValueError(
            f"{OWNER} needs timeout (seconds) <= {MAX_TIMEOUT:g} (a week), got {timeout:g}"
        )
    if config.model == "transformer" and config.hidden % config.num_heads:
        below = config.hidden - config.hidden % config.num_heads
        choices = f"{below} or {below + config.num_heads}" if below else str(config.num_heads)
        raise ValueError(
            f"the transformer needs hidden to be a multiple of num_heads ({config.num_heads}), "
            f"got hidden {config.hidden}: use {choices}"
        )


def _count_blocks(config: RunConfig, parts: int) -> int:
    if isinstance(config.model, str):
        if config.model not in MODELS:
            raise ValueError(
                f"unknown model {shown(config.model)}; choose one of {', '.join(MODELS)}"
            )
        return parts if config.num_blocks is None else config.num_blocks
    if config.input_shape is None:
        raise ValueError("a model given as modules needs input_shape (the shape of one sample)")
    return len(as_blocks(config.model))


def as_blocks(model) -> list:
    """A model given as an ``nn.Sequential`` or a list of blocks, as a list of blocks."""
    from torch import nn

    if isinstance(model, nn.Sequential):
        return list(model)
    if isinstance(model, nn.Module):
        raise ValueError(
            f"cannot cut a {type(model).__name__} into pipeline parts: "
            "give an nn.Sequential or a list of blocks"
        )
    if not isinstance(model, Sequence) or not all(isinstance(m, nn.Module) for m in model):
        raise ValueError(
            f"a model must be an example's name, an nn.Sequential or a list of modules, "
            f"got {shown(model)}"
        )
    return list(model)


BYTES_PER_PARAMETER = {"float64": 8, "float32": 4, "bfloat16": 2 + 4 + 4}
"""Bytes a parameter's state takes before the optimizer's: its value in the dtype, and in
bfloat16 also its fp32 master copy and fp32 gradient accumulator (2 + 4 + 4)."""


def model_bytes(config: RunConfig, schedule: Schedule) -> int:
    """Bytes of the parameters of ``config``'s example model (0 for a model of modules),
    :data:`BYTES_PER_PARAMETER` each: 8 in float64, 4 in float32, 10 in bfloat16 (the bf16
    weights the model computes with, and the fp32 master weights and gradient buffer that
    mixed precision keeps beside them).

    Per block of width h: the MLP 8h² + 5h parameters (h to 4h and back, with biases);
    a transformer block 12h² + 13h (3h² + 3h for q, k, v, h² + h for the projection, the
    MLP's 8h² + 5h, and two layer norms of 2h each).
    """
    if not isinstance(config.model, str):
        return 0
    h = config.hidden
    per_block = 8 * h * h + 5 * h if config.model == "mlp" else 12 * h * h + 13 * h
    blocks = config.num_blocks or num_parts(schedule)
    return blocks * per_block * BYTES_PER_PARAMETER[config.dtype]


ELEMENT_BYTES = {"float64": 8, "float32": 4, "bfloat16": 2}
"""Bytes of one number of an activation, by ``RunConfig.dtype``."""


def saved_per_block(config: RunConfig, microbatch_size: int | None = None) -> int:
    """Bytes one example block keeps for its backward, for one micro-batch of ``b`` samples
    (default ``config.microbatch_size``): the tensors autograd saves, counted by storage
    (``tests/test_runtime_preflight.py`` counts them with
    ``torch.autograd.graph.saved_tensors_hooks``),
    in ``config.dtype`` of ``e`` bytes each.

    - MLP, width h: its input (h) and the Tanh output (4h) that the second Linear also
      reads: ``5 h b e``.
    - Transformer, width h, s positions, a heads: h-wide tensors sixteen times per position
      (the block's input and the first LayerNorm's output; q, k and v, which the batched
      matmuls copy; the heads' output, reshaped; the second LayerNorm's input and output;
      the MLP's 4h input and output of GELU), the softmax weights (a s² per sample), the
      LayerNorms' means and reciprocal deviations (4 s), and the causal mask (s² bools,
      once): ``(16 s h + a s² + 4 s) b e + s²``.
    """
    b = config.microbatch_size if microbatch_size is None else microbatch_size
    h, e = config.hidden, ELEMENT_BYTES[config.dtype]
    if config.model == "mlp":
        return 5 * h * b * e
    s, a = config.seq_len, config.num_heads
    return (16 * s * h + a * s * s + 4 * s) * b * e + s * s


def activation_bytes(config: RunConfig, schedule: Schedule) -> int:
    """Bytes of data and activations one rank of ``config``'s example model holds at its
    peak, 0 for a model given as modules (an estimate, for the checks before a run starts).

    - The step's data: every rank makes the inputs and targets of all m micro-batches
      (:func:`ppbook.runtime.models.step_data`), bf16 drawn in float32 first.
    - The activations: the simulator's peak of micro-batches in flight on a rank, in
      micro-batch activations of a full stage (one rank's share of the blocks), times that
      share's :func:`saved_per_block`, plus each in-flight micro-batch's stage input and
      output.
    """
    if not isinstance(config.model, str):
        return 0
    b, e = config.microbatch_size, ELEMENT_BYTES[config.dtype]
    sample = 1
    for size in input_shape(config):
        sample *= size
    drawn = e + (4 if config.dtype == "bfloat16" else 0)
    data = 2 * config.num_microbatches * b * sample * drawn
    metrics = simulate(schedule).metrics()
    peak = max(metrics["peak_activations_full_stage"])
    blocks = config.num_blocks or num_parts(schedule)
    share = -(-blocks * schedule.num_stages // (num_parts(schedule) * config.nproc))
    per_microbatch = share * saved_per_block(config) + 2 * b * sample * e
    return data + math.ceil(Fraction(peak) * per_microbatch)  # exact: counts may be huge


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
