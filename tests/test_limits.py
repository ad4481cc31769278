"""Stated size limits: refused up front, before anything big is allocated, in short messages."""

import ast
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from ppbook import limits
from ppbook.pytorch_csv import read_csv, read_csv_text
from ppbook.schedule import Action, Schedule
from ppbook.schedules import build, one_f_one_b
from ppbook.simulate import simulate
from ppbook.validate import ScheduleError, validate

PACKAGE = Path(__file__).resolve().parents[1] / "ppbook"


def _refused_small(call, match: str) -> str:
    """Run ``call``, expect a ValueError matching ``match`` after allocating under 20 MB."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=match) as info:
            call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20e6, f"allocated {peak / 1e6:.0f} MB before refusing"
    message = str(info.value)
    assert len(message) <= limits.MAX_MESSAGE
    return message


def test_the_stated_defaults():
    assert (limits.MAX_STAGES, limits.MAX_MICROBATCHES, limits.MAX_ACTIONS) == (
        4096,
        100_000,
        2_000_000,
    )
    assert limits.current() == limits.Limits(4096, 100_000, 2_000_000)


def test_a_huge_microbatch_number_in_a_46_byte_csv_is_refused_at_once():
    # Today's main grew to 12.6 GB on this file.
    text = "0F99999999999999999999,0B99999999999999999999"
    message = _refused_small(lambda: read_csv_text(text), "micro-batches is beyond the limit")
    assert "100,000" in message and "PPBOOK_MAX_MICROBATCHES" in message


def test_a_huge_stage_number_is_refused_with_a_short_message():
    # Today's main used 11.5 GB and printed a 989 MB error.
    message = _refused_small(
        lambda: read_csv_text("99999999F0,99999999B0"), "stages is beyond the limit of 4,096"
    )
    assert "\n" not in message


def test_builders_refuse_before_building():
    _refused_small(lambda: build("1f1b", 10_000, 1_000_000), "10,000 ranks is beyond")
    _refused_small(lambda: build("1f1b", 64, 1_000_000), "micro-batches is beyond")
    _refused_small(lambda: build("interleaved-1f1b", 64, 20_000, 2), "actions is beyond")
    _refused_small(lambda: build("interleaved-1f1b", 4, 8, 10**20), "stages is beyond")
    _refused_small(lambda: build("zb-h1", 1000, 1000), "3,000,000 actions is beyond")


def test_schedule_construction_checks_its_sizes():
    with pytest.raises(ValueError, match="micro-batches is beyond the limit"):
        Schedule([[Action(0, "F", 0), Action(0, "B", 0)]], (0,), 10**9)
    with pytest.raises(ValueError, match="stages is beyond the limit"):
        Schedule([[]], (0,) * 5000, 1)


def test_use_raises_and_lowers_limits_for_a_block():
    with limits.use(actions=20):
        with pytest.raises(ValueError, match="32 actions is beyond the limit of 20"):
            build("1f1b", 4, 4)
        with limits.use(actions=40) as inner:
            assert inner.actions == 40 and len(build("1f1b", 4, 4)) == 32
        assert limits.current().actions == 20
    assert limits.current().actions == limits.MAX_ACTIONS
    with limits.use(limits.Limits(stages=2)):
        with pytest.raises(ValueError, match="3 ranks is beyond the limit of 2"):
            one_f_one_b(3, 1)
    with pytest.raises(ValueError, match="limit actions must be a whole number >= 1"):
        limits.Limits(actions=0)


def test_environment_variables_set_the_defaults():
    script = "from ppbook.schedules import build; build('1f1b', 4, 4)"
    env = {**os.environ, "PPBOOK_MAX_ACTIONS": "20"}
    run = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode != 0 and "32 actions is beyond the limit of 20" in run.stderr
    env["PPBOOK_MAX_ACTIONS"] = "many"
    run = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert "PPBOOK_MAX_ACTIONS must be a whole number >= 1, got 'many'" in run.stderr


def test_a_csv_file_too_big_for_the_limit_is_refused_before_reading(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("0F0,0B0\n" * 100)  # 800 bytes
    with limits.use(actions=10):  # 640 bytes allowed
        with pytest.raises(ValueError, match=r"big.csv is longer than the limit of 640 bytes"):
            read_csv(path)
    with pytest.raises(ValueError, match="stage 0 appears on rank 0 and on rank 1"):
        read_csv(path)  # under the default limits the file is read, and its content refused


def test_messages_that_list_problems_are_capped():
    # Every action on the wrong rank: one problem per action.
    p, m = 64, 64
    rows = [[Action(s, k, j) for j in range(m) for k in "FB"] for s in range(p)]
    schedule = Schedule(rows, tuple(reversed(range(p))), m)
    with pytest.raises(ScheduleError) as info:
        validate(schedule)
    message = str(info.value)
    assert len(message) <= limits.MAX_MESSAGE
    assert f"... and {2 * p * m - 12:,} more" in message  # all 8,192 actions counted
    assert message.count("\n") <= 14
    assert len(limits.capped("x" * 10_000)) <= limits.MAX_MESSAGE


def test_a_deadlock_of_many_ranks_is_capped_and_names_the_cause_first():
    p, m = 200, 2
    rows = [
        [Action(s, "F", j) for j in range(m)] + [Action(s, "B", j) for j in range(m)]
        for s in range(p)
    ]
    rows[p - 1] = rows[p - 1][::-1]
    with pytest.raises(ScheduleError) as info:
        simulate(Schedule(rows, tuple(range(p)), m))
    message = str(info.value)
    assert len(message) <= limits.MAX_MESSAGE
    assert message.splitlines()[1].startswith("  rank 199 is stuck at position 0 on 199B1")
    assert "... and 188 more" in message


def _imports(module: Path) -> set[str]:
    tree = ast.parse(module.read_text())
    names = set()
    for node in ast.walk(tree):  # also imports inside functions
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_data_model_imports_nothing_above_it():
    """schedule.py, limits.py, dependencies.py and validate.py sit below the simulator, and
    so does PyTorch's CSV: its aligned form takes its columns from validate.unit_steps."""
    above = ("ppbook.simulate", "ppbook.timeline", "ppbook.costs", "ppbook.pytorch_csv")
    for name in ("schedule", "limits", "dependencies", "validate"):
        imported = _imports(PACKAGE / f"{name}.py")
        assert not [i for i in imported if i.startswith(above)], name
    assert not [i for i in _imports(PACKAGE / "pytorch_csv.py") if i.startswith(above[:3])]


def test_messages_about_long_routes_and_missing_stages_are_short():
    with pytest.raises(ValueError, match="must list distinct stages, got") as info:
        Schedule([[Action(0, "F", 0)]], (0,), 1, routes=[(0,) * 10_000])
    assert len(str(info.value)) < 200
    with pytest.raises(ValueError, match=r"4000 stage\(s\) have no actions \(0, 1, ") as info:
        Schedule.from_strings([["4000F0", "4000B0"]])
    assert len(str(info.value)) < 200


def test_num_microbatches_is_a_whole_number():
    import numpy as np

    with pytest.raises(ValueError, match="micro-batches is beyond the limit"):
        Schedule([[Action(0, "F", 0), Action(0, "B", 0)]], (0,), np.int64(10**12))
    with pytest.raises(ValueError, match="num_microbatches to be an integer >= 0, got 1.5"):
        Schedule([[Action(0, "F", 0), Action(0, "B", 0)]], (0,), 1.5)
    assert (
        type(Schedule([[Action(0, "F", 0), Action(0, "B", 0)]], (0,), np.int64(1)).num_microbatches)
        is int
    )
