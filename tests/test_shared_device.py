"""Ranks that share a device, and copies that occupy the ranks (``ppbook.shared_device``).

The timelines below are worked out by hand in the comments (every start and end), not by
the simulator; a last test holds the event-driven simulation to the plain list scheduler
where both apply.
"""

import random

import pytest

from ppbook import shared_device
from ppbook.costs import Costs
from ppbook.links import Link, Topology
from ppbook.schedule import Schedule
from ppbook.schedules import SCHEDULES, build, gpipe
from ppbook.simulate import simulate
from ppbook.validate import ScheduleError


def shared(interference: float, **costs) -> Costs:
    """Two ranks on one device, joined by a link without latency."""
    topology = Topology(intra_node=Link(), ranks_per_device=2, interference=interference)
    return Costs(topology=topology, **costs)


def times(timeline):
    return [
        list(zip(s, e, strict=True)) for s, e in zip(timeline.starts, timeline.ends, strict=True)
    ]


def test_copies_occupy_the_sender_after_its_action_and_the_receiver_before_its_action():
    # GPipe, p = 2, m = 1: F = 1, B = 2, send copy s = 0.5, receive copy r = 0.25, input
    # copy 0.125, no latency, each rank its own device.
    # rank 0: input copy [0, 0.125], F0 [0.125, 1.125], its send copy until 1.625: the
    #   activation arrives at 1.625.
    # rank 1: waits, copies it in [1.625, 1.875], F0 [1.875, 2.875]; B0 [2.875, 4.875]
    #   (the loss is its own), its send copy until 5.375: the gradient arrives at 5.375.
    # rank 0: free since 1.625, waits, copies it in [5.375, 5.625], B0 [5.625, 7.625].
    costs = Costs(F=1, B=2, send_copy=0.5, recv_copy=0.25, input_copy=0.125)
    timeline = simulate(gpipe(2, 1), costs)
    assert times(timeline) == [
        [(0.125, 1.125), (5.625, 7.625)],
        [(1.875, 2.875), (2.875, 4.875)],
    ]
    assert timeline.makespan == 7.5  # from the first start, 0.125
    # the intervals are the compute: the copies are not in them
    assert [timeline.busy(r) for r in range(2)] == [3.0, 3.0]


def test_two_ranks_that_share_a_device_each_run_at_half_speed_while_both_compute():
    # GPipe, p = 2, m = 2, F = 1, B = 2, both ranks on one device, interference 1 (the
    # device time-slices them: each runs 2x slower while both compute), no copies.
    # rank 0: F0 [0, 1] alone. At 1 rank 0 starts F1 and rank 1 starts F0 (its input has
    #   arrived): both compute, each at half speed, both end at 3.
    # rank 1: F1 [3, 4] alone (rank 0 waits for a gradient), B0 [4, 6] alone.
    # At 6 rank 1 starts B1 and rank 0 B0 (its gradient arrived): 2 units of work each at
    #   half speed, both end at 10. rank 0: B1 [10, 12] alone.
    timeline = simulate(gpipe(2, 2), shared(1.0, F=1, B=2))
    assert times(timeline) == [
        [(0, 1), (1, 3), (6, 10), (10, 12)],
        [(1, 3), (3, 4), (4, 6), (6, 10)],
    ]
    # Each on its own device it is GPipe's (m + p - 1)(F + B) = 9.
    assert simulate(gpipe(2, 2), Costs(F=1, B=2)).makespan == 9


def test_an_action_that_overlaps_part_of_another_is_slowed_for_that_part_only():
    # GPipe, p = 2, m = 2: F = 2 on stage 0 and 1 on stage 1, B = 2; interference 0.5:
    # while both compute, each runs 1.5x slower. No copies, no latency.
    # rank 0: F0 [0, 2]. At 2 rank 0 starts F1 (2 units) and rank 1 F0 (1 unit), both at
    #   rate 1/1.5: rank 1's F0 ends at 2 + 1.5 = 3.5, when rank 0 has done 1 unit; rank 0
    #   does its last unit alone, F1 ends at 4.5.
    # rank 1: F1 [4.5, 5.5], B0 [5.5, 7.5], alone. At 7.5 rank 1's B1 and rank 0's B0 start
    #   (2 units each, both at 1/1.5): both end at 7.5 + 3 = 10.5. rank 0: B1 [10.5, 12.5].
    timeline = simulate(gpipe(2, 2), shared(0.5, F=[2, 1], B=2))
    expected = [
        [(0, 2), (2, 4.5), (7.5, 10.5), (10.5, 12.5)],
        [(2, 3.5), (4.5, 5.5), (5.5, 7.5), (7.5, 10.5)],
    ]
    for got, want in zip(times(timeline), expected, strict=True):
        flat = [t for interval in want for t in interval]
        assert [t for interval in got for t in interval] == pytest.approx(flat, abs=1e-12)
    assert shared_device.slowdown(2, 0.5) == 1.5 and shared_device.slowdown(1, 0.5) == 1.0


def test_ranks_on_different_devices_do_not_slow_each_other():
    # Four ranks, two per device: ranks 0 and 1 on device 0, 2 and 3 on device 1. With
    # interference 1 the GPipe forward of rank 1 shares device 0 with rank 0's next F, and
    # rank 2's with rank 1's: it is slower than on four devices, and placing the ranks
    # round robin (0 and 2 on one device) changes the makespan.
    costs = shared(1.0, F=1, B=2)
    four = simulate(gpipe(4, 4), Costs(F=1, B=2)).makespan
    paired = simulate(gpipe(4, 4), costs).makespan
    assert four == 21 and paired > four
    placement = Topology(Link(), ranks_per_device=2, interference=1.0, placement=(0, 1, 0, 1))
    assert placement.device(2) == 0 and costs.topology.device(2) == 1
    assert simulate(gpipe(4, 4), Costs(F=1, B=2, topology=placement)).makespan != paired


def test_the_event_simulation_equals_the_plain_model_without_copies_or_sharing():
    rng = random.Random(17)
    checked = 0
    for name in SCHEDULES:
        for p, m in ((2, 4), (4, 8)):
            try:
                schedule = build(name, p, m, None)
            except ValueError:
                continue  # the schedule's own rules refuse this p and m
            stages = schedule.num_stages
            link = Link(latency=0.2, bandwidth=4.0)
            for extra in (
                {"comm": 0.3},
                {"topology": Topology(link), "comm_bytes": 1.0, "contention": True},
                {"topology": Topology(link), "comm_bytes": 1.0, "overlap_send": False},
            ):
                costs = Costs(F=[rng.uniform(0.5, 2) for _ in range(stages)], B=2.5, W=0.7, **extra)
                plain = simulate(schedule, costs)
                per_stage = costs.per_stage(stages, share=schedule.chunk_share)
                starts, ends, _ = shared_device.run(schedule, costs, per_stage)
                for got, want in ((starts, plain.starts), (ends, plain.ends)):
                    for x, y in zip(got, want, strict=True):
                        assert x == pytest.approx(list(y), abs=1e-9), (name, p, m, extra)
                checked += 1
    assert checked >= 20


def test_a_schedule_that_cannot_finish_is_reported_on_a_shared_device():
    schedule = Schedule.from_strings([["0F0", "0B0"], ["1B0", "1F0"]], [0, 1], 1)
    with pytest.raises(
        ScheduleError, match="(?s)cannot finish.*rank 1 is stuck at position 0 on 1B0"
    ):
        simulate(schedule, shared(1.0, F=1, B=2))


def test_a_topology_lets_a_device_hold_ranks_per_device_ranks_and_no_more():
    topology = Topology(Link(), ranks_per_device=2, placement=(0, 0, 1, 1))
    assert [topology.device(r) for r in range(4)] == [0, 0, 1, 1]
    assert topology.shares_devices(4) and not Topology(Link()).shares_devices(4)
    with pytest.raises(ValueError, match="ranks 0, 1, 2 on device 0, more than ranks_per_device"):
        Topology(Link(), ranks_per_device=2, placement=(0, 0, 0))
    with pytest.raises(ValueError, match="give each rank its own device"):
        Topology(Link(), placement=(0, 0))
    with pytest.raises(ValueError, match="ranks_per_device"):
        Topology(Link(), ranks_per_device=0)
    with pytest.raises(ValueError, match="interference"):
        Topology(Link(), ranks_per_device=2, interference=-0.5)
