"""Memory in bytes of a transformer split into pipeline stages: parameters, gradients,
optimizer state and activations per rank (chapter 6).

The numbers a sizing search asks for thousands of times, in plain Python. The shape and
layout are :mod:`ppbook.cost_model.model_shape`'s, the parameter counts
:mod:`ppbook.cost_model.parameters`' (re-exported here under the old ``ppbook.memory``
names). In short:

- **Static bytes** (:func:`static_bytes`): mixed-precision Adam as Megatron-LM keeps it,
  2 bytes of bf16 weights, ``gradient_bytes`` of gradients (4: fp32 main gradients),
  ``master_bytes`` of fp32 master weights and ``2 moment_bytes`` of Adam moments: 18 bytes
  a parameter (the ZeRO paper's 16, Rajbhandari et al. 2020, arXiv:1910.02054, sec. 3,
  has 16-bit gradients: ``gradient_bytes=2``). ZeRO-1 (Megatron's distributed
  optimizer) shards the optimizer state over the data-parallel copies, 6 + 12/d; ZeRO-2
  the gradients too; ZeRO-3 (FSDP) the weights too, plus the two layers it gathers at a
  time (:func:`gathered_bytes`). Expert weights have ``dp/ep`` copies, not ``dp``.
- **Activations** (:mod:`ppbook.cost_model.activation_bytes`, re-exported here:
  :func:`layer_activation_terms`, :func:`part_activation_bytes`): the tensors each layer
  keeps for its backward, term by term; for the GPT layer with standard attention,
  Korthikanti et al. 2022 (arXiv:2205.05198) with tensor and sequence parallelism and
  recomputation.
- **FLOPs per pass**: :mod:`ppbook.cost_model.flops`.
- **Peak per rank** (:func:`peak_memory`): static bytes plus the most activation bytes the
  simulator's timeline holds at once, stage by stage (not a formula per schedule). A
  split backward keeps a micro-batch's activations until its ``W``, as the timeline
  counts; the Zero Bubble paper's Table 1 notes ``W`` needs only 32 s b h of them, so
  this is an upper bound for ZB schedules.

All bytes are per tensor-parallel rank and per micro-batch of ``microbatch_size``
samples; a model part is one position on a micro-batch's route (p v parts with v chunks).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ppbook.checks import as_count
from ppbook.cost_model.activation_bytes import (  # re-exported
    layer_activation_bytes,
    layer_activation_terms,
    part_activation_bytes,
)
from ppbook.cost_model.model_shape import (  # the old ppbook.memory names, re-exported
    ATTENTION,
    RECOMPUTE,
    ModelShape,
    Parallel,
    check_fit,
    layers_of,
    split_layers,
)
from ppbook.cost_model.parameters import (  # the old ppbook.memory names, re-exported
    active_parameters,
    embedding_parameters,
    head_parameters,
    layer_parameters,
    part_expert_parameters,
    part_parameters,
    total_parameters,
)
from ppbook.pipeline_schedule import Schedule
from ppbook.timeline import Timeline

__all__ = [
    "ATTENTION",
    "RECOMPUTE",
    "MemoryBreakdown",
    "ModelShape",
    "Parallel",
    "active_parameters",
    "check_fit",
    "embedding_parameters",
    "gathered_bytes",
    "head_parameters",
    "layer_activation_bytes",
    "layer_activation_terms",
    "layer_parameters",
    "layers_of",
    "part_activation_bytes",
    "part_expert_parameters",
    "part_parameters",
    "parts_of",
    "peak_memory",
    "rank_expert_parameters",
    "rank_parameters",
    "split_layers",
    "static_bytes",
    "total_parameters",
]


def static_bytes(
    num_parameters: int, parallel: Parallel, expert_parameters: int = 0
) -> dict[str, float]:
    """Bytes of parameters, gradients and optimizer state on one rank holding
    ``num_parameters`` parameters, ``expert_parameters`` of which are routed experts'.

    Mixed-precision Adam as trainers keep it: 2 bytes of bf16 weights,
    ``parallel.gradient_bytes`` of gradient (4: Megatron's fp32 main gradients), and
    ``master_bytes + 2 moment_bytes`` of optimizer state (fp32 master copy, Adam's two
    moments): 18 bytes a parameter by default. ZeRO shards over the data-parallel copies
    of each parameter (``dp``; ``dp/ep`` for expert weights): stage 1 (Megatron's
    distributed optimizer) the optimizer state, 6 + 12/d bytes a parameter; stage 2 the
    gradients too, 2 + 16/d; stage 3 (FSDP) the weights too, 18/d. (The weights a ZeRO-3
    rank gathers for the layers it is running are :func:`gathered_bytes`.)
    """
    expert = as_count(expert_parameters, "expert_parameters", "static_bytes", minimum=0)
    if expert > num_parameters:
        raise ValueError(
            f"static_bytes needs expert_parameters <= num_parameters = {num_parameters}, "
            f"got {expert}"
        )
    dense = num_parameters - expert

    def held(per_parameter: float, stage: int) -> float:
        if parallel.zero < stage:
            return per_parameter * num_parameters
        return per_parameter * (dense / parallel.dp + expert / parallel.expert_dp)

    return {
        "parameters": held(2.0, 3),
        "gradients": held(float(parallel.gradient_bytes), 2),
        "optimizer": held(float(parallel.master_bytes + 2 * parallel.moment_bytes), 1),
    }


def gathered_bytes(shape: ModelShape, parallel: Parallel) -> float:
    """The weights a ZeRO-3 (FSDP) rank gathers beyond its shard: two layers whole (the
    one running and the next, prefetched, as FSDP does by default), 2 bytes each; 0 for
    stages 0 to 2."""
    if parallel.zero < 3:
        return 0.0
    per_layer = layer_parameters(shape, parallel.tp, ep=parallel.ep)
    return 2.0 * 2 * per_layer * (1 - 1 / parallel.dp)


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
    schedule: Schedule, shape: ModelShape, tp: int = 1, layers_per_part=None, ep: int = 1
) -> list[int]:
    """Parameters each rank holds (one tensor- and expert-parallel rank of it): the parts
    of its stages. DualPipe's rank k holds parts k and p-1-k (one for each direction), so
    twice the parameters of a 1F1B rank, the "2x" of DualPipe's table.

    With tied embeddings a rank that holds both the first and the last part keeps the
    word embeddings once (ZB-V's and DualPipe's first rank); otherwise the last part's copy.
    """
    return _rank_counts(schedule, shape, tp, layers_per_part, ep)[0]


def rank_expert_parameters(
    schedule: Schedule, shape: ModelShape, tp: int = 1, layers_per_part=None, ep: int = 1
) -> list[int]:
    """Of :func:`rank_parameters`, the routed experts' weights on each rank."""
    return _rank_counts(schedule, shape, tp, layers_per_part, ep)[1]


def _rank_counts(schedule, shape, tp, layers_per_part, ep) -> tuple[list[int], list[int]]:
    layers = parts_of(schedule, shape, layers_per_part)
    per_part = part_parameters(shape, layers, tp, ep)
    experts = part_expert_parameters(shape, layers, tp, ep)
    last = len(layers) - 1
    counts, expert_counts = [], []
    for rank in range(schedule.num_ranks):
        held = [schedule.model_part(stage) for stage in schedule.stages_on(rank)]
        count = sum(per_part[k] for k in held)
        if shape.tied_embeddings and last and {0, last} <= set(held):
            count -= head_parameters(shape, tp)
        counts.append(count)
        expert_counts.append(sum(experts[k] for k in held))
    return counts, expert_counts


def peak_memory(
    timeline: Timeline, shape: ModelShape, parallel: Parallel, layers_per_part=None
) -> list[MemoryBreakdown]:
    """Each rank's peak: static bytes plus the most activation bytes it holds at once.

    The activations are what ``timeline`` keeps in flight, each stage's micro-batch
    weighing :func:`part_activation_bytes` of its model part (any timeline of the schedule:
    its own ``activation_bytes`` are replaced). ``layers_per_part`` defaults to
    :func:`split_layers` over the parts of a micro-batch's route. ``parameters`` includes
    ZeRO-3's gathered layers (:func:`gathered_bytes`). Not counted: the one layer whose
    activations a recomputing backward rebuilds for a moment, temporary and communication
    buffers, the allocator's fragmentation.
    """
    schedule = timeline.schedule
    layers = parts_of(schedule, shape, layers_per_part)
    per_part = part_activation_bytes(shape, parallel, layers)
    sizes = [per_part[schedule.model_part(k)] for k in range(schedule.num_stages)]
    sized = dataclasses.replace(timeline, activation_bytes=sizes)
    counts, experts = _rank_counts(schedule, shape, parallel.tp, layers, parallel.ep)
    gathered = gathered_bytes(shape, parallel)
    out = []
    for rank, (count, expert) in enumerate(zip(counts, experts, strict=True)):
        static = static_bytes(count, parallel, expert)
        static["parameters"] += gathered
        out.append(
            MemoryBreakdown(rank, count, **static, activations=sized.peak_activation_bytes(rank))
        )
    return out
