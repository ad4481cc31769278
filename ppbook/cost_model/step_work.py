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

- **Bytes per parameter as trainers keep them** (:func:`accumulate_bytes`,
  :func:`adam_step_bytes`): gradients of ``parallel.gradient_bytes`` (Megatron's fp32
  main gradients, accumulated inside the weight-gradient GEMM, or bf16), fp32 master
  weights or none, Adam moments of 4 or 2 bytes.
- **Collectives of the new layouts**, each a list of :class:`Collective` (kind, bytes,
  ranks, count) whose bytes per rank are NCCL's ring formulas (:func:`ring_bytes`):
  tensor parallelism with or without sequence parallelism (:func:`tp_collectives`),
  expert parallelism's all-to-alls (:func:`ep_collectives`), context parallelism's ring
  exchange of keys and values (:func:`cp_collectives`), and data parallelism by ZeRO
  stage, FSDP included (:func:`dp_collectives`). Where a group spans nodes, the link it
  runs at is :func:`ppbook.links.collective_gbps` (one NIC per GPU, rails); an
  all-to-all across nodes is timed by :func:`all_to_all_s` (its off-node share on each
  rank's own NIC).

Memory-bound work runs at :data:`ppbook.cost_model.layer_time.HBM_EFFICIENCY` of the card's HBM
bandwidth, as the layers' element-wise work does.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from ppbook.checks import as_count, as_quantity
from ppbook.cost_model.flops import tokens_per_rank
from ppbook.cost_model.layer_time import BYTES, DROPOUT_ELEMENTS, HBM_EFFICIENCY, Device
from ppbook.cost_model.memory_bytes import embedding_parameters, head_parameters
from ppbook.cost_model.model_shape import ModelShape, Parallel

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


def accumulate_s(parameters: float, device: Device, parallel: Parallel | None = None) -> float:
    """Adding one micro-batch's gradients of ``parameters`` into the accumulated ones:
    :data:`ACCUMULATE_BYTES` each, or :func:`accumulate_bytes` of ``parallel``."""
    per = ACCUMULATE_BYTES if parallel is None else accumulate_bytes(parallel)
    return memory_s(per * parameters, device)


def optimizer_step_s(parameters: float, device: Device, parallel: Parallel | None = None) -> float:
    """One Adam step over ``parameters``: :data:`ADAM_STEP_BYTES` each (mixed precision
    with 16-bit gradients), or :func:`adam_step_bytes` of ``parallel``."""
    per = ADAM_STEP_BYTES if parallel is None else adam_step_bytes(parallel)
    return memory_s(per * parameters, device)


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


# ----- bytes per parameter as trainers keep them ---------------------------------------


def accumulate_bytes(parallel: Parallel) -> int:
    """Bytes per parameter that adding one micro-batch's gradient into the accumulated one
    costs beyond the timed ``W`` (which writes a 16-bit gradient): 6 either way. With
    16-bit gradients (``gradient_bytes`` 2) a separate add reads both and writes one
    (2 + 2 + 2, :data:`ACCUMULATE_BYTES`). With Megatron's fp32 main gradients
    (``gradient_bytes`` 4) its gradient-accumulation fusion (on by default) has the
    weight-gradient GEMM add into the fp32 gradient itself: it reads and writes 4 + 4 bytes
    instead of writing 2, 6 more."""
    if parallel.gradient_bytes == 2:
        return 2 + 2 + 2
    return 2 * parallel.gradient_bytes - 2


def adam_step_bytes(parallel: Parallel) -> int:
    """Bytes per parameter of one Adam step, memory-bound, with ``parallel``'s gradient,
    master-weight and moment bytes (g, w, m): gradients to fp32 when kept in 16 bits (read
    g, write 4), unscale and check (read 4, write 4), the norm for clipping (read 4), Adam
    (read the weight, gradient and two moments, write the weight and moments), and, with
    fp32 master weights, the weights back to 16 bits (read w, write 2). Megatron's mixed
    precision with bf16 gradients (2, 4, 4) gives :data:`ADAM_STEP_BYTES` = 52; with fp32
    gradients 46; without master weights, bf16 moments (2, 0, 2): 34."""
    g, w, m = parallel.gradient_bytes, parallel.master_bytes, parallel.moment_bytes
    weight = w or 2  # without master weights Adam updates the 16-bit weights in place
    convert = g + 4 if g < 4 else 0
    adam = (weight + 4 + 2 * m) + (weight + 2 * m)
    back = w + 2 if w else 0
    return convert + 8 + 4 + adam + back


# ----- collectives: bytes each rank sends on an NCCL ring, and their time ---------------

COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")
"""The collectives timed here."""


def ring_bytes(kind: str, nbytes: float, ranks: int) -> float:
    """Bytes each of ``ranks`` ranks sends in one collective over ``nbytes`` (the whole
    tensor: the all-reduced tensor, the gathered result, the scattered input; for an
    all-to-all, one rank's whole send buffer), on NCCL's ring algorithms (the published
    bus-bandwidth formulas of ``nccl-tests``' PERFORMANCE.md): an all-reduce
    2 (n-1)/n ``nbytes`` (a reduce-scatter then an all-gather), a reduce-scatter or an
    all-gather (n-1)/n, an all-to-all (n-1)/n (every rank keeps its own 1/n)."""
    if kind not in COLLECTIVES:
        raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}, got {kind!r}")
    n = as_count(ranks, "ranks", "ring_bytes")
    size = as_quantity(nbytes, "nbytes", "ring_bytes")
    share = (n - 1) / n * size
    return 2 * share if kind == "all-reduce" else share


def collective_s(kind: str, nbytes: float, ranks: int, gb_per_s: float) -> float:
    """Seconds of one collective (:func:`ring_bytes`) at :data:`COLLECTIVE_EFFICIENCY` of a
    link of ``gb_per_s`` GB/s per direction, the bus bandwidth; 0 on a single rank.
    Latency is left out (large messages)."""
    rate = as_quantity(gb_per_s, "gb_per_s", "collective_s", inclusive=False)
    return ring_bytes(kind, nbytes, ranks) / (COLLECTIVE_EFFICIENCY * rate * 1e9)


class Collective(NamedTuple):
    """``count`` collectives of ``kind`` over ``nbytes`` among ``ranks`` ranks; ``what``
    says what moves and when. ``sent`` is what one rank sends for all of them."""

    kind: str
    nbytes: float
    ranks: int
    count: float
    what: str

    @property
    def sent(self) -> float:
        return self.count * ring_bytes(self.kind, self.nbytes, self.ranks)

    def seconds(self, gb_per_s: float) -> float:
        """All ``count`` of them at ``gb_per_s`` per direction (:func:`collective_s`)."""
        return self.count * collective_s(self.kind, self.nbytes, self.ranks, gb_per_s)


def tp_collectives(shape: ModelShape, parallel: Parallel) -> dict[str, list[Collective]]:
    """Tensor parallelism's collectives of one layer and micro-batch, by pass (``F``,
    ``I``; ``W`` has none), over the ``tp`` ranks of a node. Megatron-LM's layer split
    (Shoeybi et al. 2019, sec. 3): without sequence parallelism, the attention block and
    the MLP each all-reduce their (T, h) output in the forward and their input gradient in
    ``I``. With sequence parallelism (Korthikanti et al. 2022, sec. 4.2.2) each all-reduce
    becomes an all-gather before the block and a reduce-scatter after it (and the reverse
    in ``I``): the same bytes on a ring, (n-1)/n twice. Full recomputation repeats the
    forward's in ``I``. ``T = b s / cp``; the elements are ``bytes_per_element`` wide."""
    tp = parallel.tp
    nbytes = tokens_per_rank(shape, parallel) * shape.hidden * shape.bytes_per_element
    if parallel.sp:
        one = [
            Collective("all-gather", nbytes, tp, 2, "(T, h) before attention and the MLP"),
            Collective("reduce-scatter", nbytes, tp, 2, "(T, h) after attention and the MLP"),
        ]
    else:
        one = [Collective("all-reduce", nbytes, tp, 2, "(T, h) of attention and of the MLP")]
    again = 2 if parallel.recompute == "full" else 1
    return {"F": one, "I": [c._replace(count=again * c.count) for c in one]}


def ep_collectives(shape: ModelShape, parallel: Parallel) -> dict[str, list[Collective]]:
    """Expert parallelism's all-to-alls of one MoE layer and micro-batch, by pass, over the
    ``ep`` ranks: the forward dispatches each token's ``k`` copies to the ranks holding
    its experts and combines them back (two all-to-alls), ``I`` sends their gradients the
    same two ways. Each buffer is ``T k h`` elements (``T = b s / cp``, divided by ``tp``
    with sequence parallelism, each rank routing its own slice), of which (ep-1)/ep leave
    the rank with balanced routing. A capacity factor c pads each buffer to c times."""
    factor = 1.0 if shape.capacity_factor is None else float(shape.capacity_factor)
    tokens = tokens_per_rank(shape, parallel) / (parallel.tp if parallel.sp else 1)
    nbytes = tokens * shape.experts_per_token * factor * shape.hidden * shape.bytes_per_element
    ep = parallel.ep
    one = [
        Collective("all-to-all", nbytes, ep, 1, "dispatch: each token's k copies to its experts"),
        Collective("all-to-all", nbytes, ep, 1, "combine: the experts' outputs back"),
    ]
    again = 2 if parallel.recompute == "full" else 1
    return {"F": one, "I": [c._replace(count=again) for c in one]}


def cp_collectives(shape: ModelShape, parallel: Parallel) -> dict[str, list[Collective]]:
    """Context parallelism's ring exchange of one layer and micro-batch, by pass, over the
    ``cp`` ranks (ring attention, Liu et al. 2023; Megatron-Core's context parallelism):
    each rank's keys and values, ``T (a_kv d_qk + a_kv d_v) / t`` elements
    (``T = b s / cp``), travel ``cp - 1`` hops round the ring in the forward, so each rank
    sends (cp-1) such blocks, an all-gather's bytes; ``I`` sends them again and their
    gradients back the same way: twice as much. Overlapped with attention in practice; here
    only counted."""
    cp = parallel.cp
    heads = shape.heads if shape.uses_mla else shape.num_kv_heads
    width = heads * (shape.qk_head_size + shape.v_head_size) / parallel.tp
    block = tokens_per_rank(shape, parallel) * width * shape.bytes_per_element
    kv = Collective("all-gather", cp * block, cp, 1, "K and V blocks round the ring")
    again = 2 if parallel.recompute == "full" else 1
    return {"F": [kv], "I": [kv._replace(count=2 * again)]}


def dp_collectives(
    parameters: float,
    parallel: Parallel,
    num_microbatches: int,
    expert_parameters: float = 0.0,
) -> list[Collective]:
    """A step's data-parallel collectives for one rank holding ``parameters`` parameters
    (of which ``expert_parameters`` are routed experts' weights, replicated over ``dp/ep``
    ranks, not ``dp``), by ZeRO stage:

    - 0: one all-reduce of the gradients (``gradient_bytes``) after the last micro-batch;
    - 1 (Megatron's distributed optimizer, ZeRO-1): one reduce-scatter of the gradients,
      and after the optimizer step one all-gather of the updated 16-bit parameters: an
      all-reduce's bytes in all when gradients are 16-bit;
    - 2 (gradients sharded too): the full gradient is not kept, so each micro-batch's
      gradients are reduce-scattered after its backward, ``m`` times a step, and the
      parameters all-gathered once after the step;
    - 3 (ZeRO-3, PyTorch FSDP with its default ``reshard_after_forward=True``): for each
      micro-batch the 16-bit parameters are all-gathered before its forward and again
      before its backward, and its gradients reduce-scattered: ``2m`` all-gathers and ``m``
      reduce-scatters a step (FSDP's ``reshard_after_forward=False``, ZeRO-2-like, saves
      the second all-gather by keeping the parameters).

    Rings of one rank (``dp = 1``, or ``dp = ep`` for expert weights) send nothing."""
    m = as_count(num_microbatches, "num_microbatches", "dp_collectives")
    out = []
    groups = ((parameters - expert_parameters, parallel.dp, "dense"),)
    if expert_parameters:
        groups += ((expert_parameters, parallel.expert_dp, "expert"),)
    g, zero = parallel.gradient_bytes, parallel.zero
    for count, ranks, label in groups:
        grads, weights = count * g, count * 2.0
        if zero == 0:
            out.append(Collective("all-reduce", grads, ranks, 1, f"{label} gradients, once"))
            continue
        every = m if zero >= 2 else 1
        when = "each micro-batch" if every > 1 else "once"
        out.append(Collective("reduce-scatter", grads, ranks, every, f"{label} gradients, {when}"))
        if zero == 3:
            what = f"{label} parameters before each micro-batch's forward and backward"
            out.append(Collective("all-gather", weights, ranks, 2 * m, what))
        else:
            out.append(Collective("all-gather", weights, ranks, 1, f"{label} parameters, once"))
    return out


def all_to_all_s(
    nbytes: float, ranks: int, members_per_node: int, intra_gbps: float, nic_gbps: float
) -> float:
    """Seconds of one all-to-all of ``nbytes`` (one rank's whole send buffer, an equal
    ``nbytes / ranks`` to each rank) over ``ranks`` ranks, ``members_per_node`` of them in
    each node. Assumes rails (a NIC of ``nic_gbps`` per GPU): a rank sends its pieces for
    the ``members_per_node - 1`` others of its node over NVLink (``intra_gbps``) and those
    for the ``ranks - members_per_node`` elsewhere over its own NIC, both at once, each at
    :data:`COLLECTIVE_EFFICIENCY`: the slower of the two. Together they are the (n-1)/n of
    :func:`ring_bytes`. As expert parallelism's dispatch and combine."""
    n = as_count(ranks, "ranks", "all_to_all_s")
    k = as_count(members_per_node, "members_per_node", "all_to_all_s")
    if k > n:
        raise ValueError(f"all_to_all_s needs members_per_node <= ranks = {n}, got {k}")
    size = as_quantity(nbytes, "nbytes", "all_to_all_s")
    intra = as_quantity(intra_gbps, "intra_gbps", "all_to_all_s", inclusive=False)
    nic = as_quantity(nic_gbps, "nic_gbps", "all_to_all_s", inclusive=False)
    inside = size * (k - 1) / n / (COLLECTIVE_EFFICIENCY * intra * 1e9)
    outside = size * (n - k) / n / (COLLECTIVE_EFFICIENCY * nic * 1e9)
    return max(inside, outside)
