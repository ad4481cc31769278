"""A schedule is valid only if every micro-batch passes every stage of the model, unless the
schedule declares its routes (DualPipe's two directions).

Independent answers: the schedules below are written out by hand, each missing what its
name says; the builders are checked by counting, per micro-batch, the model parts it runs
a forward and a backward on, read off the actions without ppbook.validate.
"""

import pytest

from ppbook.pytorch_csv import read_csv_text, write_csv
from ppbook.schedule import TWO_WAY, Schedule, numbers, two_way_routes
from ppbook.schedules import SCHEDULES, build, dualpipe, one_f_one_b, zb_h1
from ppbook.simulate import simulate
from ppbook.validate import ScheduleError, validate


def one_f_one_b_rows(p: int, m: int) -> list[list[str]]:
    return one_f_one_b(p, m).to_strings()


def refusal(schedule: Schedule) -> str:
    with pytest.raises(ScheduleError) as info:
        validate(schedule)
    return str(info.value)


def test_an_empty_last_rank_is_refused():
    # Three ranks, the last one's row empty: the actions place stages 0 and 1 only.
    rows = [*one_f_one_b_rows(2, 4), []]
    message = refusal(Schedule.from_strings(rows))
    assert "rank 2 holds no stage and runs nothing" in message
    # Placed on rank 2 by hand, its stage is one that no micro-batch passes.
    message = refusal(Schedule.from_strings(rows, stage_to_rank=(0, 1, 2)))
    assert "micro-batches 0..3 never pass stage 2 (no F, B, I or W there)" in message
    assert "every stage of the model, 0..2" in message


def test_a_micro_batch_that_skips_a_stage_is_refused_in_one_line_naming_both():
    rows = one_f_one_b_rows(4, 6)
    rows[2] = [cell for cell in rows[2] if cell not in ("2F3", "2B3")]
    message = refusal(Schedule.from_strings(rows))
    (line,) = message.splitlines()[1:]
    assert line.strip().startswith("micro-batch 3 never passes stage 2 (no F, B, I or W there)")
    assert "unless the schedule declares other routes (Schedule(routes=...))" in line


def test_micro_batches_that_skip_several_stages_are_one_line():
    # Each micro-batch runs on its own rank alone: 0 never reaches stage 1, 1 never stage 0.
    lonely = Schedule.from_strings([["0F0", "0B0"], ["1F1", "1B1"]])
    lines = [line.strip() for line in refusal(lonely).splitlines()[1:]]
    assert lines[0].startswith("micro-batch 0 never passes stage 1 ")
    assert lines[1].startswith("micro-batch 1 never passes stage 0 ")
    rows = one_f_one_b_rows(4, 4)
    rows[2] = [cell for cell in rows[2] if cell[-1] != "3"]
    rows[3] = [cell for cell in rows[3] if cell[-1] != "3"]
    (line,) = refusal(Schedule.from_strings(rows)).splitlines()[1:]
    assert line.strip().startswith("micro-batch 3 never passes stages 2, 3 ")


@pytest.mark.parametrize("dropped", [("2B3",), ("2I3", "2W3")])
def test_a_micro_batch_missing_only_its_backward_on_one_stage_is_refused(dropped):
    base = one_f_one_b(4, 6) if dropped == ("2B3",) else zb_h1(4, 6)
    rows = [[cell for cell in row if cell not in dropped] for row in base.to_strings()]
    (line,) = refusal(Schedule.from_strings(rows)).splitlines()[1:]
    assert line.strip() == (
        "stage 2, micro-batch 3: no backward after its F; expected one B, or one I and one W"
    )


def test_a_half_of_the_micro_batches_on_each_half_of_the_stages_needs_declared_routes():
    # DualPipe's actions read back from CSV, without the routes CSV cannot carry: as one
    # pipeline of 8 stages, every micro-batch skips half of them.
    schedule = dualpipe(4, 8)
    text = write_csv(schedule)
    message = refusal(read_csv_text(text))
    assert "micro-batches 0..3 never pass stages 4..7" in message
    assert "micro-batches 4..7 never pass stages 0..3" in message
    for routes in (TWO_WAY, schedule.routes):
        back = read_csv_text(text, routes=routes)
        assert back.routes == schedule.routes
        validate(back)
        assert simulate(back).makespan == simulate(schedule).makespan


def test_declared_routes_are_accepted_and_still_checked():
    rows = [["0F0", "3F1", "3B1", "0B0"], ["2F1", "1F0", "1B0", "2B1"]]
    schedule = Schedule.from_strings(rows, routes=[(0, 1), (2, 3)], stage_to_rank=(0, 1, 1, 0))
    validate(schedule)
    # Micro-batch 1 drops its backward on stage 2, the first of its route.
    broken = Schedule.from_strings(
        [rows[0], ["2F1", "1F0", "1B0"]], routes=[(0, 1), (2, 3)], stage_to_rank=(0, 1, 1, 0)
    )
    assert "stage 2, micro-batch 1: no backward after its F" in refusal(broken)
    skipped = Schedule.from_strings(
        [["0F0", "3F1", "3B1", "0B0"], ["1F0", "1B0"]],
        routes=[(0, 1), (2, 3)],
        stage_to_rank=(0, 1, 1, 0),
    )
    assert "micro-batch 1 never passes stage 2 of its route (2, 3)" in refusal(skipped)


@pytest.mark.parametrize(
    ("routes", "message"),
    [
        ([(0, 1), (2,)], "route of micro-batch 1 passes 1 stage(s) and that of micro-batch 0"),
        ([(0, 1), (0, 1)], "stage(s) 2, 3 are on no micro-batch's route"),
    ],
)
def test_declared_routes_pass_every_model_part_and_every_stage(routes, message):
    rows = [["0F0", "0B0", "0F1", "0B1"], ["1F0", "1B0", "1F1", "1B1"]]
    with pytest.raises(ValueError) as info:
        Schedule.from_strings(rows, stage_to_rank=(0, 1, 1, 0), routes=routes)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_two_way_routes_are_dualpipes():
    assert two_way_routes(4, 4) == ((0, 1),) * 2 + ((2, 3),) * 2
    for p, m in ((2, 4), (4, 8), (6, 14)):
        assert two_way_routes(2 * p, m) == dualpipe(p, m).routes
    with pytest.raises(ValueError, match="even number of stages and of micro-batches"):
        two_way_routes(3, 4)
    with pytest.raises(ValueError, match="routes must be a sequence of routes or 'two-way'"):
        Schedule.from_strings([["0F0", "0B0"]], routes="both ways")


def test_numbers_are_listed_as_runs():
    assert numbers([5, 0, 1, 2, 3]) == "0..3, 5"
    assert numbers([2, 3, 7]) == "2, 3, 7"
    assert numbers(range(0, 60, 2), most=3) == "0, 2, 4, ..."


def part_counts(schedule: Schedule, microbatch: int) -> dict[int, str]:
    """Per model part, the kinds ``microbatch`` runs there, read off the actions."""
    parts: dict[int, str] = {}
    for row in schedule.actions:
        for step in row:
            for part in step.parts:
                if part.microbatch == microbatch:
                    key = schedule.model_part(part.stage)
                    parts[key] = "".join(sorted(parts.get(key, "") + part.kind))
    return parts


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_every_builder_validates_and_every_micro_batch_passes_every_part(name):
    built = 0
    for p in range(1, 6):
        for m in range(1, 11):
            try:
                schedule = build(name, p, m)
            except ValueError:  # a p or m this schedule does not take (counted below)
                continue
            built += 1
            validate(schedule)
            parts = len(schedule.route(0))
            assert parts * schedule.chunk_share == pytest.approx(len(set(schedule.stage_to_rank)))
            for j in range(m):
                kinds = part_counts(schedule, j)
                assert sorted(kinds) == list(range(parts)), (name, p, m, j)
                assert set(kinds.values()) <= {"BF", "FIW"}, (name, p, m, j)
    # Each builder takes at least a fifth of the grid (DualPipe, the strictest: p even,
    # m even and >= 2p, takes (2, 4..10) and (4, 8..10): 6 of 50).
    assert built >= (6 if name == "dualpipe" else 10), built
