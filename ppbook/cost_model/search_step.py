"""A sizing configuration's step (chapter 8, :mod:`ppbook.cost_model.sizing_search`): its stage
costs under the
time model of :mod:`ppbook.cost_model.search_costs` and :mod:`ppbook.cost_model.step_work`, a
lower bound on its
step, and the ranking that simulates the options in order of that bound.

Times in seconds. A stage's values are one device's share, as in
:class:`~ppbook.costs.Costs` (a chunk's pass takes the value times the chunk share).
"""

from __future__ import annotations

from bisect import insort
from dataclasses import replace
from functools import lru_cache
from typing import NamedTuple

from ppbook.cost_model.flops import stage_values
from ppbook.cost_model.layer_time import stage_values as timed_stage_values
from ppbook.cost_model.memory_bytes import (
    ModelShape,
    Parallel,
    layer_parameters,
    parts_of,
    rank_expert_parameters,
    rank_parameters,
)
from ppbook.cost_model.parameters import part_layer_kinds
from ppbook.cost_model.search_costs import (
    Hardware,
    last_actions,
    simulated,
    structure_of,
)
from ppbook.cost_model.search_result import Config, Option, parallel_of
from ppbook.cost_model.step_work import (
    accumulate_s,
    cp_collectives,
    dp_collectives,
    embedding_times,
    ep_collectives,
    head_accumulate_s,
    optimizer_step_s,
    tp_collectives,
)
from ppbook.costs import Costs
from ppbook.links import Link, Topology, boundary_bytes, collective_gbps
from ppbook.pipeline_schedule import Schedule


class _Layout(NamedTuple):
    """A schedule's structure (:func:`structure_of`) laid over a model: layers per model
    part, each stage's part, each rank's parameters (one tensor- and expert-parallel share)
    and, of them, the routed experts' weights."""

    schedule: Schedule
    layers: list[int]
    parts: list[int]
    counts: list[int]
    experts: list[int]


@lru_cache(maxsize=1024)
def _structure(
    shape: ModelShape, name: str, pp: int, v: int | None, tp: int, ep: int = 1
) -> _Layout:
    """The same for every m: found on the schedule's structure, without its actions."""
    schedule = structure_of(name, pp, v)
    layers = parts_of(schedule, shape, None)
    parts = [schedule.model_part(s) for s in range(schedule.num_stages)]
    counts = rank_parameters(schedule, shape, tp, layers, ep)
    experts = rank_expert_parameters(schedule, shape, tp, layers, ep)
    return _Layout(schedule, layers, parts, counts, experts)


def _members_per_node(size: int, stride: int, hardware: Hardware) -> int:
    """Members of a group of ``size`` ranks ``stride`` devices apart that share a node."""
    return min(size, max(1, hardware.gpus_per_node // stride))


def group_gbps(size: int, stride: int, hardware: Hardware) -> float:
    """The per-direction GB/s a ring over ``size`` ranks ``stride`` devices apart gets:
    NVLink inside a node, else one NIC per member in each node
    (:func:`ppbook.links.collective_gbps`, rails)."""
    if size * stride <= hardware.gpus_per_node:
        return hardware.intra_node_gbps
    members = _members_per_node(size, stride, hardware)
    return collective_gbps(size, members, hardware.intra_node_gbps, hardware.inter_node_gbps)


def _pass_seconds(collectives: dict, gbps: float) -> dict[str, float]:
    return {key: sum(c.seconds(gbps) for c in collectives.get(key, ())) for key in "FIW"}


def _stage_values(shape, hardware, c: Config, parallel, block) -> dict[str, list[float]]:
    """Per stage F, I, W, B in seconds (one device's share, as in ``Costs``) and activation
    bytes: compute from the GPU model (:func:`ppbook.cost_model.layer_time.stage_values`, with each
    micro-batch's gradient accumulation and the embedding of :mod:`ppbook.cost_model.step_work`), or
    from :func:`ppbook.cost_model.flops.stage_values` under a utilisation override, plus the
    collectives each layer waits for (:mod:`ppbook.cost_model.step_work`): tensor
    parallelism's all-reduces (or all-gathers and reduce-scatters with sequence
    parallelism) on NVLink, context parallelism's ring exchange and, in each MoE layer,
    expert parallelism's all-to-alls, on the links their groups span; not overlapped."""
    schedule, layers, parts, _, _ = _structure(shape, c.schedule, c.pp, c.v, c.tp, c.ep)
    share = schedule.chunk_share
    first, last = 0, len(layers) - 1
    kinds = part_layer_kinds(shape, layers)
    if hardware.utilisation is None:
        attention, dropout = block
        device = hardware.device
        values = timed_stage_values(schedule, shape, parallel, device, attention, layers, dropout)
        dense = accumulate_s(layer_parameters(shape, c.tp, moe=False), device, parallel)
        moe = (
            accumulate_s(layer_parameters(shape, c.tp, moe=True, ep=c.ep), device, parallel)
            if shape.is_moe
            else 0.0
        )
        embedding = embedding_times(shape, parallel, device, dropout)
        head = head_accumulate_s(shape, parallel, device)
        for stage, k in enumerate(parts):
            nd, nm = kinds[k]
            extra = {"F": 0.0, "I": 0.0, "W": nd * dense + nm * moe}
            extra["W"] += head if k == last else 0.0
            for key in "FIW" if k == first else ():
                extra[key] += embedding[key]
            for key in "FIW":
                values[key][stage] += extra[key] / share
    else:
        values = stage_values(schedule, shape, parallel, hardware.flops_per_second, layers)
    per_layer = {key: 0.0 for key in "FIW"}
    per_moe_layer = {key: 0.0 for key in "FIW"}
    one = 0.0  # the embedding's output (first part) and the head's input gradient (last)
    if c.tp > 1:
        tp_s = _pass_seconds(tp_collectives(shape, parallel), hardware.intra_node_gbps)
        one = tp_s["F"] / 2
        per_layer = {key: per_layer[key] + tp_s[key] for key in "FIW"}
    if c.cp > 1:
        cp_s = _pass_seconds(cp_collectives(shape, parallel), group_gbps(c.cp, c.tp, hardware))
        per_layer = {key: per_layer[key] + cp_s[key] for key in "FIW"}
    if c.ep > 1:
        link = group_gbps(c.ep, c.tp * c.cp * c.pp, hardware)
        per_moe_layer = _pass_seconds(ep_collectives(shape, parallel), link)
    for stage, k in enumerate(parts):
        nd, nm = kinds[k]
        for key in "FI":
            waits = (nd + nm) * per_layer[key] + nm * per_moe_layer[key]
            waits += one if (key == "F" and k == first) or (key == "I" and k == last) else 0.0
            values[key][stage] += waits / share
    values["B"] = [x + w for x, w in zip(values["I"], values["W"], strict=True)]
    return values


def _costs(shape, hardware, c: Config, values: dict[str, list[float]]) -> Costs:
    """The ``Costs`` to simulate ``c``: its stage values, and the pipeline transfers on the
    links they cross (:mod:`ppbook.cost_model.search_costs`). Each stage boundary's (b, s/cp,
    h) message leaves the tp ranks of a stage in t pieces, one over each rank's own link
    (Megatron-LM's scatter/gather, :func:`ppbook.links.pipeline_message_bytes`; with
    sequence parallelism each rank holds its piece already): the link of pipeline rank r's
    first device ``r * tp * cp`` carries ``1/t`` of it. Built only for the options
    simulated."""
    topology = Topology(
        intra_node=Link(bandwidth=hardware.intra_node_gbps * 1e9, name="intra-node"),
        inter_node=Link(bandwidth=hardware.inter_node_gbps * 1e9, name="inter-node"),
        devices_per_node=hardware.gpus_per_node,
        placement=tuple(r * c.tp * c.cp for r in range(c.pp)),
    )
    piece = shape.seq_len // c.cp  # check_fit: cp divides the sequence
    message = boundary_bytes(c.microbatch_size, piece, shape.hidden, shape.bytes_per_element)
    message /= c.tp
    return Costs(**values, comm_bytes=message, topology=topology, contention=True, time_unit="s")


def _lower_bound(
    option: Option, values, shape: ModelShape, hardware: Hardware, layout: Parallel
) -> float:
    """No step is shorter than this: a rank's first action is a forward on one of its stages,
    which waits for the forwards of every stage before it on the route; then the rank
    computes all its passes (busy); after its last step, the input gradients that step
    sends back must still pass every earlier stage of the route, each at least that
    stage's ``I`` (:func:`~ppbook.cost_model.search_costs.last_actions`); then the
    data-parallel collectives and the optimizer step run. ``values``: the option's stage
    values (``_stage_values``, one device's share: a chunk pass takes the value times the
    chunk share)."""
    c = option.config
    schedule = _structure(shape, c.schedule, c.pp, c.v, c.tp, c.ep).schedule
    stage_to_rank, share = schedule.stage_to_rank, schedule.chunk_share
    per_stage = {key: [x * share for x in values[key]] for key in ("F", "B", "I")}
    routes = [schedule.route(j) for j in range(schedule.num_microbatches)]
    before: dict[int, float] = {}  # the least forward work ahead of each stage on any route
    for route in {tuple(r) for r in routes}:
        ahead = 0.0
        for stage in route:
            before[stage] = min(before.get(stage, ahead), ahead)
            ahead += per_stage["F"][stage]
    busy = [0.0] * c.pp
    start = [max(before.values())] * c.pp
    for stage, rank in enumerate(stage_to_rank):
        busy[rank] += per_stage["F"][stage] + per_stage["B"][stage]
        start[rank] = min(start[rank], before[stage])
    tails = [
        max((_tail(stage, kind, routes, per_stage["I"]) for stage, kind in last), default=0.0)
        for last in last_actions(c.schedule, c.pp, c.v, c.num_microbatches)
    ]
    longest = max(
        s + c.num_microbatches * b + t for s, b, t in zip(start, busy, tails, strict=True)
    )
    return (
        longest
        + _data_parallel(option, hardware, layout, shape)
        + _optimizer(option, hardware, layout, shape)
    )


def _tail(stage: int, kind: str, routes, input_grad: list[float]) -> float:
    """The least work that must follow a backward (``B`` or ``I``) on ``stage``: the input
    gradient passes each stage before it on its route, at least ``I`` each (the shortest
    over the routes through ``stage``). Nothing follows a ``W``."""
    if kind not in ("B", "I"):
        return 0.0
    chains = [
        sum(input_grad[k] for k in route[: route.index(stage)])
        for route in routes
        if stage in route
    ]
    return min(chains, default=0.0)


def _expert_count(option: Option, shape: ModelShape) -> int:
    c = option.config
    return _structure(shape, c.schedule, c.pp, c.v, c.tp, c.ep).experts[option.breakdown.rank]


def _data_parallel(option: Option, hardware: Hardware, layout: Parallel, shape) -> float:
    """The fullest GPU's data-parallel collectives of a step, by ZeRO stage
    (:func:`ppbook.cost_model.step_work.dp_collectives`: gradients all-reduced, or
    reduce-scattered and the parameters all-gathered, per micro-batch for ZeRO-2/3), on
    the links the groups span (replicas ``tp * cp * pp`` devices apart; the expert
    weights' groups ``ep`` times further), not overlapped: an upper bound where a trainer
    overlaps them with the backward."""
    c = option.config
    parallel = parallel_of(c, layout=layout)
    expert = _expert_count(option, shape)
    stride = c.tp * c.cp * c.pp
    total = 0.0
    for collective in dp_collectives(
        option.breakdown.parameter_count, parallel, c.num_microbatches, expert
    ):
        if collective.ranks < 2:
            continue
        spread = stride * (c.ep if collective.ranks == parallel.expert_dp and expert else 1)
        total += collective.seconds(group_gbps(collective.ranks, spread, hardware))
    return total


def _optimizer(option: Option, hardware: Hardware, layout: Parallel, shape) -> float:
    """The optimizer step on the fullest GPU, after its collectives: its parameters, or
    with ZeRO its shard of them (1/dp of the dense ones, ep/dp of the experts')."""
    c = option.config
    parallel = parallel_of(c, layout=layout)
    count = option.breakdown.parameter_count
    if parallel.zero >= 1:
        expert = _expert_count(option, shape)
        count = (count - expert) / c.dp + expert / parallel.expert_dp
    return optimizer_step_s(count, hardware.device, parallel)


def _order(option: Option) -> tuple[float, float]:
    """Faster first; step times equal to 9 significant digits (floating-point noise apart)
    go by memory, the smaller first."""
    return float(f"{option.step_time_s:.9g}"), option.memory_bytes


def _rank(
    pending, hardware, top: int | None, layout: Parallel, shape: ModelShape
) -> tuple[list[Option], int]:
    """Simulate in order of the lower bound; with ``top``, stop when no other can enter."""
    pending.sort(key=lambda item: item[0])
    done: list[Option] = []
    for bound, option, costs_of in pending:
        if top is not None and len(done) >= top and bound > done[top - 1].step_time_s:
            break
        c = option.config
        costs = costs_of()
        timeline = simulated(c.schedule, c.pp, c.num_microbatches, c.v, costs)
        makespan, bubble = timeline.makespan, timeline.bubble_fraction
        collectives = _data_parallel(option, hardware, layout, shape)
        optimizer = _optimizer(option, hardware, layout, shape)
        simulated_option = replace(
            option,
            costs=costs,
            step_time_s=makespan + collectives + optimizer,
            pipeline_s=makespan,
            allreduce_s=collectives,
            optimizer_s=optimizer,
            bubble_fraction=bubble,
        )
        insort(done, simulated_option, key=_order)  # done stays fastest first
    kept = done if top is None else done[:top]
    return kept, len(pending) - len(kept)
