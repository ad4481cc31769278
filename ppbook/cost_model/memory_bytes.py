"""Memory in bytes of a transformer split into pipeline stages: parameters, gradients,
optimizer state and activations per rank (chapter 6).

The numbers a sizing search asks for thousands of times, in plain Python; the tests check
each against its sympy count in :mod:`ppbook.symbolic.activations` and
:mod:`ppbook.symbolic.transformer`, where each term is explained. In short:

- **Parameters** (:func:`part_parameters`): 12h^2 + 13h per layer (MLP width 4h), on one
  tensor-parallel rank its share (matrices and split biases over ``tp``; LayerNorms and
  row-parallel biases whole). The first model part holds the word embeddings (their
  ``ceil(vocab/tp)`` rows: ppbook pads the vocabulary to a multiple of ``tp``, Megatron-LM
  further to 128 tp) and learned positions; the last holds the final LayerNorm and the
  output head. With tied embeddings the model counts the word embeddings once
  (:func:`total_parameters`), but as in Megatron-LM the last stage keeps its own copy, with
  its gradients and optimizer state, when the first and last parts are on different ranks.
- **Static bytes** (:func:`static_bytes`): mixed-precision Adam as in ZeRO (Rajbhandari
  et al. 2020, arXiv:1910.02054, sec. 3): 2 bytes of 16-bit weights, 2 of 16-bit gradients
  and 12 of fp32 master weights, momentum and variance per parameter; ZeRO stage 1
  divides the 12 over the ``dp`` data-parallel ranks.
- **Activations** (:func:`part_activation_bytes`): Korthikanti et al. 2022
  (arXiv:2205.05198) per layer and micro-batch, with tensor and sequence parallelism and
  recomputation; the first part adds the embedding dropout's mask, the last the final
  LayerNorm's and output layer's inputs and the 32-bit logits (sec. 4.3).
- **FLOPs per pass**: :mod:`ppbook.cost_model.flops` (the Zero Bubble paper's Table 1), with
  :func:`ppbook.cost_model.flops.stage_costs` turning them into the simulator's costs.
- **Peak per rank** (:func:`peak_memory`): static bytes plus the most activation bytes the
  simulator's timeline holds at once, stage by stage (not a formula per schedule). A
  split backward keeps a micro-batch's activations until its ``W``, as the timeline
  counts; the Zero Bubble paper's Table 1 notes ``W`` needs only 32 s b h of them, so
  this is an upper bound for ZB schedules.

All bytes and FLOPs are per tensor-parallel rank and per micro-batch of ``microbatch_size``
samples; a model part is one position on a micro-batch's route (p v parts with v chunks).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ppbook.checks import as_count, shown
from ppbook.pipeline_schedule import Schedule
from ppbook.timeline import Timeline

RECOMPUTE = ("none", "selective", "full")
"""Activation recomputation, as in :data:`ppbook.symbolic.transformer.RECOMPUTE`."""


def _flag(value: object, name: str, owner: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{owner} needs {name} to be True or False, got {shown(value)}")
    return value


@dataclass(frozen=True)
class ModelShape:
    """A GPT-style transformer: ``layers`` layers of width ``hidden`` with ``heads`` heads,
    an MLP of ``ffn_multiple * hidden``, a ``vocab``-word vocabulary, ``seq_len`` tokens per
    sample, activations of ``bytes_per_element`` bytes (2: 16-bit)."""

    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_len: int
    ffn_multiple: int = 4
    tied_embeddings: bool = True
    position_embeddings: bool = True
    bytes_per_element: int = 2

    def __post_init__(self) -> None:
        counts = ("layers", "hidden", "heads", "vocab", "seq_len", "ffn_multiple")
        for name in (*counts, "bytes_per_element"):
            object.__setattr__(self, name, as_count(getattr(self, name), name, "ModelShape"))
        _flag(self.tied_embeddings, "tied_embeddings", "ModelShape")
        _flag(self.position_embeddings, "position_embeddings", "ModelShape")
        if self.hidden % self.heads:
            raise ValueError(
                f"ModelShape needs heads dividing hidden, got hidden {self.hidden} and "
                f"heads {self.heads}"
            )


@dataclass(frozen=True)
class Parallel:
    """How each pipeline stage is run: ``tp`` tensor-parallel ranks (``sp``: with sequence
    parallelism), ``dp`` data-parallel replicas, ZeRO stage ``zero`` (0 or 1),
    ``recompute`` none, selective or full, ``microbatch_size`` samples per micro-batch."""

    tp: int = 1
    sp: bool = False
    dp: int = 1
    zero: int = 0
    recompute: str = "none"
    microbatch_size: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "dp", "microbatch_size"):
            object.__setattr__(self, name, as_count(getattr(self, name), name, "Parallel"))
        _flag(self.sp, "sp", "Parallel")
        if self.zero not in (0, 1) or isinstance(self.zero, bool):
            raise ValueError(
                f"Parallel needs zero to be 0 or 1 (ZeRO stage), got {shown(self.zero)}"
            )
        if self.recompute not in RECOMPUTE:
            raise ValueError(
                f"Parallel needs recompute in {RECOMPUTE}, got {shown(self.recompute)}"
            )


def check_fit(shape: ModelShape, parallel: Parallel) -> None:
    """A one-line ValueError unless ``parallel.tp`` splits the model into whole pieces."""
    tp = parallel.tp
    if shape.heads % tp:
        raise ValueError(f"tp = {tp} must divide heads = {shape.heads} (whole heads per rank)")
    if parallel.sp and shape.seq_len % tp:
        raise ValueError(f"sequence parallelism needs tp = {tp} dividing seq_len = {shape.seq_len}")


def split_layers(num_layers: int, num_parts: int) -> list[int]:
    """``num_layers`` over ``num_parts`` model parts as evenly as possible; the extra layers
    of an uneven split go to the middle parts first (the ends carry embedding and head)."""
    num_layers = as_count(num_layers, "num_layers", "split_layers")
    num_parts = as_count(num_parts, "num_parts", "split_layers")
    if num_layers < num_parts:
        raise ValueError(
            f"split_layers needs at least one layer per part, got {num_layers} layers "
            f"for {num_parts} parts"
        )
    base, extra = divmod(num_layers, num_parts)
    by_centre = sorted(range(num_parts), key=lambda k: (abs(2 * k - (num_parts - 1)), k))
    favoured = set(by_centre[:extra])
    return [base + (k in favoured) for k in range(num_parts)]


def layers_of(shape: ModelShape, layers_per_part) -> list[int]:
    """``layers_per_part`` checked: whole numbers >= 0 adding up to ``shape.layers``."""
    if isinstance(layers_per_part, str | bytes) or not hasattr(layers_per_part, "__iter__"):
        raise ValueError(
            f"layers_per_part must be a list of layer counts, got {shown(layers_per_part)}"
        )
    parts = [as_count(n, "layers_per_part[k]", "a stage split", minimum=0) for n in layers_per_part]
    if not parts or sum(parts) != shape.layers:
        raise ValueError(
            f"layers_per_part must add up to the model's {shape.layers} layers, got {parts}"
        )
    return parts


# ----- parameters ---------------------------------------------------------------------


def _tp(shape: ModelShape, tp: int, owner: str) -> int:
    tp = as_count(tp, "tp", owner)
    check_fit(shape, Parallel(tp=tp))
    return tp


def layer_parameters(shape: ModelShape, tp: int = 1) -> int:
    """Parameters of one layer on one of ``tp`` tensor-parallel ranks."""
    tp = _tp(shape, tp, "layer_parameters")
    h, f = shape.hidden, shape.ffn_multiple
    split = (4 + 2 * f) * h * h + (3 + f) * h  # QKV, projection, MLP weights; split biases
    return split // tp + 6 * h  # + projection and MLP-out biases, two LayerNorms


def embedding_parameters(shape: ModelShape, tp: int = 1) -> int:
    """Word embeddings (``ceil(vocab/tp)`` rows) and learned position embeddings."""
    tp = _tp(shape, tp, "embedding_parameters")
    position = shape.seq_len * shape.hidden if shape.position_embeddings else 0
    return -(-shape.vocab // tp) * shape.hidden + position


def head_parameters(shape: ModelShape, tp: int = 1) -> int:
    """The output head's ``ceil(vocab/tp)`` rows, or the tied word embeddings' copy."""
    tp = _tp(shape, tp, "head_parameters")
    return -(-shape.vocab // tp) * shape.hidden


def total_parameters(shape: ModelShape) -> int:
    """The model's parameter count (tied embeddings once, final LayerNorm included)."""
    head = 0 if shape.tied_embeddings else head_parameters(shape)
    norm = 2 * shape.hidden
    return shape.layers * layer_parameters(shape) + embedding_parameters(shape) + norm + head


def part_parameters(shape: ModelShape, layers_per_part, tp: int = 1) -> list[int]:
    """Parameters of each model part on one tensor-parallel rank: its layers, the
    embeddings on the first part, final LayerNorm and head (or tied copy) on the last."""
    layers = layers_of(shape, layers_per_part)
    out = [n * layer_parameters(shape, tp) for n in layers]
    out[0] += embedding_parameters(shape, tp)
    out[-1] += 2 * shape.hidden
    if not shape.tied_embeddings or len(out) > 1:
        out[-1] += head_parameters(shape, tp)
    return out


def static_bytes(num_parameters: int, parallel: Parallel) -> dict[str, float]:
    """Mixed-precision Adam: ``parameters`` 2 bytes each, ``gradients`` 2, ``optimizer`` 12
    (fp32 master weights, momentum, variance), divided over ``dp`` with ZeRO stage 1."""
    optimizer = 12 * num_parameters / (parallel.dp if parallel.zero == 1 else 1)
    return {
        "parameters": 2.0 * num_parameters,
        "gradients": 2.0 * num_parameters,
        "optimizer": optimizer,
    }


# ----- activations --------------------------------------------------------------------


def layer_activation_bytes(shape: ModelShape, parallel: Parallel) -> float:
    """Bytes one layer keeps per micro-batch on one tensor-parallel rank (Korthikanti)."""
    check_fit(shape, parallel)
    e, f, a = shape.bytes_per_element, shape.ffn_multiple, shape.heads
    tokens_h = shape.seq_len * parallel.microbatch_size * shape.hidden  # s b h
    t = parallel.tp
    r = t if parallel.sp else 1  # the replicated region splits only with sequence parallelism
    if parallel.recompute == "full":
        return e * tokens_h / r
    replicated = (4 * e + 2) * tokens_h  # LayerNorm inputs, first-linear inputs, two masks
    sharded = (4 * e + 2 * f * e) * tokens_h  # Q, K, V, projection input, GeLU and fc2 inputs
    if parallel.recompute == "none":  # softmax output, its dropout mask and output: s^2 each
        sharded += (2 * e + 1) * a * shape.seq_len**2 * parallel.microbatch_size
    return replicated / r + sharded / t


def part_activation_bytes(shape: ModelShape, parallel: Parallel, layers_per_part) -> list[float]:
    """Bytes each model part keeps per micro-batch: its layers, the embedding dropout's
    1-byte mask on the first part, the output layer's inputs and 32-bit logits on the last."""
    layers = layers_of(shape, layers_per_part)
    per_layer = layer_activation_bytes(shape, parallel)
    tokens = shape.seq_len * parallel.microbatch_size
    r = parallel.tp if parallel.sp else 1
    out = [n * per_layer for n in layers]
    out[0] += tokens * shape.hidden / r
    out[-1] += 2 * shape.bytes_per_element * tokens * shape.hidden / r
    out[-1] += 4 * tokens * -(-shape.vocab // parallel.tp)
    return out


# ----- per rank, from a schedule and its timeline -------------------------------------


@dataclass(frozen=True)
class MemoryBreakdown:
    """One rank's memory in bytes: static state and the activations' peak."""

    rank: int
    parameter_count: int
    parameters: float
    gradients: float
    optimizer: float
    activations: float

    @property
    def total(self) -> float:
        return self.parameters + self.gradients + self.optimizer + self.activations

    def as_dict(self) -> dict[str, float]:
        """The breakdown with its total, for JSON and tables (bytes; ``parameter_count``)."""
        return dataclasses.asdict(self) | {"total": self.total}


def parts_of(schedule: Schedule, shape: ModelShape, layers_per_part) -> list[int]:
    """Layers per model part for ``schedule``: one per stage of a micro-batch's route,
    :func:`split_layers` when ``layers_per_part`` is None."""
    num_parts = len(schedule.route(0))
    if layers_per_part is None:
        return split_layers(shape.layers, num_parts)
    layers = layers_of(shape, layers_per_part)
    if len(layers) != num_parts:
        raise ValueError(
            f"layers_per_part has {len(layers)} parts, but the schedule's micro-batches pass "
            f"through {num_parts} stages: give one number per stage on a route"
        )
    return layers


def rank_parameters(
    schedule: Schedule, shape: ModelShape, tp: int = 1, layers_per_part=None
) -> list[int]:
    """Parameters each rank holds (one tensor-parallel rank of it): the parts of its stages.

    With tied embeddings a rank that holds both the first and the last part keeps the
    word embeddings once (ZB-V's and DualPipe's first rank); otherwise the last part's copy.
    """
    layers = parts_of(schedule, shape, layers_per_part)
    per_part = part_parameters(shape, layers, tp)
    last = len(layers) - 1
    out = []
    for rank in range(schedule.num_ranks):
        held = {schedule.model_part(stage) for stage in schedule.stages_on(rank)}
        count = sum(per_part[k] for k in held)
        if shape.tied_embeddings and last and {0, last} <= held:
            count -= head_parameters(shape, tp)
        out.append(count)
    return out


def peak_memory(
    timeline: Timeline, shape: ModelShape, parallel: Parallel, layers_per_part=None
) -> list[MemoryBreakdown]:
    """Each rank's peak: static bytes plus the most activation bytes it holds at once.

    The activations are what ``timeline`` keeps in flight, each stage's micro-batch
    weighing :func:`part_activation_bytes` of its model part (any timeline of the schedule:
    its own ``activation_bytes`` are replaced). ``layers_per_part`` defaults to
    :func:`split_layers` over the parts of a micro-batch's route. Not counted: the one
    layer whose activations a recomputing backward rebuilds for a moment, temporary and
    communication buffers, the allocator's fragmentation.
    """
    schedule = timeline.schedule
    layers = parts_of(schedule, shape, layers_per_part)
    per_part = part_activation_bytes(shape, parallel, layers)
    sizes = [per_part[schedule.model_part(k)] for k in range(schedule.num_stages)]
    sized = dataclasses.replace(timeline, activation_bytes=sizes)
    out = []
    for rank, count in enumerate(rank_parameters(schedule, shape, parallel.tp, layers)):
        static = static_bytes(count, parallel)
        out.append(
            MemoryBreakdown(rank, count, **static, activations=sized.peak_activation_bytes(rank))
        )
    return out
