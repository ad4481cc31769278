"""The index's integer dependency keys say what ppbook.dependencies.needs says, for every part."""

import pytest

from ppbook.dependencies import BACKWARD, needs
from ppbook.schedules import SCHEDULES, build
from ppbook.validate import ScheduleIndex


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_index_dependencies_are_the_rule_for_every_part(name):
    schedule = build(name, 4, 8)
    index = ScheduleIndex(schedule)
    m = schedule.num_microbatches
    kinds = "FBIW"
    where = {}  # part -> key, found by scanning the schedule, not from the index
    for row in schedule.actions:
        for step in row:
            for part in step.parts:
                where[part] = (part.stage * m + part.microbatch) * 4 + kinds.index(part.kind)
    for part in where:
        expected = []
        for need in needs(schedule, *part):
            kind = need.kind
            if kind == BACKWARD:
                kind = "B" if (need.stage, "B", need.microbatch) in where else "I"
            expected.append(where[(need.stage, kind, need.microbatch)])
        assert index.dependencies(*part) == expected, part
