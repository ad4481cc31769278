"""The timeline's units (time, activations) and metrics computed from its arrays."""

import json

import pytest

from ppbook.costs import Costs
from ppbook.schedule import Schedule
from ppbook.schedules import build, gpipe, interleaved_1f1b, one_f_one_b, zb_v
from ppbook.simulate import simulate
from ppbook.timeline import ACTIVATION_UNIT, Timeline


def test_time_unit_by_source():
    schedule = gpipe(2, 2)
    assert simulate(schedule).time_unit == "time unit"
    starts, ends = [[0, 1, 2, 4], [1, 2, 3, 5]], [[1, 2, 4, 6], [2, 3, 5, 7]]
    measured = Timeline.from_arrays(schedule, starts, ends, source="measured")
    assert measured.time_unit == "s"
    assert Timeline.from_arrays(schedule, starts, ends, source="closed form").time_unit == (
        "time unit"
    )
    assert measured.metrics()["time_unit"] == "s"


def test_closed_form_timeline_says_its_unit():
    from ppbook.closed_form import gpipe_timeline

    assert gpipe_timeline(3, 4).metrics()["time_unit"] == "time unit"


def test_interleaved_peak_is_in_full_stage_activations():
    # In chunks, rank r of interleaved 1F1B (p = 4, v = 2, m = 8) holds 11, 9, 7, 5
    # (the numbers); a chunk is half a stage, so 5.5, 4.5, 3.5, 2.5 full stages,
    # next to 1F1B's 4, 3, 2, 1.
    interleaved = simulate(interleaved_1f1b(4, 8, 2)).metrics()
    plain = simulate(one_f_one_b(4, 8)).metrics()
    assert interleaved["peak_activations_full_stage"] == [5.5, 4.5, 3.5, 2.5]
    assert plain["peak_activations_full_stage"] == [4, 3, 2, 1]
    assert interleaved["activation_unit"] == plain["activation_unit"] == ACTIVATION_UNIT
    assert "peak_activations" not in interleaved  # no key without its unit


def test_zb_v_chunks_count_half_a_stage():
    # ZB-V holds 2p chunks of half a stage at its first rank: p full stages, as 1F1B.
    p = 4
    timeline = simulate(zb_v(p, 2 * p), Costs(F=1, B=2, W=1))
    assert timeline.peak_activations(0) == p
    assert max(amount for _, amount in timeline.memory(0)) == p


def test_memory_curve_in_full_stages_against_a_hand_count():
    timeline = simulate(interleaved_1f1b(2, 2, 2), Costs(F=1, B=2))
    # Count chunk activations held after each change by hand, from the schedule and times.
    events = []
    for k, action in enumerate(timeline.schedule.actions[0]):
        if action.kind == "F":
            events.append((timeline.starts[0][k], k, 1))
        else:
            events.append((timeline.ends[0][k], k, -1))
    held, want = 0, [(0.0, 0.0)]
    for time, _, delta in sorted(events):
        held += delta
        want.append((time, held / 2))
    assert timeline.memory(0) == want


def test_measured_times_that_overlap_a_little_still_count_right():
    # One rank, times as a clock might read them: F0 ends just after F1 starts, and B0
    # starts before F1 ends. In time order: F0 and F1 start, then B0 ends, then B1.
    schedule = Schedule.from_strings([["0F0", "0F1", "0B0", "0B1"]])
    starts, ends = [[0.0, 0.99, 1.98, 3.0]], [[1.0, 2.0, 3.0, 4.0]]
    timeline = Timeline.from_arrays(schedule, starts, ends, source="measured")
    assert timeline.memory(0) == [(0.0, 0.0), (0.0, 1.0), (0.99, 2.0), (3.0, 1.0), (4.0, 0.0)]
    assert timeline.peak_activations(0) == 2


def test_bytes_follow_the_per_stage_sizes():
    schedule = one_f_one_b(3, 5)
    timeline = simulate(schedule, Costs(F=1, B=2, activation_bytes=[10, 20, 30]))
    assert timeline.metrics()["peak_activation_bytes"] == [3 * 10, 2 * 20, 1 * 30]


def test_metrics_do_not_build_interval_records():
    timeline = simulate(build("interleaved-1f1b", 4, 8, 2))
    metrics = timeline.metrics()
    assert "intervals" not in vars(timeline)  # computed from the start and end arrays
    assert metrics["busy"] == [
        sum(e - s for s, e in zip(st, en, strict=True))
        for st, en in zip(timeline.starts, timeline.ends, strict=True)
    ]
    json.dumps(metrics, allow_nan=False)


def test_idle_gaps_from_the_arrays():
    timeline = simulate(gpipe(2, 1), Costs(F=1, B=2))  # rank 1: idle [0, 1), busy [1, 4)
    assert timeline.idle_gaps(1) == [(0.0, 1.0), (4.0, 6.0)]


@pytest.mark.parametrize("name", ["gpipe", "1f1b", "zb-h1", "zb-h2", "dualpipe"])
def test_one_chunk_per_rank_schedules_count_whole_stages(name):
    schedule = build(name, 4, 8)
    timeline = simulate(schedule)
    chunks = []
    for rank in range(4):  # chunk activations held, counted one action at a time
        held = peak = 0
        for action in schedule.actions[rank]:
            for part in action.parts:
                held += part.kind == "F"
                peak = max(peak, held)
                held -= part.kind in ("B", "W")
        chunks.append(peak)
    assert [timeline.peak_activations(r) for r in range(4)] == chunks


def test_zb_bubble_rate_is_the_most_compute_of_a_rank_over_the_longest_span():
    # The Zero Bubble paper's rate (arXiv:2401.10241, Table 5; ppbook.paper_tables): 1 minus
    # one step's compute over the longest stage span, for stages of equal cost; with uneven
    # ranks, the most compute of one rank. By hand, GPipe p = 2, m = 2:
    #   rank 0: 0F0 [0, 1], 0F1 [1, 2], 0B0 [7, 8.5], 0B1 [8.5, 10]: compute 5, span 10;
    #   rank 1: 1F0 [1, 2.5], 1F1 [2.5, 4], 1B0 [4, 5.5], 1B1 [5.5, 7]: compute 6, span 6.
    # Rate 1 - 6/10 = 0.4. Over the least-loaded rank (or the longest span's own rank) it
    # would read 1 - 5/10 = 0.5; the bubble fraction is (2 * 10 - 11) / 20 = 0.45.
    starts = [[0, 1, 7, 8.5], [1, 2.5, 4, 5.5]]
    ends = [[1, 2, 8.5, 10], [2.5, 4, 5.5, 7]]
    timeline = Timeline.from_arrays(gpipe(2, 2), starts, ends)
    assert timeline.rank_spans == [10, 6]
    assert [timeline.busy(r) for r in range(2)] == [5, 6]
    assert timeline.zb_bubble_rate == pytest.approx(0.4)
    assert timeline.bubble_fraction == pytest.approx(0.45)
    assert timeline.metrics()["zb_bubble_rate"] == pytest.approx(0.4)
