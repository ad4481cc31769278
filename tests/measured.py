"""What every measured run must show, whichever engine ran it (shared by the runtime tests)."""

from ppbook.runtime.devices import dependency_violations, order_problems


def assert_order_and_dependencies(result) -> None:
    """Every rank ran exactly its row of the schedule, in order, one action after another,
    and on the aligned clocks no action started before what it needs from another rank had
    ended (within the clocks' error bound; :func:`dependency_violations` is tested on
    hand-made timelines in tests/test_gpu_demo.py)."""
    assert order_problems(result) == []  # every step, every rank: the schedule's order
    tolerance = max(result.clock_errors) + 1e-6
    for step, timeline in enumerate(result.timelines):
        for row in timeline.intervals:
            assert all(i.start <= i.end for i in row)
            assert all(a.end <= b.start for a, b in zip(row, row[1:], strict=False))
        assert dependency_violations(timeline, tolerance) == [], f"step {step}"
