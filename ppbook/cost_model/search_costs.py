"""What one configuration of a training job costs: the hardware, the step's time model and
the activations a schedule holds (chapter 8, :mod:`ppbook.cost_model.sizing_search` searches over
these).

The time model, in seconds, stated once (every number the search prints comes from it):

- **compute**: each pass from a model of the GPU (:mod:`ppbook.cost_model.layer_time`): its matrix
  multiplies at an efficiency that grows with their shapes (tokens per micro-batch,
  hidden / tp), attention (causal flash attention by default, or attention that
  materialises its scores), and the memory-bound element-wise work, on the card's
  datasheet peak and HBM bandwidth (:mod:`ppbook.cost_model.gpu_cards`), calibrated on one GPT layer
  timed on an H200. Bigger micro-batches run their GEMMs faster, so a larger ``b`` can
  make a step faster despite its larger bubble (Megatron-LM sec. 3.4). With
  ``utilisation`` set (an explicit override) compute is instead the FLOPs of
  :mod:`ppbook.cost_model.flops` (the Zero Bubble paper's Table 1) at ``tflops * 1e12 *
  utilisation`` FLOP/s, the same for every shape; it scales compute only, and bubbles and
  communication come on top.
- **step work beyond the layers** (:mod:`ppbook.cost_model.step_work`): each micro-batch's gradients
  accumulated after its ``W``, the embedding on the first model part, and the optimizer
  step after the data-parallel all-reduce (``optimizer_s``), all memory-bound.
- **tensor parallelism** (``tp`` ranks inside a node, Megatron-LM's layer split, Shoeybi
  et al. 2019, arXiv:1909.08053, sec. 3): each layer all-reduces its (b, s, h) output twice
  in the forward and twice in the input-gradient backward (twice more when the backward
  recomputes the whole forward), each a ring all-reduce of ``2 (t-1)/t * b s h e`` bytes
  over the intra-node link at NCCL's bus bandwidth
  (:data:`ppbook.cost_model.step_work.COLLECTIVE_EFFICIENCY`
  of the link), not overlapped with compute; the embedding's output and the head's input
  gradient add one each on the first and last parts. With sequence parallelism the
  all-gather and reduce-scatter that replace each all-reduce move the same bytes.
- **expert parallelism** (``ep`` ranks inside the data-parallel group): each MoE layer's
  dispatch and combine all-to-alls, forward and backward
  (:func:`ppbook.cost_model.step_work.ep_collectives`), on the links the group spans;
  **context parallelism** (``cp`` ranks): ring attention's exchange of keys and values
  (:func:`ppbook.cost_model.step_work.cp_collectives`); both not overlapped.
- **pipeline transfers**: each stage boundary sends the (b, s/cp, h) activation forward
  and its gradient backward, ``b s h e / cp`` bytes (:func:`ppbook.links.boundary_bytes`),
  in ``tp`` pieces, one from each tensor-parallel rank over its own link (Megatron-LM's
  scatter/gather), on the link it crosses. Pipeline rank r of a replica sits on device
  ``r * tp * cp`` (tensor-parallel ranks innermost, then context-parallel, then pipeline
  ranks, then replicas), in nodes of ``gpus_per_node`` devices
  (:class:`ppbook.links.Topology`); messages on one link queue (contention) and sends
  overlap compute.
- **data parallelism**: after the pipeline has drained, the fullest rank's collectives by
  ZeRO stage (:func:`ppbook.cost_model.step_work.dp_collectives`: an all-reduce of its
  gradients without ZeRO; a reduce-scatter of them and an all-gather of the parameters
  with ZeRO-1, per micro-batch with ZeRO-2, FSDP's two all-gathers a micro-batch with
  ZeRO-3), at NCCL's bus bandwidth: on NVLink when the group shares one node, otherwise
  over one NIC per member in each node (rails, :func:`ppbook.links.collective_gbps`);
  not overlapped (as in Megatron-LM's 2021 runs; later frameworks overlap most of it with
  the backward: an upper bound), and then the optimizer step.

Activations held (:func:`held_frontier`): the simulator keeps a micro-batch's activations
on a rank from the start of its ``F`` to the end of its ``B`` (or ``W``), and
:meth:`ppbook.timeline.Timeline.peak_activation_bytes` counts them event by event in
execution order whenever execution order is time order, which it always is on a
simulated timeline (a rank runs one action after another). So the peak depends on each
rank's order of actions and the bytes per stage, never on the times: it can be found once
per (schedule, p, m, v) and reused for every cost, micro-batch size and recomputation
mode. ``tests/test_sizing.py`` checks it against
:func:`ppbook.cost_model.memory_bytes.peak_memory` on
simulated timelines with real costs and transfers.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ppbook import limits
from ppbook.checks import as_count, as_quantity
from ppbook.cost_model.gpu_cards import gpu_card
from ppbook.cost_model.layer_time import Device
from ppbook.cost_model.memory_bytes import ModelShape, Parallel
from ppbook.cost_model.step_work import collective_allreduce_s, dp_link_gbps
from ppbook.costs import Costs
from ppbook.links import boundary_bytes
from ppbook.pipeline_schedule import Schedule
from ppbook.schedules import SCHEDULES, build
from ppbook.schedules.interleaved import rounds
from ppbook.simulate import simulate
from ppbook.timeline import Timeline

H100_SXM = {
    "gpu_type": "h100",
    "gpu_memory_gb": 80.0,
    "tflops": 989.0,
    "intra_node_gbps": 450.0,
    "inter_node_gbps": 50.0,
}
"""An 8-GPU H100 SXM node: 80 GB, 989 dense BF16 TFLOPS (NVIDIA's H100 datasheet states
1,979 with 2:4 sparsity; dense is half), NVLink 4 at 450 GB/s per direction and one
InfiniBand NDR port of 400 Gb/s = 50 GB/s per GPU (``data/links.csv``)."""

A100_SXM_80GB = {
    "gpu_type": "a100",
    "gpu_memory_gb": 80.0,
    "tflops": 312.0,
    "intra_node_gbps": 300.0,
    "inter_node_gbps": 25.0,
}
"""An 8-GPU A100 SXM 80 GB node as in Megatron-LM's Selene runs (arXiv:2104.04473 sec. 5):
312 dense BF16 TFLOPS, NVLink 3 at 300 GB/s per direction, one HDR 200 Gb/s = 25 GB/s
InfiniBand port per GPU (``data/links.csv``)."""

H200_SXM = gpu_card("h200").node()
"""An 8-GPU H200 SXM node (``ppbook/data/gpu_cards.json``): 141 GB, 989 dense BF16 TFLOPS,
NVLink 4 and InfiniBand NDR as the H100's."""

UTILISATION = 0.5
"""The ``--utilisation`` of earlier versions, kept as a value to pass: Megatron-LM's Table 1
reached 44% to 52% of the A100's peak on large GPT models (arXiv:2104.04473). Without an
explicit utilisation the passes are timed by :mod:`ppbook.cost_model.layer_time`."""


GB = 1e9
"""Bytes in a GB: 10^9, as device sheets count (not GiB)."""

MODEL_CARDS = {
    "Megatron 1.7B (Table 1)": ModelShape(24, 2304, 24, 51200, 2048),
    "Megatron 18.4B (Table 1)": ModelShape(40, 6144, 48, 51200, 2048),
    "Megatron 39.1B (Table 1)": ModelShape(48, 8192, 64, 51200, 2048),
    "70B class (Llama-2-70B's 80 x 8192, MLP 4h: 65B)": ModelShape(
        80, 8192, 64, 32000, 4096, tied_embeddings=False, position_embeddings=False
    ),
    "GPT-3 175B": ModelShape(96, 12288, 96, 51200, 2048),
}
"""Model shapes by name (chapter 8's calculator and exercises): Megatron-LM's Table 1
(arXiv:2104.04473; vocabulary 51,200, sequence 2048), GPT-3 175B (Brown et al. 2020,
arXiv:2005.14165, Table 2.1) and a 70B-class model with Llama 2 70B's depth and width (its
SwiGLU MLP and grouped-query attention are not modelled: ppbook counts 65B parameters)."""
GPU_CARDS = {
    "H100 SXM 80 GB": H100_SXM,
    "A100 SXM 80 GB": A100_SXM_80GB,
    "H200 SXM 141 GB": H200_SXM,
}
"""An 8-GPU node's memory, peak TFLOPS and links, by name (chapter 8's calculator)."""


MAX_GPUS = 2**20
"""The most GPUs (and GPUs per node) a search takes: 1,048,576. The search enumerates
the divisors of the count, so a stated cap keeps every answer to seconds."""
FIGURE_RANGE = (1e-3, 1e6)
"""The range a GPU's figures must lie in: memory in GB, TFLOPS, GB/s (from a thousandth to
a million); outside it times and bytes leave the numbers a GPU has, or a float's range."""


def _figure(value: object, name: str) -> float:
    low, high = FIGURE_RANGE
    number = as_quantity(value, name, "Hardware", inclusive=False)
    if not low <= number <= high:
        raise ValueError(f"Hardware needs {name} between {low:g} and {high:g}, got {number:g}")
    return number


@dataclass(frozen=True)
class Hardware:
    """``num_gpus`` GPUs of type ``gpu_type`` (:data:`ppbook.cost_model.gpu_cards.GPU_TYPES`) with
    ``gpu_memory_gb`` GB (10^9 bytes) each, ``tflops`` peak dense 16-bit TFLOPS and
    ``hbm_gbps`` GB/s of HBM, in nodes of ``gpus_per_node`` joined by ``inter_node_gbps``
    GB/s per GPU and direction, ``intra_node_gbps`` inside a node (counts up to
    :data:`MAX_GPUS`, figures in :data:`FIGURE_RANGE`). A figure left ``None``
    is the card's (``ppbook/data/gpu_cards.json``); the default card is the H100 SXM
    (:data:`H100_SXM`). ``utilisation`` ``None`` times each pass with the GPU model
    (:mod:`ppbook.cost_model.layer_time`); a fraction of peak in (0, 1] overrides it with FLOPs at
    ``tflops * utilisation`` (compute only)."""

    num_gpus: int
    gpu_memory_gb: float | None = None
    tflops: float | None = None
    utilisation: float | None = None
    gpus_per_node: int = 8
    intra_node_gbps: float | None = None
    inter_node_gbps: float | None = None
    gpu_type: str = "h100"
    hbm_gbps: float | None = None

    def __post_init__(self) -> None:
        card = gpu_card(self.gpu_type)
        given = {
            "gpu_memory_gb": card.memory_gb,
            "tflops": card.peak_bf16_tflops,
            "intra_node_gbps": card.nvlink_gbps,
            "inter_node_gbps": card.network_gbps,
            "hbm_gbps": card.hbm_gbps,
        }
        for name in ("num_gpus", "gpus_per_node"):
            count = as_count(getattr(self, name), name, "Hardware")
            if count > MAX_GPUS:
                raise ValueError(
                    f"Hardware needs {name} <= {MAX_GPUS:,} (the search's cap), got "
                    + (f"{count:,}" if count < 10**30 else f"a number of {len(str(count))} digits")
                )
            object.__setattr__(self, name, count)
        for name, default in given.items():
            value = default if getattr(self, name) is None else getattr(self, name)
            object.__setattr__(self, name, _figure(value, name))
        if self.utilisation is not None:
            share = as_quantity(self.utilisation, "utilisation", "Hardware", inclusive=False)
            if share > 1:
                raise ValueError(
                    f"Hardware needs utilisation to be a fraction of peak in (0, 1], got {share:g}"
                )
            object.__setattr__(self, "utilisation", share)

    @property
    def memory_bytes(self) -> float:
        return self.gpu_memory_gb * 1e9

    @property
    def flops_per_second(self) -> float | None:
        """Sustained FLOP/s of one GPU under the utilisation override: peak times
        utilisation; ``None`` when the GPU model times the passes."""
        if self.utilisation is None:
            return None
        return self.tflops * 1e12 * self.utilisation

    @property
    def device(self) -> Device:
        """Peak FLOP/s and HBM bandwidth, for :mod:`ppbook.cost_model.layer_time`."""
        return Device.of(self.tflops, self.hbm_gbps)


def allreduce_bytes_per_device(nbytes: float, num_devices: int) -> float:
    """Bytes each device sends in a ring all-reduce of ``nbytes``: 2 (t-1)/t n."""
    t = as_count(num_devices, "num_devices", "allreduce_bytes_per_device")
    n = as_quantity(nbytes, "nbytes", "allreduce_bytes_per_device")
    return 2 * (t - 1) / t * n


def ring_allreduce_s(nbytes: float, ranks: int, gb_per_s: float) -> float:
    """Seconds of a ring all-reduce of ``nbytes`` over ``ranks``: what each device sends
    (:func:`allreduce_bytes_per_device`) over the link's bandwidth."""
    return allreduce_bytes_per_device(nbytes, ranks) / (gb_per_s * 1e9)


def tp_allreduce_s(shape: ModelShape, parallel: Parallel, hardware: Hardware) -> float:
    """One tensor-parallel all-reduce of a layer's (b, s, h) output, in seconds: a ring
    all-reduce over NVLink at NCCL's bus bandwidth
    (:func:`ppbook.cost_model.step_work.collective_allreduce_s`)."""
    nbytes = boundary_bytes(
        parallel.microbatch_size, shape.seq_len, shape.hidden, shape.bytes_per_element
    )
    return collective_allreduce_s(nbytes, parallel.tp, hardware.intra_node_gbps)


TP_ALLREDUCES = {"none": (2, 2), "selective": (2, 2), "full": (2, 4)}
"""Tensor-parallel all-reduces per layer, (forward, input-gradient backward), by
recomputation mode: a full recomputation runs the forward's two again. Beside them the
first model part all-reduces its vocabulary-parallel embedding's output in the forward and
the last part the output head's input gradient in the backward
(:mod:`ppbook.cost_model.sizing_search`)."""


def dp_allreduce_s(parameters: int, dp: int, hardware: Hardware, stride: int = 1) -> float:
    """The gradient all-reduce across ``dp`` replicas of one GPU's ``parameters`` (16-bit),
    whose members sit ``stride`` = tp * pp devices apart, at NCCL's bus bandwidth on the
    link :func:`ppbook.cost_model.step_work.dp_link_gbps` gives the ring."""
    link = dp_link_gbps(
        hardware.num_gpus,
        hardware.gpus_per_node,
        stride,
        hardware.intra_node_gbps,
        hardware.inter_node_gbps,
    )
    return collective_allreduce_s(2.0 * parameters, dp, link)


def route_length(name: str, pp: int, v: int | None) -> int:
    """Model parts on a micro-batch's route, without building the schedule: p v for the
    schedules that take v, 2p for the V shapes (two chunks a rank), else p (DualPipe's
    rank holds two stages, one for each direction, but a micro-batch crosses p)."""
    if SCHEDULES[name].chunks == "two" and name != "dualpipe":
        return 2 * pp
    return pp * (v or 1)


@lru_cache(maxsize=16)
def schedule_of(name: str, pp: int, m: int, v: int | None) -> Schedule:
    """The schedule, built once for each (name, p, m, v) and shared (schedules are immutable)."""
    return build(name, pp, m, v)


def structure_of(name: str, pp: int, v: int | None) -> Schedule:
    """The schedule's structure without its actions: its stages, their ranks and its
    distinct routes, the same for every m (taken from the schedule with m = 2p). It is a
    :class:`~ppbook.pipeline_schedule.Schedule` whose rows are empty, so
    :func:`ppbook.cost_model.memory_bytes.parts_of`,
    :func:`ppbook.cost_model.memory_bytes.rank_parameters` and
    :func:`ppbook.cost_model.flops.stage_costs` read it as
    they read the whole schedule, and a search can keep one for every (schedule, p, v)."""
    return _structure_and_frontier(name, pp, v)[0]


def last_actions(
    name: str, pp: int, v: int | None, m: int | None = None
) -> tuple[tuple[tuple[int, str], ...], ...]:
    """Per rank, the (stage, kind) of each part of its last step, the same for every m of
    the sizing search (taken from the schedule with m = 2p; ``tests/test_sizing.py``
    checks it for m up to 5p), except an interleaved schedule's m that is not a multiple
    of p (:func:`own_order`), taken from the schedule of that m. What must still run
    after a rank's last step bounds the step from below
    (:mod:`ppbook.cost_model.search_step`)."""
    if m is not None and own_order(name, pp, m):
        return _last_of(schedule_of(name, pp, m, v))
    return _structure_and_frontier(name, pp, v)[2]


def own_order(name: str, pp: int, m: int) -> bool:
    """Whether the schedule of ``m`` micro-batches orders its warm-up unlike the one of 2p:
    interleaved schedules (PyTorch's order) run m / max(1, m // p) micro-batches a round,
    p only when p divides m, and their warm-up grows with it."""
    return SCHEDULES[name].chunks == "any" and m % pp != 0 and m > pp


@lru_cache(maxsize=4096)
def _structure_and_frontier(name: str, pp: int, v: int | None):
    """:func:`structure_of`, the held frontier and :func:`last_actions` at m = 2p, from one
    build."""
    schedule = build(name, pp, 2 * pp, v)
    routes = None if schedule.routes is None else tuple(dict.fromkeys(schedule.routes))
    skeleton = Schedule(
        tuple(() for _ in range(pp)),
        schedule.stage_to_rank,
        1 if routes is None else len(routes),
        name=schedule.name,
        routes=routes,
    )
    return skeleton, _frontier_of(schedule), _last_of(schedule)


def _last_of(schedule: Schedule) -> tuple[tuple[tuple[int, str], ...], ...]:
    return tuple(
        tuple((stage, kind) for stage, kind, _ in row[-1].parts) if row else ()
        for row in schedule.actions
    )


def held_frontier(name: str, pp: int, m: int, v: int | None):
    """Per rank: its stages, and the most activations it ever holds, per stage.

    Returns, for each rank, ``(stages, snapshots)``: ``snapshots`` are the counts of
    micro-batch activations held on each of ``stages`` just after each ``F`` starts, in
    execution order (as :meth:`ppbook.timeline.Timeline.memory` counts them), keeping only
    those no other snapshot exceeds on every stage. With positive bytes per stage the peak
    is the largest ``sum(count * bytes)`` over the snapshots (:func:`peak_bytes`).

    A schedule of the sizing search holds its most by the end of its warm-up, and its
    steady state repeats what it holds: for m >= 2p the snapshots are those of m = 2p, so
    a longer schedule is not built for them (``tests/test_sizing.py`` checks every
    schedule searched, with every v, for p from 2 to 6 and m from 2p to 5p; p up to 10 and
    m up to 6p, and p = 16 and 32 at m = 2p + 1, 3p, 3p + 5 and 4p, were checked when
    this was written). A ValueError when the schedule's own rule refuses p, m and v.
    """
    check_rule(name, pp, m, v)
    if m >= 2 * pp and not own_order(name, pp, m):
        return _structure_and_frontier(name, pp, v)[1]
    return _frontier(name, pp, m, v)


def limit_problem(name: str, pp: int, m: int, v: int | None) -> str | None:
    """Why the simulator would refuse to build ``name`` for (p, m, v), or None.

    The limits of :mod:`ppbook.limits` (stages, micro-batches, actions) are checked, without
    building anything, on the schedule of ``m`` micro-batches the search would simulate and
    on the one of ``2p`` it reads its structure from (:func:`structure_of`). Actions are
    counted as three per stage and micro-batch (F, I and W; a schedule with whole
    backwards has two), so a schedule within a third of the action limit may be refused
    here that the builder itself would take.
    """
    stages = route_length(name, pp, v)
    for count in (m, 2 * pp):
        try:
            limits.current().check(
                name, stages=stages, microbatches=count, actions=3 * stages * count, ranks=pp
            )
        except ValueError as exc:
            return str(exc)
    return None


ROUNDS = {
    "interleaved-1f1b": "ScheduleInterleaved1F1B",
    "interleaved-zb": "ScheduleInterleavedZeroBubble",
}
"""The interleaved schedules whose rule is PyTorch's rounds
(:func:`ppbook.schedules.interleaved.rounds`), and PyTorch's class each follows."""


def check_rule(name: str, pp: int, m: int, v: int | None) -> None:
    """The schedule builder's ValueError if it refuses (p, m, v), without building a long one.

    The searched schedules' rules ask for m at least some number up to 2p, or for m a
    multiple of p: a schedule with 2p + (m mod p) micro-batches obeys them exactly when one
    with m does. Only when it does not is m itself given to the builder, which checks its
    rule before building anything, so that its message names the m asked for. The
    interleaved schedules' rule (PyTorch's rounds, :data:`ROUNDS`) is its own function,
    asked directly.
    """
    if SCHEDULES[name].chunks == "any" and name in ROUNDS:
        rounds(name, ROUNDS[name], pp, m)  # the interleaved rule: m a multiple of m // p
        return
    probe = m if m <= 3 * pp else 2 * pp + m % pp
    if probe == 2 * pp:
        refused = _refusal_at_2p(name, pp, v)
    else:
        refused = _refusal(name, pp, probe, v)
    if refused:
        build(name, pp, m, v)  # raises the builder's own message for this m
        raise ValueError(refused)  # (never reached: the rules hold for m as for the probe)


def _refusal_at_2p(name: str, pp: int, v: int | None) -> str | None:
    try:
        _structure_and_frontier(name, pp, v)
    except ValueError as exc:
        return str(exc)
    return None


@lru_cache(maxsize=4096)
def _refusal(name: str, pp: int, m: int, v: int | None) -> str | None:
    """The builder's message if it refuses (p, m, v), else None (each probe built once)."""
    try:
        build(name, pp, m, v)
    except ValueError as exc:
        return str(exc)
    return None


@lru_cache(maxsize=4096)
def _frontier(name: str, pp: int, m: int, v: int | None):
    return _frontier_of(build(name, pp, m, v))


def _frontier_of(schedule: Schedule):
    out = []
    for rank, row in enumerate(schedule.actions):
        stages = schedule.stages_on(rank)
        index = {stage: k for k, stage in enumerate(stages)}
        held = [0] * len(stages)
        snapshots = set()
        for step in row:
            for stage, kind, _ in step.parts:
                if kind == "F":
                    held[index[stage]] += 1
                    snapshots.add(tuple(held))
                elif kind in ("B", "W"):  # a split backward frees at its W
                    held[index[stage]] -= 1
        out.append((stages, _undominated(snapshots)))
    return tuple(out)


def _undominated(snapshots: set[tuple[int, ...]]) -> tuple[tuple[int, ...], ...]:
    """The snapshots no other one equals or exceeds on every stage, largest first."""
    if not snapshots:
        return ()
    if len(next(iter(snapshots))) == 1:  # one stage on the rank: its largest count
        return (max(snapshots),)
    if len(next(iter(snapshots))) == 2:  # two: a sweep down the first count
        kept, most = [], -1
        for snap in sorted(snapshots, reverse=True):  # by the first count, then the second
            if snap[1] > most:  # every earlier one has a first count >= this one's
                kept.append(snap)
                most = snap[1]
        return tuple(kept)
    kept = []
    for snap in sorted(snapshots, key=sum, reverse=True):
        if not any(all(a >= b for a, b in zip(k, snap, strict=True)) for k in kept):
            kept.append(snap)
    return tuple(kept)


def peak_bytes(frontier, stage_bytes: list[float]) -> list[float]:
    """Each rank's peak activation bytes, from :func:`held_frontier` and bytes per stage."""
    out = []
    for stages, snapshots in frontier:
        sizes = [stage_bytes[s] for s in stages]
        best = max(
            (sum(c * x for c, x in zip(snap, sizes, strict=True)) for snap in snapshots),
            default=0.0,
        )
        out.append(max(best, 0.0))
    return out


@lru_cache(maxsize=64)
def simulated(name: str, pp: int, m: int, v: int | None, costs: Costs) -> Timeline:
    """The simulated step of a schedule under ``costs``, cached (costs are hashable)."""
    return simulate(schedule_of(name, pp, m, v), costs)
