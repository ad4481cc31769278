"""Pipeline stages across nodes or tensor parallelism across nodes: bytes and step times
(chapter 7).

Two ways to spread a transformer over two nodes of ``devices_per_node`` devices:

- **pipeline across nodes**: tensor parallelism of ``devices_per_node`` inside each node and
  p = 2 pipeline stages, one per node, run with 1F1B. The boundary carries one message of
  b s h elements per micro-batch in each direction (:func:`ppbook.links.boundary_bytes`);
  the all-reduces of tensor parallelism stay on the fast link.
- **tensor across nodes**: tensor parallelism over all ``2 * devices_per_node`` devices, no
  pipeline. Every layer all-reduces its b s h outputs twice in the forward and twice in the
  backward (the attention block's and the MLP's), and the ring that joins the devices
  crosses between the nodes.

A ring all-reduce of n bytes over t devices sends 2 (t-1)/t n bytes from each device
(reduce-scatter, then all-gather), each step at the pace of the ring's slowest link, so it
takes 2 (t-1)/t n / bandwidth. Per layer and micro-batch a device sends
4 x 2 (t-1)/t b s h = 8 b s h (t-1)/t elements, Megatron-LM's count (Narayanan et al.
2021, arXiv:2104.04473, sec. 3.2, which sets it against the bsh a pipeline boundary sends).

What crosses between the nodes, and on which NICs, is stated, not hidden:

- **rails** (``rails=True``, the default): each GPU has its own NIC of
  ``inter_gb_per_s`` (HGX H100/H200 nodes: eight of 400 Gb/s = 50 GB/s each way). The
  16-device ring runs one channel per GPU, each crossing on its own NIC, so it crosses at
  ``min(intra, 8 x inter)`` (:func:`ppbook.links.collective_gbps`). ``rails=False``
  charges the crossing to one NIC per node, as a node with a single port would.
- **Megatron-LM's scatter/gather** for the pipeline boundary (``scatter_gather=True``, the
  default; Narayanan et al. 2021, sec. 4.1): each of the ``devices_per_node``
  tensor-parallel ranks of a stage sends its 1/t of the boundary over its own NIC, and the
  receiving node all-gathers the pieces over its fast link
  (:func:`ppbook.links.pipeline_message_bytes`). ``scatter_gather=False``: every rank
  sends the whole boundary to its peer, each on its own NIC.

:func:`split_timelines` simulates one step of each option with the simulator, in seconds:
each layer's FLOPs from :func:`ppbook.cost_model.flops.layer_flops` at
``flops_per_second``, divided among the tensor-parallel devices, plus the all-reduces'
time (not overlapped with compute); the pipeline boundary is a transfer of its bytes per
rank over one NIC, with the all-gather's time added as the transfer's latency. The
embedding and the output head are left out (the same work in both options), and so are
latencies and NCCL's efficiency (bandwidth terms only).

:func:`messages_across_nodes` counts the messages of a schedule that a topology sends over
its slow link, from :func:`ppbook.dependencies.sends` (what each action sends, to whom).
"""

from __future__ import annotations

from ppbook.checks import as_count, as_quantity, shown
from ppbook.cost_model.flops import layer_flops
from ppbook.cost_model.model_shape import ModelShape, Parallel
from ppbook.cost_model.search_costs import (  # noqa: F401 (names this module gave before)
    TP_ALLREDUCES,
    allreduce_bytes_per_device,
    ring_allreduce_s,
)
from ppbook.cost_model.step_work import ring_bytes
from ppbook.costs import Costs
from ppbook.dependencies import sends
from ppbook.links import Topology, boundary_bytes, collective_gbps, pipeline_message_bytes
from ppbook.pipeline_schedule import Schedule
from ppbook.schedules import one_f_one_b
from ppbook.simulate import simulate
from ppbook.timeline import Timeline

ALL_REDUCES_PER_LAYER_PER_PASS = 2
"""Tensor parallelism's all-reduces of b s h per layer in each pass (attention, MLP)."""


def messages_across_nodes(schedule: Schedule, topology: Topology) -> int:
    """Messages of one step of ``schedule`` whose sender and receiver are on different nodes
    of ``topology`` (each action's message, :func:`ppbook.dependencies.sends`)."""
    if not isinstance(topology, Topology):
        raise ValueError(
            f"messages_across_nodes needs a ppbook.links.Topology, got {type(topology).__name__}"
        )
    topology.check(schedule.num_ranks)
    count = 0
    for rank, row in enumerate(schedule.actions):
        for step in row:
            for stage, kind, microbatch in step.parts:  # an overlapped pair sends twice
                sent = sends(schedule, stage, kind, microbatch)
                if sent is not None:
                    count += topology.node(rank) != topology.node(schedule.stage_to_rank[sent[0]])
    return count


def tensor_bytes_per_layer(shape: ModelShape, microbatch_size: int, tp: int) -> float:
    """Bytes each device sends per layer and micro-batch under ``tp``-way tensor parallelism:
    four all-reduces of b s h, forward and backward, 8 b s h (t-1)/t elements."""
    message = boundary_bytes(microbatch_size, shape.seq_len, shape.hidden, shape.bytes_per_element)
    t = as_count(tp, "tp", "tensor_bytes_per_layer")
    return 2 * ALL_REDUCES_PER_LAYER_PER_PASS * ring_bytes("all-reduce", message, t)


def pipeline_bytes_per_boundary(shape: ModelShape, microbatch_size: int) -> float:
    """Bytes one pipeline boundary carries per micro-batch: b s h forward and b s h back
    (over all the tensor-parallel ranks of a stage together; with scatter/gather each of
    the t ranks sends 1/t of them, :func:`ppbook.links.pipeline_message_bytes`)."""
    return 2 * boundary_bytes(microbatch_size, shape.seq_len, shape.hidden, shape.bytes_per_element)


def _pass_seconds(shape, layers, tp, microbatch_size, flops_per_second, gb_per_s):
    """F and B of ``layers`` layers on one of ``tp`` devices: FLOPs plus all-reduces."""
    flops = layer_flops(shape, Parallel(tp=tp, microbatch_size=microbatch_size))
    message = boundary_bytes(microbatch_size, shape.seq_len, shape.hidden, shape.bytes_per_element)
    reduce_s = ALL_REDUCES_PER_LAYER_PER_PASS * ring_bytes("all-reduce", message, tp)
    reduce_s /= gb_per_s * 1e9
    return {key: layers * (flops[key] / flops_per_second + reduce_s) for key in ("F", "B")}


def _flag(value, name):
    if not isinstance(value, bool):
        raise ValueError(f"split_timelines needs {name} True or False, got {shown(value)}")
    return value


def split_timelines(
    shape: ModelShape,
    num_microbatches: int,
    *,
    flops_per_second: float,
    intra_gb_per_s: float,
    inter_gb_per_s: float,
    devices_per_node: int = 8,
    microbatch_size: int = 1,
    rails: bool = True,
    scatter_gather: bool = True,
) -> dict[str, Timeline]:
    """One simulated step (seconds) of ``"pipeline"`` and ``"tensor"`` across two nodes.

    Bandwidths are GB/s (10^9 bytes) each way; ``inter_gb_per_s`` is one NIC's. ``rails``:
    one NIC per GPU, so the tensor-parallel ring crosses at
    ``min(intra, devices_per_node * inter)``; otherwise one NIC per node. ``scatter_gather``:
    each tensor-parallel rank of a stage sends 1/t of the boundary over its own NIC and the
    receiving node all-gathers it (Megatron-LM); otherwise each sends all of it (see the
    module's docstring). ``shape.heads`` must split over ``2 * devices_per_node`` devices;
    ``shape.layers`` must be even (two stages of whole layers).
    """
    m = as_count(num_microbatches, "num_microbatches", "split_timelines")
    per_node = as_count(devices_per_node, "devices_per_node", "split_timelines")
    speed = as_quantity(flops_per_second, "flops_per_second", "split_timelines", inclusive=False)
    intra = as_quantity(intra_gb_per_s, "intra_gb_per_s", "split_timelines", inclusive=False)
    inter = as_quantity(inter_gb_per_s, "inter_gb_per_s", "split_timelines", inclusive=False)
    rails, scatter_gather = _flag(rails, "rails"), _flag(scatter_gather, "scatter_gather")
    if shape.layers % 2:
        raise ValueError(f"split_timelines needs an even number of layers, got {shape.layers}")
    b = microbatch_size
    stage = _pass_seconds(shape, shape.layers // 2, per_node, b, speed, intra)
    message = pipeline_message_bytes(
        b, shape.seq_len, shape.hidden, shape.bytes_per_element, per_node,
        scatter_gather=scatter_gather,
    )  # fmt: skip
    gather_s = message["gathered"] / (intra * 1e9)
    pipeline = simulate(
        one_f_one_b(2, m),
        Costs(
            **stage, comm=gather_s, comm_bytes=message["sent"], bandwidth=inter * 1e9,
            time_unit="s",
        ),
    )  # fmt: skip
    ring = collective_gbps(2 * per_node, per_node if rails else 1, intra, inter)
    whole = _pass_seconds(shape, shape.layers, 2 * per_node, b, speed, ring)
    tensor = simulate(one_f_one_b(1, m), Costs(**whole, time_unit="s"))
    return {"pipeline": pipeline, "tensor": tensor}
