"""The Chrome trace holds every interval, scaled to microseconds, one track per rank."""

import json

import pytest

from ppbook.costs import Costs
from ppbook.schedule import Schedule
from ppbook.schedules import gpipe, interleaved_1f1b, one_f_one_b
from ppbook.simulate import simulate
from ppbook.timeline import Timeline
from ppbook.views.trace import to_chrome_trace

OVERLAP = Schedule.from_strings(
    [["0F0", "1F0", "(0F1;1B0)OVERLAP_F_B", "1F1", "1B1", "0B0", "0B1"]], name="overlap"
)


def complete_events(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


@pytest.mark.parametrize(
    "timeline",
    [
        simulate(one_f_one_b(4, 8)),
        simulate(interleaved_1f1b(2, 4, 3), Costs(F=0.25, B=0.75, comm=0.05)),
        simulate(OVERLAP),
    ],
    ids=["1f1b", "interleaved", "overlap"],
)
def test_complete_events_are_the_intervals_in_microseconds(timeline):
    unit = 250.0
    trace = to_chrome_trace(timeline, time_unit_us=unit)
    events = complete_events(trace)
    assert len(events) == len(timeline.schedule)
    for rank, row in enumerate(timeline.intervals):
        mine = [e for e in events if e["tid"] == rank]
        assert [e["name"] for e in mine] == [str(iv.action) for iv in row]
        assert [e["ts"] for e in mine] == pytest.approx([iv.start * unit for iv in row])
        assert [e["dur"] for e in mine] == pytest.approx([iv.duration * unit for iv in row])
        for event, iv in zip(mine, row, strict=True):
            assert event["cat"] == event["args"]["kind"] == iv.action.kind
            parts = iv.action.parts
            if len(parts) == 1:
                assert event["args"]["stage"] == iv.action.stage
                assert event["args"]["microbatch"] == iv.action.microbatch
            else:
                assert event["args"]["stage"] == [a.stage for a in parts]
                assert event["args"]["microbatch"] == [a.microbatch for a in parts]
    assert trace["otherData"]["time_unit_us"] == unit


def test_one_named_track_per_rank():
    timeline = simulate(gpipe(3, 2))
    trace = to_chrome_trace(timeline)
    names = {
        e["tid"]: e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    assert names == {r: f"rank {r}" for r in range(3)}
    assert {e["tid"] for e in complete_events(trace)} == {0, 1, 2}
    assert {e["pid"] for e in trace["traceEvents"]} == {0}


def test_default_units_and_what_other_data_records():
    simulated = simulate(gpipe(2, 2))
    trace = to_chrome_trace(simulated)
    assert trace["otherData"]["time_unit"] == "time unit"
    assert trace["otherData"]["time_unit_us"] == 1000.0  # one cost unit drawn as 1 ms
    assert trace["otherData"]["time_scale"].startswith(
        "1 time unit of the timeline = 1000 us in this trace (the timeline's times are unitless"
    )
    assert trace["otherData"]["activation_unit"] == "micro-batch activations of a full stage"
    first = complete_events(trace)[0]
    assert (first["ts"], first["dur"]) == (0.0, 1000.0)
    assert trace["otherData"]["makespan"] == simulated.makespan
    assert trace["otherData"]["bubble_fraction (idle/total)"] == simulated.bubble_fraction
    assert trace["otherData"]["bubble_ratio (idle/compute)"] == simulated.bubble_ratio

    offset = 52.5  # measured timelines are in seconds, from some clock's origin
    measured = Timeline.from_arrays(
        simulated.schedule,
        [[t + offset for t in row] for row in simulated.starts],
        [[t + offset for t in row] for row in simulated.ends],
        source="measured",
    )
    trace = to_chrome_trace(measured)
    events = complete_events(trace)
    assert events[0]["ts"] == 0.0 and events[0]["dur"] == pytest.approx(1e6)
    assert trace["otherData"]["time_unit"] == "s"
    assert trace["otherData"]["time_scale"] == "1 s of the timeline = 1e+06 us in this trace"


def test_closed_form_and_simulated_timelines_share_one_scale():
    # The closed form's times (chapter 1's gpipe_timeline) are cost units like the
    # simulator's, not seconds.
    simulated = simulate(gpipe(3, 4))
    closed = Timeline.from_arrays(
        simulated.schedule, simulated.starts, simulated.ends, source="closed form"
    )
    trace = to_chrome_trace(closed)
    assert trace["otherData"]["time_unit_us"] == 1000.0
    want = [iv.duration * 1000.0 for row in closed.intervals for iv in row]
    assert [e["dur"] for e in complete_events(trace)] == pytest.approx(want)
    assert complete_events(trace)[0]["dur"] == pytest.approx(1000.0)  # t_forward = 1 -> 1 ms


def test_counter_events_follow_the_memory_curve():
    timeline = simulate(one_f_one_b(2, 3))
    trace = to_chrome_trace(timeline, time_unit_us=1.0)
    for rank in range(2):
        counters = [e for e in trace["traceEvents"] if e.get("name") == f"activations rank {rank}"]
        unit = "micro-batch activations of a full stage"
        assert [(e["ts"], e["args"][unit]) for e in counters] == timeline.memory(rank)


def test_written_file_is_valid_json_equal_to_the_returned_dict(tmp_path):
    path = tmp_path / "trace.json"
    trace = to_chrome_trace(simulate(one_f_one_b(2, 2)), path)
    assert json.loads(path.read_text()) == trace
    assert isinstance(trace["traceEvents"], list)


def test_bad_time_unit_is_a_value_error():
    with pytest.raises(ValueError, match="time_unit_us must be > 0"):
        to_chrome_trace(simulate(gpipe(1, 1)), time_unit_us=0)
