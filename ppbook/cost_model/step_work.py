"""What a training step costs beyond its layers' passes (chapter 8,
:mod:`ppbook.cost_model.sizing_search`):
the collectives' achievable bandwidth, gradient accumulation, the embedding, and the
optimizer step. Each is physical work timed on the card's figures; none is fitted.

- **Collectives.** NCCL's ring all-reduce does not reach a link's datasheet bandwidth: its
  bus bandwidth (what each device sends, 2 (t-1)/t n, over the time) is taken as
  :data:`COLLECTIVE_EFFICIENCY` of the per-direction peak on NVLink and on InfiniBand, an
  assumption (fixed, not fitted to any run; NCCL's ``nccl-tests`` measure the real bus
  bandwidth of a machine, to set here). Tensor-parallel and data-parallel all-reduces run
  at that bus bandwidth. A data-parallel group whose ring leaves a node
  crosses it on every NIC its members own: with ``k`` members in each node (each GPU with
  its own port, as in DGX nodes) the ring runs ``k`` channels over ``k`` ports, up to the
  node's NVLink (:func:`dp_link_gbps`).
- **Gradient accumulation.** With m micro-batches a step, each micro-batch's weight
  gradients are added into the gradients kept in memory (16-bit, as
  :func:`ppbook.cost_model.memory_bytes.static_bytes` counts them): read both, write one,
  :data:`ACCUMULATE_BYTES` per parameter, memory-bound, after every ``W``. The H200 layer
  timings (``autograd.grad``) do not include it; a pipeline's passes do.
- **The embedding**, on the first model part: the word rows gathered (vocabulary-parallel
  under tensor parallelism: masked, then all-reduced, :mod:`ppbook.cost_model.sizing_search`) plus
  the
  position embeddings, and the dense gradient of the word table written and accumulated in
  ``W``.
- **The optimizer step** after the data-parallel all-reduce, not overlapped:
  mixed-precision Adam over the fullest GPU's parameters (a ZeRO-1 shard: 1/dp of them),
  :data:`ADAM_STEP_BYTES` per parameter, memory-bound.

Memory-bound work runs at :data:`ppbook.cost_model.layer_time.HBM_EFFICIENCY` of the card's HBM
bandwidth, as the layers' element-wise work does.
"""

from __future__ import annotations

from functools import lru_cache

from ppbook.cost_model.layer_time import BYTES, DROPOUT_ELEMENTS, HBM_EFFICIENCY, Device
from ppbook.cost_model.memory_bytes import (
    ModelShape,
    Parallel,
    embedding_parameters,
    head_parameters,
)

COLLECTIVE_EFFICIENCY = 0.8
"""Share of a link's per-direction bandwidth that a ring all-reduce is taken to reach as
bus bandwidth (NCCL on NVLink or InfiniBand, large messages; an assumption, not fitted)."""
ACCUMULATE_BYTES = 6
"""Bytes per parameter of adding one micro-batch's 16-bit gradient into the accumulated
one: read 2 + 2, write 2."""
ADAM_STEP_BYTES = 52
"""Bytes per parameter of a mixed-precision Adam step with fp32 master weights (Megatron-LM's
and apex's): 16-bit gradients to fp32 (read 2, write 4), unscale and check for overflow
(read 4, write 4), the gradient norm for clipping (read 4), Adam itself (read weight,
gradient, momentum, variance, 16; write weight, momentum, variance, 12), the fp32 weights
back to 16 bits (read 4, write 2)."""


def memory_s(nbytes: float, device: Device) -> float:
    """Seconds of memory-bound work moving ``nbytes`` through HBM."""
    return nbytes / (HBM_EFFICIENCY * device.hbm_bytes_per_s)


def collective_allreduce_s(nbytes: float, ranks: int, gb_per_s: float) -> float:
    """A ring all-reduce of ``nbytes`` over ``ranks`` devices on a link of ``gb_per_s`` GB/s
    per direction: 2 (ranks-1)/ranks ``nbytes`` at :data:`COLLECTIVE_EFFICIENCY` of it."""
    if ranks < 2:
        return 0.0
    return 2 * (ranks - 1) / ranks * nbytes / (COLLECTIVE_EFFICIENCY * gb_per_s * 1e9)


def dp_link_gbps(
    num_gpus: int, gpus_per_node: int, stride: int, intra_gbps: float, inter_gbps: float
) -> float:
    """The per-direction GB/s a data-parallel ring gets. Its members sit ``stride`` = tp * pp
    devices apart (tensor-parallel ranks innermost, then pipeline ranks): all in one node,
    NVLink; otherwise ``k = max(1, gpus_per_node // stride)`` members per node, whose ``k``
    ports carry ``k`` channels of the ring across nodes: ``k`` times the port, at most
    NVLink's."""
    if num_gpus <= gpus_per_node:
        return intra_gbps
    members = max(1, gpus_per_node // stride)
    return min(intra_gbps, members * inter_gbps)


def accumulate_s(parameters: float, device: Device) -> float:
    """Adding one micro-batch's gradients of ``parameters`` into the accumulated ones."""
    return memory_s(ACCUMULATE_BYTES * parameters, device)


def optimizer_step_s(parameters: float, device: Device) -> float:
    """One mixed-precision Adam step over ``parameters`` (:data:`ADAM_STEP_BYTES` each)."""
    return memory_s(ADAM_STEP_BYTES * parameters, device)


@lru_cache(maxsize=1024)
def embedding_times(
    shape: ModelShape, parallel: Parallel, device: Device, dropout: bool = False
) -> dict[str, float]:
    """The first model part's extra work, in seconds (its tensor-parallel all-reduce
    apart): forward, the word rows gathered and masked (vocabulary-parallel), the position
    rows gathered and added (7 elements of h per token, a dropout 2.5 more); ``W``, the
    word table's dense gradient: zeroed, the tokens' rows added in, and accumulated
    (:func:`accumulate_s`). ``I`` is zero (no input gradient)."""
    h, t = shape.hidden, parallel.tp
    tokens = parallel.microbatch_size * shape.seq_len
    per_token = 7 + (DROPOUT_ELEMENTS if dropout else 0.0)
    words = embedding_parameters(shape, t) - (shape.seq_len * h if shape.position_embeddings else 0)
    forward = memory_s(BYTES * per_token * tokens * h, device)
    weights = memory_s(BYTES * (words + 2 * tokens * h), device) + accumulate_s(
        embedding_parameters(shape, t), device
    )
    return {"F": forward, "I": 0.0, "W": weights, "B": weights}


def head_accumulate_s(shape: ModelShape, parallel: Parallel, device: Device) -> float:
    """Accumulating the output head's gradient (the tied word table's copy) on the last
    part, per micro-batch."""
    return accumulate_s(head_parameters(shape, parallel.tp), device)
