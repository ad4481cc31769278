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
from ppbook.cost_model.memory_bytes import ModelShape, layer_parameters, parts_of, rank_parameters
from ppbook.cost_model.search_costs import (
    TP_ALLREDUCES,
    Hardware,
    dp_allreduce_s,
    last_actions,
    simulated,
    structure_of,
    tp_allreduce_s,
)
from ppbook.cost_model.search_result import Config, Option
from ppbook.cost_model.step_work import (
    accumulate_s,
    embedding_times,
    head_accumulate_s,
    optimizer_step_s,
)
from ppbook.costs import Costs
from ppbook.links import Link, Topology, boundary_bytes
from ppbook.pipeline_schedule import Schedule


class _Layout(NamedTuple):
    """A schedule's structure (:func:`structure_of`) laid over a model: layers per model
    part, each stage's part, and each rank's parameters (one tensor-parallel share)."""

    schedule: Schedule
    layers: list[int]
    parts: list[int]
    counts: list[int]


@lru_cache(maxsize=1024)
def _structure(shape: ModelShape, name: str, pp: int, v: int | None, tp: int) -> _Layout:
    """The same for every m: found on the schedule's structure, without its actions."""
    schedule = structure_of(name, pp, v)
    layers = parts_of(schedule, shape, None)
    parts = [schedule.model_part(s) for s in range(schedule.num_stages)]
    return _Layout(schedule, layers, parts, rank_parameters(schedule, shape, tp, layers))


def _stage_values(shape, hardware, c: Config, parallel, block) -> dict[str, list[float]]:
    """Per stage F, I, W, B in seconds (one device's share, as in ``Costs``) and activation
    bytes: compute from the GPU model (:func:`ppbook.cost_model.layer_time.stage_values`, with each
    micro-batch's gradient accumulation and the embedding of :mod:`ppbook.cost_model.step_work`), or
    from :func:`ppbook.cost_model.flops.stage_values` under a utilisation override, plus the
    tensor-parallel all-reduces (:mod:`ppbook.cost_model.search_costs`)."""
    schedule, layers, parts, _ = _structure(shape, c.schedule, c.pp, c.v, c.tp)
    share = schedule.chunk_share
    first, last = 0, len(layers) - 1
    if hardware.utilisation is None:
        attention, dropout = block
        device = hardware.device
        values = timed_stage_values(schedule, shape, parallel, device, attention, layers, dropout)
        per_layer = accumulate_s(layer_parameters(shape, c.tp), device)
        embedding = embedding_times(shape, parallel, device, dropout)
        head = head_accumulate_s(shape, parallel, device)
        for stage, k in enumerate(parts):
            extra = {key: layers[k] * per_layer if key == "W" else 0.0 for key in "FIW"}
            extra["W"] += head if k == last else 0.0
            for key in "FIW" if k == first else ():
                extra[key] += embedding[key]
            for key in "FIW":
                values[key][stage] += extra[key] / share
    else:
        values = stage_values(schedule, shape, parallel, hardware.flops_per_second, layers)
    if c.tp > 1:
        one = tp_allreduce_s(shape, parallel, hardware)
        forward, backward = TP_ALLREDUCES[c.recompute]
        for stage, k in enumerate(parts):
            # the embedding's output on the first part, the head's input gradient on the last
            values["F"][stage] += (layers[k] * forward + (k == first)) * one / share
            values["I"][stage] += (layers[k] * backward + (k == last)) * one / share
    values["B"] = [x + w for x, w in zip(values["I"], values["W"], strict=True)]
    return values


def _costs(shape, hardware, c: Config, values: dict[str, list[float]]) -> Costs:
    """The ``Costs`` to simulate ``c``: its stage values, and the pipeline transfers on the
    links they cross (:mod:`ppbook.cost_model.search_costs`). Built only for the options
    simulated."""
    topology = Topology(
        intra_node=Link(bandwidth=hardware.intra_node_gbps * 1e9, name="intra-node"),
        inter_node=Link(bandwidth=hardware.inter_node_gbps * 1e9, name="inter-node"),
        devices_per_node=hardware.gpus_per_node,
        placement=tuple(r * c.tp for r in range(c.pp)),
    )
    message = boundary_bytes(
        c.microbatch_size, shape.seq_len, shape.hidden, shape.bytes_per_element
    )
    return Costs(**values, comm_bytes=message, topology=topology, contention=True, time_unit="s")


def _lower_bound(
    option: Option, values, shape: ModelShape, hardware: Hardware, zero: int = 0
) -> float:
    """No step is shorter than this: a rank's first action is a forward on one of its stages,
    which waits for the forwards of every stage before it on the route; then the rank
    computes all its passes (busy); after its last step, the input gradients that step
    sends back must still pass every earlier stage of the route, each at least that
    stage's ``I`` (:func:`~ppbook.cost_model.search_costs.last_actions`); then the data-parallel
    all-reduce and the optimizer step run. ``values``: the option's stage values
    (``_stage_values``, one device's share: a chunk pass takes the value times the chunk
    share)."""
    c = option.config
    schedule = _structure(shape, c.schedule, c.pp, c.v, c.tp).schedule
    stage_to_rank, share, route = schedule.stage_to_rank, schedule.chunk_share, schedule.route(0)
    per_stage = {key: [x * share for x in values[key]] for key in ("F", "B", "I")}
    before = {}
    ahead = 0.0
    for stage in route:
        before[stage] = ahead
        ahead += per_stage["F"][stage]
    busy = [0.0] * c.pp
    start = [ahead] * c.pp
    for stage, rank in enumerate(stage_to_rank):
        busy[rank] += per_stage["F"][stage] + per_stage["B"][stage]
        start[rank] = min(start[rank], before[stage])
    routes = [schedule.route(j) for j in range(schedule.num_microbatches)]
    tails = [
        max((_tail(stage, kind, routes, per_stage["I"]) for stage, kind in last), default=0.0)
        for last in last_actions(c.schedule, c.pp, c.v)
    ]
    longest = max(
        s + c.num_microbatches * b + t for s, b, t in zip(start, busy, tails, strict=True)
    )
    return longest + _allreduce(option, hardware) + _optimizer(option, hardware, zero)


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


def _allreduce(option: Option, hardware: Hardware) -> float:
    c = option.config
    return dp_allreduce_s(option.breakdown.parameter_count, c.dp, hardware, c.tp * c.pp)


def _optimizer(option: Option, hardware: Hardware, zero: int) -> float:
    """The optimizer step on the fullest GPU, after the all-reduce: its parameters, or
    with ZeRO-1 its 1/dp shard of them (the shards' all-gather is the second half of the
    all-reduce's bytes)."""
    share = option.config.dp if zero == 1 else 1
    return optimizer_step_s(option.breakdown.parameter_count / share, hardware.device)


def _order(option: Option) -> tuple[float, float]:
    """Faster first; step times equal to 9 significant digits (floating-point noise apart)
    go by memory, the smaller first."""
    return float(f"{option.step_time_s:.9g}"), option.memory_bytes


def _rank(pending, hardware, top: int | None, zero: int = 0) -> tuple[list[Option], int]:
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
        allreduce = _allreduce(option, hardware)
        optimizer = _optimizer(option, hardware, zero)
        simulated_option = replace(
            option,
            costs=costs,
            step_time_s=makespan + allreduce + optimizer,
            pipeline_s=makespan,
            allreduce_s=allreduce,
            optimizer_s=optimizer,
            bubble_fraction=bubble,
        )
        insort(done, simulated_option, key=_order)  # done stays fastest first
    kept = done if top is None else done[:top]
    return kept, len(pending) - len(kept)
