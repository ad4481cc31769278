"""Chapter 10's exercises: each right answer passes and each usual slip gets its own hint.

The right answers are worked out by hand here (the crossings of a ring of ranks cut in two,
bytes, a stage's milliseconds from its FLOPs), not by calling the checks' own functions.
"""

import itertools
import random

import pytest

from ppbook.across_nodes import messages_across_nodes
from ppbook.exercises import check
from ppbook.exercises.ch10 import two_node_costs
from ppbook.schedules import interleaved_1f1b, one_f_one_b, zb_v

COMMAND = (
    "torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint node0:29500 "
    "-m ppbook.cli.run --schedule 1f1b --microbatches 16 --device cuda"
)


@pytest.mark.parametrize(
    "command",
    [
        COMMAND,
        COMMAND.replace("--nproc-per-node 4", "--nproc_per_node=4").replace(
            "--nnodes 2", "--nnodes=2:2"
        ),
        COMMAND.replace("torchrun", "python -m torch.distributed.run"),
        COMMAND.replace(" --schedule 1f1b", "") + " --steps 5",  # 1f1b is the default
    ],
)
def test_10_1_the_command_for_two_nodes_of_four(command):
    assert check("10.1", command)


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (COMMAND.replace("--nproc-per-node 4", "--nproc-per-node 8"), "one node's processes"),
        (COMMAND.replace("--nnodes 2", "--standalone"), "one node"),
        (COMMAND.replace("node0:29500", "127.0.0.1:29500"), "cannot reach"),
        (COMMAND.replace("node0:29500", "localhost:29500"), "cannot reach"),
        (COMMAND.replace(" --device cuda", ""), "--device cuda"),
        (COMMAND.replace("-m ppbook.cli.run", "ppbook"), "-m ppbook.cli.run"),
        (COMMAND.replace("--microbatches 16", "--microbatches 8"), "16"),
        (COMMAND.replace("--schedule 1f1b", "--schedule gpipe"), "1F1B"),
        (COMMAND + " --nproc 8", "leave --nproc out"),  # torch reads it as its own
        (COMMAND.replace("--nnodes 2", "--nnodes 1"), "2 nodes"),
        (COMMAND.replace("--rdzv-backend c10d", "--rdzv-backend etcd"), "c10d"),
        (COMMAND.replace("torchrun", "mpirun"), "torchrun"),
        (COMMAND + " --bogus", "unrecognized"),
        ("torchrun --nnodes 2 --nproc-per-node", "expected one argument"),
        ('torchrun "unclosed', "split"),
    ],
)
def test_10_1_each_slip_names_its_flag(command, said):
    verdict = check("10.1", command)
    assert not verdict and said in verdict.text


def test_10_1_wants_a_string():
    assert "string" in check("10.1", ["torchrun"]).message


def _ring_crossings(node_of_rank, v=2, p=16):
    """Crossings each way of one micro-batch whose route is ranks 0..p-1, v times in a row."""
    route = [stage % p for stage in range(v * p)]
    return sum(node_of_rank[a] != node_of_rank[b] for a, b in itertools.pairwise(route))


FREE_10_2 = [d for d in range(24) if not 8 <= d <= 12]  # devices 8-12 are busy


def test_10_2_the_fewest_crossings_are_three_by_exhaustion():
    # Nodes 0 and 2 have 8 free devices, node 1 three. Every way to put 8 ranks on node 0
    # and 8 on node 2: none crosses fewer than 3 times each way, and only the two halves
    # split at 7|8 (the wrap 15|0 inside the cut) reach 3.
    counts = {}
    for node0 in itertools.combinations(range(16), 8):
        counts[node0] = _ring_crossings([0 if r in node0 else 2 for r in range(16)])
    assert min(counts.values()) == 3
    assert {k for k, c in counts.items() if c == 3} == {tuple(range(8)), tuple(range(8, 16))}
    # Any placement that also uses node 1 cuts the ring of ranks at least three times, the
    # wrap at best: 2 + 2 + 1 = 5 (checked on 20,000 random ones).
    rng = random.Random(10)
    for _ in range(20_000):
        on_node1 = set(rng.sample(range(16), rng.randint(1, 3)))
        rest = [r for r in range(16) if r not in on_node1]
        node0 = set(rng.sample(rest, rng.randint(len(rest) - 8, 8)))
        nodes = [1 if r in on_node1 else 0 if r in node0 else 2 for r in range(16)]
        assert _ring_crossings(nodes) >= 5
    # The package's count agrees for the placement on nodes 0 and 2: 3 each way, m = 32.
    topology = two_node_costs(12.5, list(range(8)) + list(range(16, 24))).topology
    assert messages_across_nodes(interleaved_1f1b(16, 32, 2), topology) == 192


@pytest.mark.parametrize(
    "placement",
    [
        list(range(8)) + list(range(16, 24)),
        [*range(16, 24), *range(8)],
        [7 - r for r in range(8)] + list(range(16, 24)),
    ],
)
def test_10_2_any_split_at_the_wrap_on_the_two_free_nodes_is_right(placement):
    assert check("10.2", placement)


def test_10_2_slips():
    default = check("10.2", list(range(16)))  # the default placement: devices 8-12 are busy
    assert not default and "not free" in default.message
    in_order = check("10.2", FREE_10_2[:16])  # the free devices in order: three nodes
    assert not in_order and "5 messages" in in_order.message and "two nodes" in in_order.hint
    alternating = check("10.2", [(r % 2) * 16 + r // 2 for r in range(16)])
    assert not alternating and "neighbouring ranks" in alternating.hint
    assert "31 messages" in alternating.message  # every one of the 31 hops of the route
    rotated = check("10.2", [(r + 4) % 8 + (16 if 4 <= r < 12 else 0) for r in range(16)])
    assert not rotated and "rank 15 back to rank 0" in rotated.hint  # ranks 4-11 on node 2
    assert "4 messages" in rotated.message
    assert "own device" in check("10.2", [0] * 16).message
    assert "not free" in check("10.2", list(range(9, 25))).message
    assert "list of 16 devices" in check("10.2", "0-15").message


def test_10_3_the_crossings_and_the_message_time_by_hand():
    nodes = two_node_costs(1.0).topology
    assert messages_across_nodes(one_f_one_b(16, 16), nodes) == 2 * 16  # 1 each way
    assert messages_across_nodes(zb_v(16, 16), nodes) == 4 * 16  # 7|8 down and back up
    assert messages_across_nodes(interleaved_1f1b(16, 16, 2), nodes) == 6 * 16  # 2v - 1
    slow = nodes.inter_node.time(4096 * 4096 * 2)  # ms on 1 GB/s: 33.6 ms per message
    assert slow == pytest.approx(33.554432)


def test_10_3_one_f_one_b_on_a_slow_link():
    assert check("10.3", "1f1b") and check("10.3", " 1F1B ")
    for other in ("zb-v", "interleaved-1f1b"):
        verdict = check("10.3", other)
        assert not verdict and "34 ms" in verdict.hint
    assert "wants one of" in check("10.3", "gpipe").message


def test_the_chapter_costs_by_hand():
    costs = two_node_costs(50.0)
    b_s_h = 4096 * 4096
    forward = b_s_h * (24 * 4096 + 4 * 4096)  # FLOPs of a layer's forward (Zero Bubble Table 1)
    assert costs.F == pytest.approx(forward * 4 / 400e12 * 1e3)  # 4 whole layers: 19.24 ms
    assert costs.I + costs.W == pytest.approx(2 * costs.F)
    assert costs.comm_bytes == b_s_h * 2 and costs.contention and costs.time_unit == "ms"
    assert costs.topology.link(7, 8).name == "between the nodes"
    assert costs.topology.link(6, 7).name == "NVLink 4"


BYTES = 14 * 16 * 2048 * 8192 * 2  # (2v - 1) each way x 2 x m messages of b s h x 2 bytes


def test_10_4_bytes_across_the_nodes():
    from ppbook.exercises.ch10 import CROSSING, MODEL, STAGES

    # Configurations that can run: whole layers per chunk (p v = 64 chunks of 64 layers),
    # whole layers per stage for the chapter's model (16 stages, 32 chunks with v = 2).
    assert CROSSING["layers"] % (CROSSING["p"] * CROSSING["v"]) == 0
    assert MODEL.layers % (2 * STAGES) == 0
    assert BYTES == 7_516_192_768
    assert check("10.4", BYTES) and check("10.4", 7.52e9)
    assert "one direction" in check("10.4", BYTES / 2).message
    assert "2v crossings" in check("10.4", 16 * 16 * 2048 * 8192 * 2).message
    assert "1F1B" in check("10.4", 2 * 16 * 2048 * 8192 * 2).message
    assert "bits" in check("10.4", BYTES * 8).message
    assert "one micro-batch" in check("10.4", BYTES / 16).message
    assert "not the bytes" in check("10.4", 1e9).message
    assert "wants a number of bytes" in check("10.4", "7.5e9").message


def test_10_5_pytorch_class_of_interleaved_1f1b():
    assert check("10.5", "ScheduleInterleaved1F1B")
    assert check("10.5", "Interleaved1F1B")  # TorchTitan's and get_schedule_class's name
    looped = check("10.5", "ScheduleLoopedBFS")
    assert not looped and "depth-first" in looped.hint
    zero_bubble = check("10.5", "ScheduleInterleavedZeroBubble")
    assert not zero_bubble and "I and W" in zero_bubble.hint
    for single in ("ScheduleGPipe", "Schedule1F1B", "ScheduleZBVZeroBubble"):
        assert "looped classes" in check("10.5", single).hint
    assert "not one of PyTorch's schedule classes" in check("10.5", "PipelineScheduleMulti").message
    assert "not one of" in check("10.5", "Megatron").message
    assert "class name" in check("10.5", 3).message
