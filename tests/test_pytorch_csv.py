"""PyTorch's CSV, both ways: its two forms read, ours loaded by PyTorch, and bad files refused."""

import types

import pytest

from ppbook.pytorch_csv import read_csv, read_csv_text, write_csv
from ppbook.schedule import Action, Schedule
from ppbook.schedules import SCHEDULES, build, interleaved_1f1b, one_f_one_b
from ppbook.simulate import simulate
from ppbook.validate import ScheduleError, validate

ONE_F_ONE_B = "0F0,0F1,,0B0,,0B1\n,1F0,1B0,1F1,1B1\n"  # 1F1B, p = 2, m = 2, aligned


def _stand_in_stages(p: int, num_stages: int, stage_indices):
    """The attributes PyTorch's schedule constructors read from a stage: no process group."""
    return [
        types.SimpleNamespace(
            group_size=p,
            group_rank=0,
            num_stages=num_stages,
            stage_index=s,
            is_first=s == 0,
            is_last=s == num_stages - 1,
        )
        for s in stage_indices
    ]


def test_pytorchs_csv_with_communication_reads_as_its_compute_order(tmp_path):
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    p, m, v = 4, 8, 2
    theirs = schedules.ScheduleInterleaved1F1B(_stand_in_stages(p, p * v, [0, p]), m)
    path = tmp_path / "interleaved.csv"
    theirs._dump_csv(str(path))  # the with-communication form, PyTorch's default
    text = path.read_text()
    assert "0SEND_F0" in text and "4RECV_F0" in text and "0UNSHARD" in text
    assert "0REDUCE_GRAD" in text
    schedule = read_csv(path)
    assert schedule.actions == interleaved_1f1b(p, m, v).actions
    # Counted from PyTorch's own list, independently of the reader.
    cells = [str(a) for row in theirs.pipeline_order_with_comms.values() for a in row]
    dropped = sum(not any(k in c for k in "FBIW") or "_" in c for c in cells)
    assert dropped == len(cells) - len(schedule) > 0
    (note,) = schedule.notes
    assert f"dropped {dropped} communication and sharding actions" in note
    assert f"{sum('SEND_F' in c for c in cells)} SEND_F" in note


def test_pytorchs_compute_only_csv_reads_without_notes(tmp_path):
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    theirs = schedules.ScheduleInterleaved1F1B(_stand_in_stages(2, 4, [0, 2]), 4)
    path = tmp_path / "compute.csv"
    theirs._dump_csv(str(path), format="compute_only")
    schedule = read_csv(path)
    assert schedule.actions == interleaved_1f1b(2, 4, 2).actions
    assert schedule.notes == ()


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_pytorch_loads_our_csv_except_dualpipes_two_directions(tmp_path, name):
    """PyTorch's runtime schedule reads our CSV and, dumping it with communication, gives
    back our order; DualPipe's two directions are refused by PyTorch's own check."""
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    ours = build(name, 4, 8)
    path = tmp_path / f"{name}.csv"
    write_csv(ours, path)
    stages = _stand_in_stages(4, ours.num_stages, ours.stages_on(0))
    theirs = schedules._PipelineScheduleRuntime(stages, 8)
    if name == "dualpipe":
        with pytest.raises(AssertionError, match="microbatches for stage 0, expected 8"):
            theirs._load_csv(str(path))
        return
    theirs._load_csv(str(path))
    order = [[str(a) for a in theirs.pipeline_order[r] if a is not None] for r in range(4)]
    assert order == ours.to_strings()
    assert theirs.stage_index_to_group_rank == dict(enumerate(ours.stage_to_rank))
    theirs._dump_csv(str(path))
    back = read_csv(path)
    assert back.actions == ours.actions and back.stage_to_rank == ours.stage_to_rank


@pytest.mark.parametrize("name", ["interleaved-1f1b", "interleaved-zb", "v-half", "v-min"])
def test_pytorch_loads_issue_18s_schedules_at_m_not_a_multiple_of_p(tmp_path, name):
    """m = 6 on p = 4 ranks: PyTorch runs its interleaved classes there (one round of 6);
    its runtime reads our CSV and dumps it back with communication, our order unchanged."""
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    ours = build(name, 4, 6)
    path = tmp_path / f"{name}.csv"
    write_csv(ours, path)
    theirs = schedules._PipelineScheduleRuntime(
        _stand_in_stages(4, ours.num_stages, ours.stages_on(0)), 6
    )
    theirs._load_csv(str(path))
    order = [[str(a) for a in theirs.pipeline_order[r] if a is not None] for r in range(4)]
    assert order == ours.to_strings()
    theirs._dump_csv(str(path))
    assert read_csv(path).actions == ours.actions


def test_trailing_blank_lines_are_not_ranks():
    for tail in ("", "\n", "\n\n", ",,\n", "\n,\n \n"):
        schedule = read_csv_text(ONE_F_ONE_B + tail)
        assert schedule.num_ranks == 2
        # 1F1B's bubble fraction (p-1)/(m+p-1) = 1/3, not that of a third, idle rank.
        assert simulate(schedule).bubble_fraction == pytest.approx(1 / 3)


def test_a_blank_row_between_ranks_stays_a_rank():
    schedule = read_csv_text("0F0,0B0\n\n")
    assert schedule.num_ranks == 1
    middle = read_csv_text("0F0,,,0B0\n\n,1F0,1B0\n")  # rank 1 holds nothing: it idles
    assert middle.num_ranks == 3 and middle.actions[1] == () and middle.stage_to_rank == (0, 2)


def test_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + ONE_F_ONE_B.encode())
    assert read_csv(path).actions == one_f_one_b(2, 2).actions
    assert read_csv_text("\ufeff" + ONE_F_ONE_B).actions == one_f_one_b(2, 2).actions


def test_a_file_that_is_not_utf8_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("0F0,0B0 # é\n".encode("latin-1"))
    with pytest.raises(ValueError) as info:
        read_csv(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert "not UTF-8" in message and "0xe9" in message


def test_a_field_over_the_csv_limit_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "wide.csv"
    path.write_text('0F0,"' + "x" * 200_000 + '"\n')
    with pytest.raises(ValueError) as info:
        read_csv(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and len(message) < 400
    assert "field larger than field limit" in message


def test_a_missing_file_is_a_value_error_naming_it(tmp_path):
    with pytest.raises(ValueError, match="cannot read .*nothing.csv"):
        read_csv(tmp_path / "nothing.csv")


def test_a_backward_without_its_forward_is_reported_as_that():
    # Rank 1 runs 1B0 but never 1F0: PyTorch says "Running Full Backward for stage 1,
    # microbatch 0 without first running Forward". Before, this read as a route problem.
    schedule = read_csv_text("0F0,,0B0\n,1B0\n")
    assert schedule.routes is None
    with pytest.raises(ScheduleError) as info:
        validate(schedule)
    message = str(info.value)
    assert "stage 1, micro-batch 0: a backward without its forward (F)" in message
    assert "route" not in message


def test_a_missing_forward_in_the_communication_form_is_reported_as_that():
    text = "0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1I0,1W0,1SEND_B0\n"
    with pytest.raises(ScheduleError, match="stage 1, micro-batch 0: a backward without its"):
        validate(read_csv_text(text))


def test_written_csv_aligns_interleaved_steps_on_whole_columns():
    # Costs are scaled by the chunk share in the simulator; the columns stay unit steps.
    rows = write_csv(interleaved_1f1b(2, 2, 2)).splitlines()
    assert rows[0].split(",")[:4] == ["0F0", "0F1", "2F0", "2F1"]
    assert read_csv_text("\n".join(rows)).actions == interleaved_1f1b(2, 2, 2).actions
    assert Action(1, "F", 0) == read_csv_text("\n".join(rows)).actions[1][0]


@pytest.mark.parametrize("name", [n for n in SCHEDULES if n != "zb-auto"])
def test_the_aligned_columns_are_the_simulator_s_unit_cost_starts(name):
    from ppbook.simulate import unit_cost_steps
    from ppbook.validate import unit_steps

    chunks = 2 if SCHEDULES[name].chunks == "any" else None
    for p, m in ((2, 4), (4, 8), (4, 12)):
        schedule = build(name, p, m, chunks)
        assert unit_steps(schedule) == unit_cost_steps(schedule), (name, p, m)


def test_a_schedule_that_cannot_finish_is_refused_when_aligned():
    stuck = Schedule.from_strings([["0B0", "0F0"], ["1F0", "1B0"]])
    with pytest.raises(ValueError, match="cannot finish"):
        write_csv(stuck)


@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "folder"])
def test_reading_what_is_not_a_regular_file_is_refused_at_once(special, tmp_path):
    import os

    path = {"/dev/zero": "/dev/zero", "folder": str(tmp_path)}.get(special)
    if special == "fifo":
        path = str(tmp_path / "orders.csv")
        os.mkfifo(path)  # reading it would wait for a writer for ever
    with pytest.raises(ValueError, match="give a regular file"):
        read_csv(path)
