"""The schedule data model: PyTorch's notation, its CSV form and validation."""

import pytest

from ppbook.pytorch_csv import read_csv, read_csv_text, write_csv
from ppbook.schedule import Action, OverlapFB, Schedule, parse_action
from ppbook.schedules import SCHEDULES, build, gpipe, interleaved_1f1b, one_f_one_b
from ppbook.validate import ScheduleError, validate


@pytest.mark.parametrize(
    "text, expected",
    [
        ("0F3", Action(0, "F", 3)),
        ("1B2", Action(1, "B", 2)),
        ("2I0", Action(2, "I", 0)),
        ("12W10", Action(12, "W", 10)),
        (" 3F1 ", Action(3, "F", 1)),
        ("(0F4;7B1)OVERLAP_F_B", OverlapFB(Action(0, "F", 4), Action(7, "B", 1))),
        ("(2F0;5I3)OVERLAP_F_B", OverlapFB(Action(2, "F", 0), Action(5, "I", 3))),
    ],
)
def test_parse_and_format_round_trip(text, expected):
    action = parse_action(text)
    assert action == expected
    assert str(action) == text.strip()
    assert parse_action(str(action)) == action


@pytest.mark.parametrize(
    "text",
    [
        "",
        "F3",
        "0X3",
        "0F",
        "0f3",
        "-1F0",
        "(0F1)OVERLAP_F_B",
        "(0B1;1F0)OVERLAP_F_B",
        "0SEND_F1",
        "0F1;1B0",
    ],
)
def test_malformed_actions_are_rejected(text):
    with pytest.raises(ValueError, match="action|overlapped pair"):
        parse_action(text)


def test_malformed_csv_cell_names_row_column_and_text():
    with pytest.raises(ValueError, match=r"row 1 \(rank 1\), column 2: .*'1Q0'"):
        read_csv_text("0F0,0B0\n,1F0,1Q0\n")


def test_overlap_parts_are_forward_then_backward():
    pair = parse_action("(0F4;7B1)OVERLAP_F_B")
    assert pair.parts == (Action(0, "F", 4), Action(7, "B", 1))
    with pytest.raises(ValueError, match="one forward"):
        OverlapFB(Action(7, "B", 1), Action(0, "F", 4))


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize(
    "schedule",
    [gpipe(3, 4), one_f_one_b(4, 8), one_f_one_b(4, 2), interleaved_1f1b(2, 4, 3)],
    ids=lambda s: s.name,
)
def test_csv_round_trip(schedule, aligned):
    text = write_csv(schedule, aligned=aligned)
    assert len(text.splitlines()) == schedule.num_ranks
    back = read_csv_text(text)
    assert back.actions == schedule.actions
    assert back.stage_to_rank == schedule.stage_to_rank
    assert back.num_microbatches == schedule.num_microbatches


def test_aligned_csv_has_idle_cells_where_a_unit_cost_run_idles():
    # 1F1B, p = 2, m = 2, unit costs: rank 1 starts one step late and waits once.
    text = write_csv(one_f_one_b(2, 2))
    assert text.splitlines() == ["0F0,0F1,,0B0,,0B1", ",1F0,1B0,1F1,1B1"]


def test_csv_file_round_trip(tmp_path):
    path = tmp_path / "schedule.csv"
    schedule = one_f_one_b(3, 5)
    write_csv(schedule, path)
    assert read_csv(path).actions == schedule.actions
    assert read_csv(str(path)).actions == schedule.actions


def test_pytorch_style_csv_with_idle_cells_loads():
    # As torch.distributed.pipelining's _dump_csv writes GPipe for 2 ranks, 2 micro-batches.
    text = "0F0,0F1,,,0B0,0B1\n,1F0,1F1,1B0,1B1\n"
    schedule = read_csv_text(text)
    assert schedule.stage_to_rank == (0, 1)
    assert schedule.num_microbatches == 2
    assert schedule.actions[1] == tuple(map(parse_action, ["1F0", "1F1", "1B0", "1B1"]))


def test_stage_on_two_ranks_is_rejected():
    with pytest.raises(ValueError, match="stage 0 appears on rank 0 and on rank 1"):
        Schedule.from_strings([["0F0", "0B0"], ["0F1", "0B1"]])


def test_placement_must_name_existing_ranks():
    with pytest.raises(ValueError, match="stage 1 is placed on rank 2"):
        Schedule([[Action(0, "F", 0)]], (0, 2), 1)


@pytest.mark.parametrize(
    "rows, message",
    [
        ([["0F0"], ["1F0", "1B0"]], "stage 0, micro-batch 0: no backward after its F; expected"),
        ([["0F0", "0B0", "0B0"], ["1F0", "1B0"]], "0B0 appears more than once"),
        ([["0F0", "0I0"], ["1F0", "1B0"]], "has B=0, I=1, W=0"),
        ([["0F0", "0B0", "0W0"], ["1F0", "1B0"]], "has B=1, I=0, W=1"),
    ],
)
def test_validation_names_the_problem(rows, message):
    schedule = Schedule.from_strings(rows)
    with pytest.raises(ScheduleError, match=message):
        validate(schedule)


def test_validation_rejects_action_on_wrong_rank_and_out_of_range():
    actions = [[Action(0, "F", 0), Action(1, "F", 0), Action(0, "B", 0)], [Action(1, "B", 0)]]
    with pytest.raises(ScheduleError, match=r"stage 1 lives on rank 1"):
        validate(Schedule(actions, (0, 1), 1))
    actions = [[Action(0, "F", 0), Action(0, "B", 0), Action(0, "F", 5)]]
    with pytest.raises(ScheduleError, match=r"micro-batch 5 is not in 0..0"):
        validate(Schedule(actions, (0,), 1))


def test_validation_lists_many_problems_briefly():
    schedule = Schedule([[Action(0, "F", j) for j in range(40)]], (0,), 40)
    with pytest.raises(ScheduleError, match=r"\.\.\. and 28 more"):
        validate(schedule)  # 40 forwards without their backwards, one line each
    # Micro-batches that miss the same stages share one line.
    schedule = Schedule([[Action(0, "F", 0), Action(0, "B", 0)], []], (0, 1), 40)
    with pytest.raises(ScheduleError) as info:
        validate(schedule)
    lines = [line.strip() for line in str(info.value).splitlines()[1:]]
    assert lines[0].startswith("micro-batch 0 never passes stage 1 ")
    assert lines[1].startswith("micro-batches 1..39 never pass stages 0, 1 ")
    assert len(lines) == 2


@pytest.mark.parametrize("name", ["gpipe", "1f1b", "interleaved-1f1b", "looped-bfs"])
def test_built_schedules_validate_and_place_stages(name):
    p, m = 4, 8
    schedule = build(name, p, m)
    validate(schedule)
    for rank in range(schedule.num_ranks):
        assert set(schedule.stages_on(rank)) == {
            a.stage for step in schedule.actions[rank] for a in step.parts
        }


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: gpipe(0, 4), "gpipe needs num_stages >= 1, got 0"),
        (lambda: one_f_one_b(4, 0), "1f1b needs num_microbatches >= 1, got 0"),
        (lambda: one_f_one_b(2.5, 4), "1f1b needs an integer num_stages, got 2.5"),
        (lambda: one_f_one_b(True, 4), "integer num_stages, got True"),
        (
            lambda: interleaved_1f1b(4, 9),
            r"multiple of its number of rounds.*m = 9 with p = 4 \(2 rounds\); try m = 8 or m = 10",
        ),
        (lambda: interleaved_1f1b(4, 8, 0), "num_chunks >= 1, got 0"),
        (lambda: build("zero", 4, 8), "unknown schedule 'zero'; choose one of gpipe, 1f1b"),
        (lambda: build("1f1b", 4, 8, 2), "1f1b runs exactly 1 chunk"),
    ],
)
def test_schedule_rules_are_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_registry_names_match_the_issue():
    assert list(SCHEDULES) == [
        "gpipe",
        "1f1b",
        "interleaved-1f1b",
        "interleaved-zb",
        "looped-bfs",
        "zb-h1",
        "zb-h2",
        "zb-auto",
        "zb-v",
        "v-half",
        "v-min",
        "dualpipe",
        "dualpipev",
    ]


def test_routes_give_neighbours_and_model_parts():
    # Two micro-batches, one down stages 0 -> 1 and one up stages 2 -> 3 (DualPipe-like).
    rows = [["0F0", "3F1", "3B1", "0B0"], ["2F1", "1F0", "1B0", "2B1"]]
    schedule = Schedule.from_strings(rows, routes=[(0, 1), (2, 3)], stage_to_rank=(0, 1, 1, 0))
    validate(schedule)
    assert schedule.neighbours(1, 0) == (0, None)
    assert schedule.neighbours(3, 1) == (2, None)
    assert [schedule.model_part(s) for s in range(4)] == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="stage 1 is at position 1 of one route and 0"):
        Schedule.from_strings(rows, routes=[(0, 1), (1, 3)], stage_to_rank=(0, 1, 1, 0))


def test_one_row_csv_text_is_text_not_a_path():
    schedule = read_csv_text("0F0,0F1,0B0,0B1")
    assert schedule.num_ranks == 1 and schedule.num_microbatches == 2


def test_interleaved_is_pytorchs_order():
    """Megatron-LM's order as torch.distributed.pipelining builds it, without a process group
    (its per-rank calculation needs only p, v, m and the micro-batches per round)."""
    from types import SimpleNamespace

    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    calculate = schedules.ScheduleInterleaved1F1B._calculate_single_rank_operations
    for p in range(1, 6):
        for v in (2, 3):
            for m in (p, 2 * p, 3 * p):
                fake = SimpleNamespace(
                    pp_group_size=p, n_local_stages=v, _n_microbatches=m, microbatches_per_round=p
                )
                rows = [[str(a) for a in calculate(fake, r) if a is not None] for r in range(p)]
                assert interleaved_1f1b(p, m, v).to_strings() == rows, (p, v, m)


@pytest.mark.parametrize("text", ["(0F0;0B0)OVERLAP_F_B", "(3F2;3I2)OVERLAP_F_B"])
def test_a_forward_paired_with_its_own_backward_is_refused(text):
    with pytest.raises(ValueError, match="cannot hold a forward and its own backward"):
        parse_action(text)
    with pytest.raises(ValueError, match=r"row 0 \(rank 0\), column 0: .*its own backward"):
        Schedule.from_strings([[text]])


@pytest.mark.parametrize(
    "name, chunks, share",
    [
        ("gpipe", None, 1),
        ("1f1b", None, 1),
        ("zb-h1", None, 1),
        ("zb-h2", None, 1),
        ("interleaved-1f1b", 2, 1 / 2),
        ("interleaved-1f1b", 3, 1 / 3),
        ("looped-bfs", 4, 1 / 4),
        ("zb-v", None, 1 / 2),
        ("dualpipe", None, 1),
        ("dualpipev", None, 1 / 2),
    ],
)
def test_chunk_share_is_a_chunks_part_of_a_device_share(name, chunks, share):
    assert build(name, 4, 8, chunks).chunk_share == pytest.approx(share)
