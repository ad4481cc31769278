"""Chapter 7's exercises: each right answer passes and each usual slip gets its own hint.

The right answers are worked out by hand here (bytes, milliseconds, the 1F1B and GPipe
step times as lines in c, a chain cut once), not by calling the checks' own functions;
ppbook.across_nodes, which exercise 7.6 uses, is checked against hand-worked bytes and
seconds below.
"""

import pytest

from ppbook.across_nodes import (
    allreduce_bytes_per_device,
    messages_across_nodes,
    pipeline_bytes_per_boundary,
    split_timelines,
    tensor_bytes_per_layer,
)
from ppbook.costs import Costs
from ppbook.exercises import check
from ppbook.exercises.ch7 import SPLIT, SPLIT_MODEL, chunk_makespans, round_trip_share
from ppbook.links import Link, Topology
from ppbook.memory import ModelShape
from ppbook.schedules import gpipe, interleaved_1f1b, one_f_one_b, zb_v
from ppbook.simulate import simulate

BYTES = 4 * 2048 * 8192 * 2  # b s h x 2 bytes (bf16)


def test_7_1_bytes_per_boundary():
    assert check("7.1", BYTES) and check("7.1", 1.342e8)
    assert "elements" in check("7.1", BYTES // 2).message
    assert "fp32" in check("7.1", BYTES * 2).message
    assert "one sample" in check("7.1", BYTES // 4).message
    assert "bits" in check("7.1", BYTES * 8).message
    assert "megabytes" in check("7.1", 134.2).message
    assert "wants a number of bytes" in check("7.1", "134217728").message


def test_7_2_message_time_on_infiniband_ndr():
    ms = BYTES / 50e9 * 1e3  # 2.684 ms
    assert check("7.2", ms) and check("7.2", 2.68)
    assert "both directions" in check("7.2", BYTES / 100e9 * 1e3).message
    assert "400 Gb/s" in check("7.2", BYTES / 400e9 * 1e3).message
    assert "2^30" in check("7.2", BYTES / (50 * 2**30) * 1e3).message
    assert "seconds" in check("7.2", ms / 1e3).message


def test_7_3_a_bandwidth_whose_round_trip_costs_5_to_10_percent():
    # p = 8, m = 32, F = 1, B = 2: GPipe takes (m+p-1)(F+B) + 2(p-1)c = 117 + 14c (chapter
    # 1's formula); 1F1B 117 + 68c: m/p = 4 round trips of 2(p-1) = 14 hops and 2(p-2) = 12
    # more in the cool-down (test_links checks the round trip's rate by hand). So the share
    # 54c / (117 + 68c) is 5 % at c = 5.85/50.6 = 0.116 and 10 % at c = 11.7/47.2 = 0.248.
    for c in (0.12, 0.2, 0.24):
        assert check("7.3", Costs(F=1, B=2, comm_bytes=4e7, bandwidth=4e7 / c))
    low = check("7.3", Costs(F=1, B=2, comm_bytes=4e7, bandwidth=4e7 / 0.1))
    assert not low and "lower bandwidth" in low.hint and "4.4%" in low.message  # 5.4/123.8
    high = check("7.3", Costs(F=1, B=2, comm_bytes=4e7, bandwidth=4e7 / 0.5))
    assert not high and "higher bandwidth" in high.hint and "17.9%" in high.message  # 27/151
    assert "keep F = 1" in check("7.3", Costs(F=1, B=3, comm_bytes=4e7, bandwidth=2e8)).message
    assert "Costs" in check("7.3", 2e8).message


def test_7_3_measures_what_the_hand_lines_say():
    for c in (0.1, 0.2, 0.5):
        share = round_trip_share(Costs(F=1, B=2, comm_bytes=4e7, bandwidth=4e7 / c))
        assert share == pytest.approx(54 * c / (117 + 68 * c))


def test_7_4_the_number_of_chunks_on_a_slow_link():
    # v = 4 is the shortest: 59.45 against 59.6 at v = 3 and 60 at v = 5 (simulated).
    assert check("7.4", 4)
    assert "fewer chunks" in check("7.4", 8).hint and "queue" in check("7.4", 5).message
    assert "more chunks still pay" in check("7.4", 2).hint
    assert "whole number" in check("7.4", 9).message


def test_7_4_v_1_is_1f1b_whose_messages_never_queue():
    # 1F1B sends one message per direction and pass, each gone (0.1) before the next F or B
    # (1 or 2) ends, so contention changes nothing; its step at p = 8, m = 16 is the plain
    # (m+p-1)(F+B) = 69 plus 2(p-1)c + 2(p-2)c + (m/p - 1) 2(p-1)c = 26c + 14c = 40c.
    plain = Costs(F=1, B=2, comm_bytes=4e7, bandwidth=4e8)
    assert chunk_makespans()[1] == pytest.approx(simulate(one_f_one_b(8, 16), plain).makespan)
    assert chunk_makespans()[1] == pytest.approx(69 + 40 * 0.1)


def test_7_5_placement_of_zb_v_on_three_nodes_with_a_busy_one():
    # Devices 0-4 are busy; nodes 1 and 2 (devices 8-23) are wholly free. ZB-V's chain of
    # ranks cut once (two nodes) sends 4 messages per micro-batch: right whichever way.
    assert check("7.5", list(range(8, 24)))
    assert check("7.5", list(range(16, 24)) + list(range(8, 16)))  # the two nodes swapped
    assert check("7.5", [23 - r for r in range(16)])  # the chain reversed: still one cut
    assert check("7.5", list(range(9, 16)) + [8] + list(range(16, 24)))  # any order inside
    # The default placement is not free; the free devices in order use three nodes.
    default = check("7.5", list(range(16)))
    assert not default and "not free" in default.message
    in_order = check("7.5", list(range(5, 21)))
    assert not in_order and "8 messages" in in_order.message and "two nodes" in in_order.hint
    # Two free nodes, but the chain cut three times.
    cut = check(
        "7.5", list(range(8, 12)) + list(range(16, 20)) + list(range(12, 16)) + [20, 21, 22, 23]
    )
    assert not cut and "neighbours" in cut.hint
    spread = check("7.5", [8 + (r % 2) * 8 + r // 2 for r in range(16)])
    assert not spread and "60 messages" in spread.message
    assert "its own device" in check("7.5", [8] * 16).message
    assert "not free" in check("7.5", list(range(9, 25))).message
    assert "list of 16 devices" in check("7.5", 16).message
    assert "whole number" in check("7.5", [8.5] * 16).message


def test_messages_across_nodes_by_hand():
    nodes = Topology(Link(), Link(), devices_per_node=8)
    # ZB-V: a micro-batch goes down ranks 0..15 and back up; the 7|8 cut is crossed twice
    # forward and twice backward: 4 per micro-batch.
    assert messages_across_nodes(zb_v(16, 16), nodes) == 4 * 16
    # Interleaved 1F1B: 7 -> 8 in each of v passes and 15 -> 0 between them, each way.
    assert messages_across_nodes(interleaved_1f1b(16, 16, 3), nodes) == 2 * 5 * 16
    assert messages_across_nodes(gpipe(16, 2), nodes) == 2 * 2
    with pytest.raises(ValueError, match="Topology"):
        messages_across_nodes(gpipe(2, 1), "two nodes")
    with pytest.raises(ValueError, match="one device per rank"):
        messages_across_nodes(gpipe(2, 1), Topology(Link(), placement=[0, 1, 2]))


def test_7_6_pipeline_or_tensor_across_nodes():
    assert check("7.6", "tensor") and check("7.6", " Tensor ")
    pipeline = check("7.6", "pipeline")
    assert not pipeline and "bubble" in pipeline.message
    assert "wants" in check("7.6", "data").message


def test_bytes_of_a_boundary_and_of_tensor_parallelism_by_hand():
    shape = ModelShape(layers=64, hidden=4096, heads=32, vocab=50257, seq_len=4096)
    bsh = 4096 * 4096 * 2  # bytes, b = 1
    assert pipeline_bytes_per_boundary(shape, 1) == 2 * bsh
    assert allreduce_bytes_per_device(100, 4) == 150  # 2 (t-1)/t n
    assert tensor_bytes_per_layer(shape, 1, 16) == pytest.approx(8 * bsh * 15 / 16)
    assert tensor_bytes_per_layer(shape, 2, 2) == pytest.approx(4 * 2 * bsh)


def test_split_timelines_in_seconds_by_hand():
    # One micro-batch, tensor over 16: 64 layers of F = (24 s h^2 + 4 s^2 h) / 16 FLOPs at
    # 400e12 FLOP/s, plus two all-reduces of 2 (15/16) s h 2 bytes; the ring crosses on
    # rails, min(450, 8 x 450) = 450e9 B/s; B = (48 s h^2 + 8 s^2 h) / 16 FLOPs plus the
    # same two all-reduces.
    s, h = 4096, 4096
    reduce = 2 * (2 * 15 / 16 * s * h * 2) / 450e9
    f = 64 * ((24 * s * h * h + 4 * s * s * h) / 16 / 400e12 + reduce)
    b = 64 * ((48 * s * h * h + 8 * s * s * h) / 16 / 400e12 + reduce)
    got = split_timelines(SPLIT_MODEL, 1, **SPLIT)
    assert got["tensor"].makespan == pytest.approx(f + b)
    assert got["tensor"].time_unit == got["pipeline"].time_unit == "s"
    # Pipeline, p = 2, m = 1: each stage 32 layers over 8 devices, all-reduces over 8 on
    # NVLink; each way the boundary goes as 8 pieces of 1/8 at 450e9 B/s, one a card, then
    # the receiving node all-gathers 7/8 of it at 450e9 B/s.
    reduce8 = 2 * (2 * 7 / 8 * s * h * 2) / 450e9
    f2 = 32 * ((24 * s * h * h + 4 * s * s * h) / 8 / 400e12 + reduce8)
    b2 = 32 * ((48 * s * h * h + 8 * s * s * h) / 8 / 400e12 + reduce8)
    hop = s * h * 2 / 8 / 450e9 + 7 / 8 * s * h * 2 / 450e9
    assert got["pipeline"].makespan == pytest.approx(2 * (f2 + b2) + 2 * hop)


def test_split_timelines_refuses_bad_input():
    with pytest.raises(ValueError, match="even number of layers"):
        split_timelines(ModelShape(3, 64, 16, 100, 32), 1, **SPLIT)
    with pytest.raises(ValueError, match="tp = 16 must divide heads = 40"):
        split_timelines(ModelShape(40, 5120, 40, 50257, 4096), 1, **SPLIT)
    with pytest.raises(ValueError, match="rails True or False"):
        split_timelines(SPLIT_MODEL, 1, **SPLIT, rails="yes")
    with pytest.raises(ValueError, match="flops_per_second"):
        split_timelines(SPLIT_MODEL, 1, **{**SPLIT, "flops_per_second": 0})
