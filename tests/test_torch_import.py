"""PyTorch's schedule classes imported as ppbook schedules, without processes.

The independent answers: ppbook's own builders (each checked against PyTorch's per-rank
calculation in test_schedule.py, test_schedules_zero_bubble.py and
test_schedules_dualpipe.py), and, for the invalid 1F1B export, PyTorch's raw
``pipeline_order`` read directly.
"""

from __future__ import annotations

import types

import pytest

schedules = pytest.importorskip("torch.distributed.pipelining.schedules")

from ppbook.runtime.torch_import import KNOWN_INVALID, SINCE, from_pytorch  # noqa: E402
from ppbook.schedules import build  # noqa: E402
from ppbook.simulate import simulate  # noqa: E402

# PyTorch's class -> (ppbook's schedule, v given to both; None: the class's own)
SAME_AS = {
    "ScheduleGPipe": ("gpipe", None),
    "ScheduleInterleaved1F1B": ("interleaved-1f1b", 2),
    "ScheduleLoopedBFS": ("looped-bfs", 3),
    "ScheduleInterleavedZeroBubble": ("zb-h1", 1),  # one stage per rank: ZB-H1
    "ScheduleZBVZeroBubble": ("zb-v", None),
    "ScheduleDualPipeV": ("dualpipev", None),
}


@pytest.mark.parametrize("name", list(SAME_AS))
def test_each_valid_class_imports_as_ppbooks_own_schedule(name):
    ours, v = SAME_AS[name]
    for p in (1, 2, 3, 4):
        for m in (2 * p, 3 * p):
            theirs = from_pytorch(name, p, m, v)
            expected = build(ours, p, m, v if ours in ("interleaved-1f1b", "looped-bfs") else None)
            assert theirs.actions == expected.actions, (name, p, m)
            assert theirs.stage_to_rank == expected.stage_to_rank, (name, p, m)
            assert theirs.name == f"torch-{name}"


def test_interleaved_zero_bubble_with_two_chunks_is_valid_and_runs():
    schedule = from_pytorch("ScheduleInterleavedZeroBubble", 4, 8, 2)
    assert schedule.num_stages == 8 and schedule.stage_to_rank == (0, 1, 2, 3) * 2
    assert {a.kind for row in schedule.actions for step in row for a in step.parts} == {
        "F",
        "I",
        "W",
    }
    assert simulate(schedule).makespan > 0  # validated and free of deadlock


def test_a_class_object_is_accepted_as_well_as_its_name():
    by_class = from_pytorch(schedules.ScheduleZBVZeroBubble, 2, 4)
    assert by_class.actions == from_pytorch("ScheduleZBVZeroBubble", 2, 4).actions


def test_reduce_grad_is_dropped_and_noted():
    (note,) = from_pytorch("ScheduleGPipe", 2, 4).notes
    assert "dropped 2 communication and sharding actions" in note and "2 REDUCE_GRAD" in note


def _last_rank_forwards(p: int, m: int) -> list[int]:
    """The micro-batches of the forwards in Schedule1F1B's exported order for the last
    rank, read from PyTorch's own pipeline_order."""
    stage = types.SimpleNamespace(group_size=p, group_rank=0, num_stages=p, stage_index=0)
    order = schedules.Schedule1F1B(stage, m).pipeline_order[p - 1]
    return [a.microbatch_index for a in order if a is not None and str(a)[-2:-1] == "F"]


@pytest.mark.parametrize(("p", "m"), [(1, 1), (2, 2), (2, 5), (4, 8), (5, 7)])
def test_pytorchs_1f1b_export_is_refused_with_the_validators_reason(p, m):
    # PyTorch's own list: the last rank runs forward 1..m, never 0 (m is out of range).
    assert _last_rank_forwards(p, m) == list(range(1, m + 1))
    with pytest.raises(ValueError) as info:
        from_pytorch("Schedule1F1B", p, m)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"PyTorch's exported order of Schedule1F1B(p={p}, m={m}, v=1)")
    last = p - 1
    assert f"({last}F{m}): micro-batch {m} is not in 0..{m - 1}" in message
    assert f"stage {last}, micro-batch 0: a backward without its forward (F)" in message
    assert "Schedule1F1B" in KNOWN_INVALID


def test_every_class_but_1f1b_imports_clean():
    clean = [name for name in SINCE if name not in KNOWN_INVALID]
    for name in clean:
        assert from_pytorch(name, 2, 4).num_microbatches == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("ScheduleWhatever", 2, 4), "unknown PyTorch schedule class 'ScheduleWhatever'; choose"),
        (("Schedule1F1B", 4, 2), "PyTorch's Schedule1F1B refuses p=4, m=2, v=1: Number of"),
        (("ScheduleGPipe", 2, 4, 2), "ScheduleGPipe places 1 stage(s) per rank, got num_chunks 2"),
        (("ScheduleZBVZeroBubble", 2, 4, 3), "places 2 stage(s) per rank, got num_chunks 3"),
        (("ScheduleDualPipeV", 2, 2), "PyTorch's ScheduleDualPipeV refuses p=2, m=2, v=2"),
        (("ScheduleGPipe", 0, 4), "num_stages"),
        (("ScheduleGPipe", 2, 1.5), "num_microbatches"),
    ],
)
def test_bad_arguments_are_one_line_value_errors(args, message):
    with pytest.raises(ValueError) as info:
        from_pytorch(*args)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_class_missing_from_this_torch_names_the_release_that_has_it(monkeypatch):
    monkeypatch.delattr(schedules, "ScheduleDualPipeV")
    with pytest.raises(ValueError, match=r"ScheduleDualPipeV needs torch >= 2\.9, but this is"):
        from_pytorch("ScheduleDualPipeV", 2, 4)


def test_an_exported_order_that_deadlocks_is_refused_naming_the_stuck_ranks(monkeypatch):
    # Rank 0 waits in 0B0 for rank 1's 1B0; rank 1 waits in 1F1 for rank 0's 0F1, after 0B0.
    rows = [["0F0", "0B0", "0F1", "0B1"], ["1F1", "1F0", "1B0", "1B1"]]
    order = {r: [schedules._Action.from_str(a) for a in row] for r, row in enumerate(rows)}
    monkeypatch.setattr(schedules.ScheduleGPipe, "_get_pipeline_order", lambda self: order)
    with pytest.raises(ValueError) as info:
        from_pytorch("ScheduleGPipe", 2, 2)
    message = str(info.value)
    assert message.startswith("PyTorch's exported order of ScheduleGPipe(p=2, m=2, v=1) is")
    assert "deadlock" in message and "\n" not in message
