"""A launch with ``progress=True`` says it started and when each run finishes, without times
(issue 11: chapter 3's first launch cell ran up to 16 s with no sign of life)."""

from __future__ import annotations

import re

from ppbook.runtime.config import RunConfig
from ppbook.runtime.launch import launch_many
from ppbook.runtime.progress import Progress


def test_a_launch_with_progress_prints_a_line_per_finished_run(capsys):
    configs = [
        RunConfig(schedule=name, nproc=2, num_microbatches=2, hidden=8, steps=1, timeout=30.0)
        for name in ("1f1b", "gpipe")
    ]
    results = launch_many(configs, progress=True)
    assert [r.schedule.name for r in results] == ["1f1b", "gpipe"]
    assert capsys.readouterr().out.splitlines() == [
        "starting 2 processes for 2 runs",
        "run 1 of 2 finished: 1f1b",
        "run 2 of 2 finished: gpipe",
    ]


def test_progress_reports_runs_in_order_once_each_and_no_times(tmp_path, capsys):
    report = Progress(tmp_path, ["1f1b", "gpipe", "zb-h1"], nproc=2)
    report.start()
    report()  # nothing finished yet
    (tmp_path / "done-0").touch()
    (tmp_path / "done-2").touch()  # run 3's mark before run 2's: wait for run 2
    report()
    report()
    (tmp_path / "done-1").touch()
    report()
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "starting 2 processes for 3 runs",
        "run 1 of 3 finished: 1f1b",
        "run 2 of 3 finished: gpipe",
        "run 3 of 3 finished: zb-h1",
    ]
    assert not any(re.search(r"\d\s*(s|ms)\b", line) for line in lines)


def test_one_run_is_said_in_the_singular(tmp_path, capsys):
    Progress(tmp_path, ["1f1b"], nproc=4).start()
    assert capsys.readouterr().out == "starting 4 processes for 1 run\n"
