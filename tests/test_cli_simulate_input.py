"""``ppbook simulate`` refuses bad input up front, in short messages, and says its units."""

import json

import pytest

from ppbook.cli import main
from ppbook.costs import Costs
from ppbook.pytorch_csv import write_csv
from ppbook.schedule import Schedule
from ppbook.schedules import one_f_one_b
from ppbook.simulate import simulate
from ppbook.views.text import text_timeline


def run(capsys, *argv):
    status = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return status, out, err


# ----- bad input refused up front, in a message of bounded length -----------------------

GPIPE = ["--schedule", "gpipe", "--stages", "2", "--microbatches", "2"]


def test_png_path_is_written_exactly_or_refused(tmp_path, capsys):
    bare = tmp_path / "picture"
    status, out, err = run(capsys, *GPIPE, "--png", str(bare))
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "must end in .png or .svg" in err
    assert list(tmp_path.iterdir()) == []  # neither picture nor picture.png
    svg = tmp_path / "picture.svg"
    status, out, _ = run(capsys, *GPIPE, "--png", str(svg))
    assert status == 0 and f"wrote {svg}" in out
    assert list(tmp_path.iterdir()) == [svg] and b"<svg" in svg.read_bytes()[:500]


@pytest.mark.parametrize("flag", ["--png", "--trace", "--csv"])
def test_missing_output_folder_is_refused_before_anything_is_built(tmp_path, capsys, flag):
    target = tmp_path / "missing" / "t.png"
    # An unknown schedule would be the error if the schedule were built first.
    argv = ["--schedule", "nope", "--stages", "2", "--microbatches", "2", flag, str(target)]
    status, _, err = run(capsys, *argv)
    assert status == 2 and err.count("\n") == 1
    assert f"folder {tmp_path / 'missing'} does not exist" in err


def test_output_path_that_is_a_folder_is_refused_up_front(tmp_path, capsys):
    argv = ["--schedule", "nope", "--stages", "2", "--microbatches", "2", "--csv", str(tmp_path)]
    status, _, err = run(capsys, *argv)
    assert status == 2 and "it is a folder" in err and err.count("\n") == 1


def test_duplicate_cost_keys_are_refused(capsys):
    status, out, err = run(capsys, *GPIPE, "--costs", "F=1,F=5")
    assert status == 2 and out == "" and "cost F is given twice" in err


@pytest.mark.parametrize("json_flag", [["--json"], []])
def test_overflowing_costs_are_refused_not_printed_as_nan(capsys, json_flag):
    status, out, err = run(capsys, *GPIPE, "--costs", "F=1e308", *json_flag)
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "is not a finite number" in err and "NaN" not in err


def test_sizes_beyond_the_limits_are_refused_and_the_limits_can_be_raised(tmp_path, capsys):
    status, _, err = run(
        capsys, "--schedule", "1f1b", "--stages", "10000", "--microbatches", "1000000"
    )
    assert status == 2 and "--max-stages" in err and err.count("\n") == 1
    argv = ["--schedule", "1f1b", "--stages", "4", "--microbatches", "8"]
    status, _, err = run(capsys, *argv, "--max-stages", "3")
    assert status == 2 and "4 ranks p is beyond the limit --max-stages 3" in err
    status, _, err = run(capsys, *argv, "--max-microbatches", "7")
    assert status == 2 and "--max-microbatches 8" in err
    status, _, err = run(capsys, *argv, "--max-actions", "63")  # F and B: 2 * 4 * 8 = 64
    assert status == 2 and "--max-actions 64" in err
    assert run(capsys, *argv, "--max-stages", "4", "--max-actions", "64", "--json")[0] == 0
    status, _, err = run(
        capsys,
        "--schedule",
        "interleaved-1f1b",
        "--stages",
        "4",
        "--microbatches",
        "8",
        "--chunks",
        "3",
        "--max-stages",
        "11",
    )
    assert status == 2 and "12 stage chunks p * v is beyond the limit --max-stages 11" in err
    path = tmp_path / "s.csv"
    write_csv(one_f_one_b(2, 2), path)  # 8 actions
    status, _, err = run(capsys, "--from-csv", str(path), "--max-actions", "7")
    assert status == 2 and "8 actions is beyond the limit of 7" in err  # read, then refused


def test_limits_are_documented_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for flag in ("--max-stages", "--max-microbatches", "--max-actions"):
        assert flag in out
    assert "one device's share of the model" in out  # the cost of a chunk


def test_long_error_messages_are_cut(tmp_path, capsys):
    # 40 ranks, each stuck on its backward before its forward: a 41-line deadlock report.
    rows = [[f"{r}B0", f"{r}F0"] for r in range(40)]
    path = tmp_path / "stuck.csv"
    write_csv(Schedule.from_strings(rows), path, aligned=False)
    status, _, err = run(capsys, "--from-csv", str(path))
    assert status == 2 and "deadlock" in err
    assert err.count("\n") <= 12 and "more" in err  # says that lines were left out
    status, _, err = run(capsys, *GPIPE, "--costs", "F=" + "9" * 5000)
    assert status == 2 and len(err) < 2100


# ----- units and widths -----------------------------------------------------------------


def test_text_and_json_say_their_units(capsys):
    argv = ["--schedule", "interleaved-1f1b", "--stages", "4", "--microbatches", "8"]
    status, out, _ = run(capsys, *argv)
    assert status == 0
    assert "times in time units" in out and "makespan" in out
    assert "micro-batch activations of a full stage" in out
    status, out, _ = run(capsys, *argv, "--json")
    metrics = json.loads(out)
    assert metrics["time_unit"] == "time unit"
    assert metrics["peak_activations_full_stage"] == [5.5, 4.5, 3.5, 2.5]  # 11, 9, 7, 5 chunks


def test_activation_bytes_are_for_a_device_share(capsys):
    # A chunk of interleaved 1F1B (v = 2) holds half of a device's 1000 bytes.
    argv = ["--schedule", "interleaved-1f1b", "--stages", "4", "--microbatches", "8"]
    status, out, _ = run(capsys, *argv, "--activation-bytes", "1000", "--json")
    assert status == 0
    assert json.loads(out)["peak_activation_bytes"] == [5500, 4500, 3500, 2500]


def _columns_of(timeline, width):
    """Per rank and action, the columns whose middle lies in the action's time."""
    step = timeline.makespan / width
    return [
        [
            [c for c in range(width) if s <= (c + 0.5) * step < e]
            for s, e in zip(st, en, strict=True)
        ]
        for st, en in zip(timeline.starts, timeline.ends, strict=True)
    ]


def test_a_width_that_would_drop_short_actions_is_refused_with_one_that_shows_all():
    timeline = simulate(one_f_one_b(2, 4), Costs(F=0.1, B=2))  # makespan 10.5
    assert any(cols == [] for row in _columns_of(timeline, 20) for cols in row)
    with pytest.raises(ValueError, match="105 columns show every action"):
        text_timeline(timeline, width=20)
    assert all(cols for row in _columns_of(timeline, 105) for cols in row)
    lines = text_timeline(timeline, width=105, legend=False).splitlines()
    for rank, line in enumerate(lines):
        cells = line.split("|")[1]
        actions = timeline.schedule.actions[rank]
        for action, cols in zip(actions, _columns_of(timeline, 105)[rank], strict=True):
            char = action.kind if action.microbatch % 2 == 0 else action.kind.lower()
            assert {cells[c] for c in cols} == {char}


def test_without_width_every_action_is_shown_or_the_timeline_left_out(capsys):
    argv = ["--schedule", "1f1b", "--stages", "2", "--microbatches", "4", "--costs", "F=0.1,B=2"]
    status, out, _ = run(capsys, *argv)
    assert status == 0 and out.splitlines()[0].count("|") == 2
    assert len(out.splitlines()[0].split("|")[1]) == 105
    status, out, _ = run(capsys, *argv, "--width", "20")
    assert status == 2
    status, out, _ = run(capsys, "--schedule", "1f1b", "--stages", "8", "--microbatches", "256")
    assert status == 0 and "text timeline left out" in out and "--width 789" in out


def test_short_error_keeps_short_messages_and_cuts_long_ones():
    from ppbook.cli import short_error

    assert short_error("one line") == "one line"
    many = "\n".join(f"line {k}" for k in range(40))
    cut = short_error(many).splitlines()
    assert cut[:11] == [f"line {k}" for k in range(11)]
    assert cut[11:] == ["... (29 more lines left out)"]
    wide = short_error("x" * 100_000)
    assert len(wide) <= 2000 and wide.endswith("more characters left out)")


# ----- a text timeline is bounded before it is drawn ----------------------------------------


def test_needed_width_stops_counting_beyond_what_is_drawn():
    from ppbook.views.text import MAX_COLUMNS, most_columns, needed_width

    timeline = simulate(one_f_one_b(4, 8), Costs(F=1e-9, B=1))  # makespan about 11
    assert needed_width(timeline) > 10**10 > MAX_COLUMNS  # makespan / shortest, not drawn
    with pytest.raises(ValueError, match="more than the 100,000 drawn at most"):
        text_timeline(timeline)
    with pytest.raises(ValueError, match="11000000012 columns show every action, more than"):
        text_timeline(timeline, width=50)
    assert most_columns(4) == MAX_COLUMNS and most_columns(4000) == 2500
    denormal = simulate(one_f_one_b(2, 2), Costs(F=5e-324, B=1e300))
    assert needed_width(denormal) == 2**63  # makespan / 5e-324 is infinite: the cap


def test_check_width_refuses_widths_beyond_the_columns_and_the_characters():
    from ppbook.views.text import check_width

    assert check_width(100_000) == 100_000 and check_width(2500, 4000) == 2500
    with pytest.raises(ValueError, match="--width 100,001 is too wide.*give --width 100,000"):
        check_width(100_001, 1, "--width")
    with pytest.raises(ValueError, match="give width 2,500 or fewer columns for 4,000 ranks"):
        check_width(2501, 4000)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="whole number of columns >= 1"):
            check_width(bad)
