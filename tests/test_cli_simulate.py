"""``ppbook simulate`` and the text timeline it prints."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ppbook.cli import main
from ppbook.costs import Costs
from ppbook.pytorch_csv import write_csv
from ppbook.schedule import Schedule
from ppbook.schedules import SCHEDULES, build, gpipe, one_f_one_b
from ppbook.simulate import simulate
from ppbook.views.text import text_timeline

PPBOOK = Path(sys.executable).with_name("ppbook")  # the installed console script


def run(capsys, *argv):
    status = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return status, out, err


# ----- the text view --------------------------------------------------------------------


def test_text_view_has_one_line_per_rank_and_marks_idle_where_the_timeline_has_gaps():
    timeline = simulate(gpipe(3, 2), Costs(F=1, B=1))  # makespan (m+p-1)(F+B) = 8
    width = 16  # two columns per time unit: column c covers [c/2, (c+1)/2)
    lines = text_timeline(timeline, width=width, legend=False).splitlines()
    assert len(lines) == 3
    for rank, line in enumerate(lines):
        assert line.startswith(f"rank {rank} |") and line.endswith("|")
        cells = line.split("|")[1]
        assert len(cells) == width
        for c, cell in enumerate(cells):
            middle = (c + 0.5) / 2
            idle = any(a <= middle < b for a, b in timeline.idle_gaps(rank))
            assert (cell == ".") == idle, (rank, c)
            if not idle:
                (iv,) = [iv for iv in timeline.intervals[rank] if iv.start <= middle < iv.end]
                want = iv.action.kind if iv.action.microbatch % 2 == 0 else iv.action.kind.lower()
                assert cell == want


def test_text_view_legend_names_the_kinds_present_and_the_scale():
    text = text_timeline(simulate(one_f_one_b(2, 2)), width=10)
    assert "F forward" in text and "B backward" in text and ". idle" in text
    assert "W weight grad" not in text
    assert "one column = 0.9 time units" in text  # makespan (m+p-1)(F+B) = 9


# ----- the command ----------------------------------------------------------------------


def test_prints_text_timeline_and_both_bubble_conventions(capsys):
    status, out, err = run(capsys, "--schedule", "1f1b", "--stages", "4", "--microbatches", "8")
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert [line.split("|")[0].strip() for line in lines[:4]] == [f"rank {r}" for r in range(4)]
    assert "bubble fraction f = idle/total   0.2727" in out  # (p-1)/(m+p-1) = 3/11
    assert "bubble ratio r = idle/compute    0.3750" in out  # (p-1)/m = 3/8


@pytest.mark.parametrize(
    ("argv", "name", "p", "m", "v", "costs"),
    [
        (["--costs", "F=1,B=2"], "1f1b", 4, 8, None, Costs(F=1, B=2)),
        (["--chunks", "2", "--comm", "0.1"], "interleaved-1f1b", 4, 8, 2, Costs(comm=0.1)),
        (["--chunks", "3", "--costs", "F=0.5,I=0.5,W=0.25"], "looped-bfs", 2, 3, 3, None),
    ],
)
def test_json_is_the_simulators_metrics(capsys, argv, name, p, m, v, costs):
    argv = ["--schedule", name, "--stages", str(p), "--microbatches", str(m), *argv, "--json"]
    status, out, _ = run(capsys, *argv)
    assert status == 0
    costs = costs or Costs(F=0.5, I=0.5, W=0.25)
    assert json.loads(out) == simulate(build(name, p, m, v), costs).metrics()


def test_activation_bytes_adds_peak_bytes(capsys):
    argv = ["--schedule", "gpipe", "--stages", "2", "--microbatches", "3"]
    status, out, _ = run(capsys, *argv, "--activation-bytes", "1000", "--json")
    assert status == 0
    assert json.loads(out)["peak_activation_bytes"] == [3000.0, 3000.0]


def test_csv_round_trip(tmp_path, capsys):
    path = tmp_path / "schedule.csv"
    argv = ["--schedule", "interleaved-1f1b", "--stages", "2", "--microbatches", "4"]
    status, original, err = run(capsys, *argv, "--csv", str(path), "--json")
    assert status == 0 and f"wrote {path}" in err
    assert path.read_text() == write_csv(build("interleaved-1f1b", 2, 4))
    status, again, _ = run(capsys, "--from-csv", str(path), "--json")
    assert status == 0
    original, again = json.loads(original), json.loads(again)
    assert again.pop("schedule") == "schedule" and original.pop("schedule") == "interleaved-1f1b"
    assert again == original


def test_png_and_trace_files(tmp_path, capsys):
    png, trace = tmp_path / "t.png", tmp_path / "t.json"
    argv = ["--schedule", "gpipe", "--stages", "2", "--microbatches", "2"]
    status, out, _ = run(capsys, *argv, "--png", str(png), "--trace", str(trace))
    assert status == 0 and f"wrote {png}" in out and f"wrote {trace}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == 8


def test_help_lists_every_schedule_and_its_rule(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["simulate", "--help"])
    assert exit_info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # undo the wrapping
    for spec in SCHEDULES.values():
        assert spec.name in out and spec.rule in out and spec.paper in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--schedule", "nope", "--stages", "4", "--microbatches", "8"], "unknown schedule 'nope'"),
        (
            ["--schedule", "interleaved-1f1b", "--stages", "4", "--microbatches", "9"],
            "multiple of its number of rounds",
        ),
        (["--schedule", "1f1b", "--stages", "4", "--microbatches", "8", "--costs", "F=x"], "F"),
        (["--schedule", "1f1b", "--stages", "4", "--microbatches", "8", "--costs", "Q=1"], "Q=1"),
        (["--schedule", "1f1b", "--stages", "2", "--microbatches", "0"], "num_microbatches >= 1"),
        (["--schedule", "1f1b", "--stages", "2", "--microbatches", "2", "--comm", "-1"], "comm"),
        (["--schedule", "1f1b", "--stages", "4"], "needs --microbatches"),
        ([], "give --schedule"),
        (["--from-csv", "/no/such/file.csv"], "cannot read /no/such/file.csv"),
        (["--from-csv", "BAD", "--stages", "2"], "drop --stages"),
    ],
)
def test_bad_input_is_one_line_and_status_2(capsys, argv, message):
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("ppbook simulate: error: ")
    assert message in err


def test_malformed_and_deadlocking_csv(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("0F0,0X1\n")
    status, _, err = run(capsys, "--from-csv", str(bad))
    assert status == 2 and "column 1" in err and "'0X1'" in err
    assert err.count("\n") == 1
    stuck = tmp_path / "stuck.csv"
    write_csv(Schedule.from_strings([["0F0", "0B0"], ["1B0", "1F0"]]), stuck, aligned=False)
    status, _, err = run(capsys, "--from-csv", str(stuck))
    assert status == 2 and "deadlock" in err and "Traceback" not in err


def test_unwritable_output_is_a_clear_error(tmp_path, capsys):
    argv = ["--schedule", "gpipe", "--stages", "2", "--microbatches", "2"]
    status, _, err = run(capsys, *argv, "--csv", str(tmp_path / "no" / "dir" / "x.csv"))
    assert status == 2 and "cannot write" in err and err.count("\n") == 1


def test_console_script(tmp_path):
    argv = ["simulate", "--schedule", "gpipe", "--stages", "2", "--microbatches", "3", "--json"]
    done = subprocess.run([PPBOOK, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == simulate(gpipe(2, 3)).metrics()
    bad = subprocess.run(
        [PPBOOK, "simulate", "--from-csv", str(tmp_path / "missing.csv")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("ppbook simulate: error: cannot read")
    assert "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1


def test_dualpipe_round_trips_through_csv_files(tmp_path, capsys):
    from ppbook.cli import main

    path = tmp_path / "dualpipe.csv"
    assert (
        main(
            [
                "simulate",
                "--schedule",
                "dualpipe",
                "--stages",
                "4",
                "--microbatches",
                "8",
                "--csv",
                str(path),
                "--json",
            ]
        )
        == 0
    )
    built = json.loads(capsys.readouterr().out)
    assert main(["simulate", "--from-csv", str(path), "--json"]) == 2
    assert "never pass" in capsys.readouterr().err  # CSV carries no routes
    assert main(["simulate", "--from-csv", str(path), "--routes", "two-way", "--json"]) == 0
    loaded = json.loads(capsys.readouterr().out)
    assert loaded["makespan"] == built["makespan"] and loaded["idle"] == built["idle"]


def test_two_ranks_on_one_device_slow_each_other_and_copies_occupy_them(capsys):
    # GPipe p = 2, m = 2, F = 1, B = 2 on one device time-sliced (interference 1): worked
    # out by hand in tests/test_shared_device.py, makespan 12 (9 on two devices).
    base = ["--schedule", "gpipe", "--stages", "2", "--microbatches", "2", "--json"]
    status, out, _ = run(capsys, *base, "--ranks-per-device", "2", "--interference", "1")
    assert status == 0 and json.loads(out)["makespan"] == 12
    status, out, _ = run(capsys, *base[:-1], "--microbatches", "1", "--json", "--send-copy", "0.5")
    # p = 2, m = 1: F0 [0, 1], sender busy to 1.5, F0 [1.5, 2.5], B0 [2.5, 4.5], busy to
    # 5, B0 [5, 7]: 7 (the plain model's (m + p - 1)(F + B) = 6, plus two copies).
    assert status == 0 and json.loads(out)["makespan"] == 7


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--interference", "0.5"], "--interference needs --ranks-per-device 2 or more"),
        (["--ranks-per-device", "0"], "--ranks-per-device must be >= 1"),
        (["--send-copy", "-1"], "--send-copy"),
        (["--ranks-per-device", "2", "--interference", "-1"], "--interference"),
    ],
)
def test_bad_shared_device_options_are_refused_in_one_line(capsys, flags, message):
    status, _, err = run(
        capsys, "--schedule", "1f1b", "--stages", "2", "--microbatches", "2", *flags
    )
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1
