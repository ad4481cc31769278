"""A training step's work beyond its layers (ppbook.step_work) and how the sizing search
adds it: each figure worked out by hand from the datasheets (A100 SXM: 2039 GB/s HBM,
NVLink 300 GB/s a direction, one 25 GB/s InfiniBand port per GPU) and the byte counts
stated in the module (80 % of HBM, 80 % of a link for a ring all-reduce)."""

import pytest

from ppbook.layer_time import stage_values
from ppbook.memory import ModelShape, Parallel
from ppbook.sizing import size
from ppbook.sizing_costs import Hardware, structure_of
from ppbook.step_work import (
    accumulate_s,
    collective_allreduce_s,
    dp_link_gbps,
    embedding_times,
    optimizer_step_s,
)

A100 = Hardware(8, gpu_type="a100").device
HBM = 0.8 * 2039e9  # bytes a second that memory-bound work moves on an A100


def test_a_ring_all_reduce_runs_at_80_percent_of_the_link():
    # 8 GPUs, one (2048, 10240) bf16 activation: each sends 2 * 7/8 of its 41.9 MB.
    n = 2048 * 10240 * 2
    assert collective_allreduce_s(n, 8, 300) == pytest.approx(1.75 * n / 240e9, rel=1e-12)
    assert collective_allreduce_s(n, 1, 300) == 0.0


@pytest.mark.parametrize(
    ("gpus", "stride", "gbps"),
    [
        (8, 1, 300),  # one node: NVLink
        (32, 1, 200),  # 8 members a node: 8 ports of 25 GB/s, under NVLink's 300
        (64, 2, 100),  # tp = 2: 4 members a node, 4 ports
        (1024, 8, 25),  # tp = 8: one member a node, its own port
        (1024, 32, 25),  # tp * pp = 32: members 4 nodes apart, one port each
    ],
)
def test_a_data_parallel_ring_gets_the_ports_of_its_members_in_a_node(gpus, stride, gbps):
    assert dp_link_gbps(gpus, 8, stride, 300, 25) == gbps


def test_memory_bound_step_work_by_hand():
    assert accumulate_s(1e9, A100) == pytest.approx(6e9 / HBM, rel=1e-12)  # read 2 + 2, write 2
    assert optimizer_step_s(1e9, A100) == pytest.approx(52e9 / HBM, rel=1e-12)
    shape = ModelShape(2, 1024, 8, 50000, 512)  # learned positions: 512 x 1024 more
    parts = embedding_times(shape, Parallel(tp=2, microbatch_size=2), A100)
    tokens_h = 2 * 512 * 1024
    assert parts["F"] == pytest.approx(7 * 2 * tokens_h / HBM, rel=1e-12)
    words = 25000 * 1024  # the rows of one of 2 vocabulary-parallel ranks
    grad = 2 * (words + 2 * tokens_h) / HBM  # the dense gradient zeroed, the tokens' rows added
    assert parts["W"] == pytest.approx(grad + 6 * (words + 512 * 1024) / HBM, rel=1e-12)
    assert parts["I"] == 0.0 and parts["B"] == parts["W"]


def test_the_search_adds_accumulation_embedding_and_optimizer_to_the_measured_passes():
    # 4 layers on 2 stages of 1F1B, tp = 1, one A100 node: stage 0 = 2 layers + the
    # embedding, stage 1 = 2 layers + the head. Each W gains 2 layers' gradients
    # accumulated ((12 h^2 + 13 h) parameters a layer) and the last the head's V h.
    shape = ModelShape(4, 512, 8, 8000, 256)
    hardware = Hardware(8, gpu_type="a100")
    result = size(
        shape,
        16,
        hardware,
        tp=1,
        pp=2,
        microbatch_size=2,
        recompute="none",
        schedules=("1f1b",),
        top=1,
    )
    best = result.best
    assert (best.config.pp, best.config.dp, best.config.schedule) == (2, 4, "1f1b")
    passes = stage_values(structure_of("1f1b", 2, None), shape, _par(2), A100)
    layer = 12 * 512**2 + 13 * 512
    embedding = embedding_times(shape, _par(2), A100)
    assert best.costs.F[0] == pytest.approx(passes["F"][0] + embedding["F"], rel=1e-12)
    assert best.costs.F[1] == pytest.approx(passes["F"][1], rel=1e-12)
    w0 = passes["W"][0] + 2 * 6 * layer / HBM + embedding["W"]
    w1 = passes["W"][1] + 2 * 6 * layer / HBM + 6 * 8000 * 512 / HBM
    assert best.costs.W[0] == pytest.approx(w0, rel=1e-12)
    assert best.costs.W[1] == pytest.approx(w1, rel=1e-12)
    # Then, after the pipeline: the all-reduce of the fp32 gradients (4 bytes a parameter,
    # as Megatron keeps them) over dp = 4 GPUs of one node (NVLink), and Adam over the
    # fullest GPU's parameters: 52 bytes less the 6 of converting 16-bit gradients to fp32.
    params = best.breakdown.parameter_count
    assert best.allreduce_s == pytest.approx(2 * 3 / 4 * 4 * params / (0.8 * 300e9), rel=1e-12)
    assert best.optimizer_s == pytest.approx((52 - 6) * params / HBM, rel=1e-12)
    assert best.step_time_s == pytest.approx(best.pipeline_s + best.allreduce_s + best.optimizer_s)


def test_zero_1_steps_the_optimizer_on_its_shard():
    shape = ModelShape(4, 512, 8, 8000, 256)
    hardware = Hardware(8, gpu_type="a100")
    plain = size(shape, 64, hardware, tp=1, pp=1, top=1).best
    sharded = size(shape, 64, hardware, tp=1, pp=1, zero=1, top=1).best
    assert plain.config.dp == sharded.config.dp == 8
    assert sharded.optimizer_s == pytest.approx(plain.optimizer_s / 8, rel=1e-12)


def _par(b: int) -> Parallel:
    return Parallel(microbatch_size=b, recompute="none")
