"""What every measured run must show, whichever engine ran it (shared by the runtime tests)."""

from ppbook.validate import ScheduleIndex


def assert_order_and_dependencies(result) -> None:
    """Every rank ran exactly its row of the schedule, in order, and on the aligned clocks no
    action started before what it needs from another rank had ended (within the clocks'
    error bound)."""
    actions = result.schedule.actions
    expected = [[str(part) for step in row for part in step.parts] for row in actions]
    for executed in result.executed:  # every step, every rank: the schedule's order
        assert executed == expected
    tolerance = max(result.clock_errors) + 1e-6
    index = ScheduleIndex(result.schedule)
    for timeline in result.timelines:
        for rank, row in enumerate(timeline.intervals):
            for position, interval in enumerate(row):
                assert interval.start <= interval.end
                if position:
                    assert row[position - 1].end <= interval.start
                for part in interval.action.parts:
                    for key in index.dependencies(*part):
                        sid = index.where[key]
                        r = index.step_rank[sid]
                        if r != rank:
                            producer = timeline.intervals[r][sid - index.first[r]]
                            assert producer.end <= interval.start + tolerance, (part, producer)
