"""interleaved-1f1b and interleaved-zb against PyTorch's own schedule objects (torch 2.13).

For every p in 2..6, v in 2..4 and m in 1..3p+2, the test builds PyTorch's
ScheduleInterleaved1F1B and ScheduleInterleavedZeroBubble with the real constructors (on
stand-in stages: the attributes a constructor reads, no process group), so PyTorch itself
decides which (p, m, v) it runs. Where it builds one, ppbook's builder gives the same
actions on every rank (PyTorch's idle slots, its ``None``, dropped: ``_add_bubbles_to_actions``
only inserts them) and the simulator times PyTorch's order and ours alike. Where PyTorch
refuses, ppbook refuses too, naming PyTorch's rule.

PyTorch refuses m when m is not a multiple of its number of rounds, max(1, m // p): in this
grid, m = 5, 7 with p = 2; m = 7, 10, 11 with p = 3; m = 9, 11, 13, 14 with p = 4; m = 11,
13, 16, 17 with p = 5; m = 13, 15, 17, 19, 20 with p = 6 (for every v; checked below from
PyTorch's answers, not from the rule). Every m < p runs.
"""

from __future__ import annotations

import re
import types

import pytest

from ppbook.costs import Costs
from ppbook.schedule import Schedule
from ppbook.schedules import build, interleaved_1f1b, interleaved_zb, zb_h1
from ppbook.simulate import simulate
from ppbook.validate import validate

schedules = pytest.importorskip("torch.distributed.pipelining.schedules")

GRID = [(p, v, m) for p in range(2, 7) for v in range(2, 5) for m in range(1, 3 * p + 3)]
REFUSED = {  # (p, m) PyTorch refuses, for every v (module docstring)
    2: {5, 7},
    3: {7, 10, 11},
    4: {9, 11, 13, 14},
    5: {11, 13, 16, 17},
    6: {13, 15, 17, 19, 20},
}
PAIRS = {
    "interleaved-1f1b": (interleaved_1f1b, "ScheduleInterleaved1F1B"),
    "interleaved-zb": (interleaved_zb, "ScheduleInterleavedZeroBubble"),
}


def _stand_in_stages(p: int, v: int) -> list[types.SimpleNamespace]:
    """Rank 0's stages as PyTorch's constructors read them (every rank's order is built)."""
    n = p * v
    return [
        types.SimpleNamespace(
            group_size=p,
            group_rank=0,
            num_stages=n,
            stage_index=s,
            is_first=s == 0,
            is_last=s == n - 1,
            submod=None,
        )
        for s in range(0, n, p)
    ]


def _pytorchs_rows(class_name: str, p: int, m: int, v: int) -> list[list[str]] | None:
    """PyTorch's per-rank actions (its idle slots dropped), or None when it refuses."""
    try:
        theirs = getattr(schedules, class_name)(_stand_in_stages(p, v), m)
    except ValueError as error:
        assert "multiple of the number of rounds" in str(error)
        return None
    return [[str(a) for a in theirs.pipeline_order[r] if a is not None] for r in range(p)]


@pytest.mark.parametrize("name", list(PAIRS))
def test_same_actions_and_makespan_as_pytorch_on_every_case_it_builds(name):
    builder, class_name = PAIRS[name]
    costs = [Costs(F=1, B=2), Costs(F=1, B=3, comm=0.25)]
    if name == "interleaved-zb":
        costs = [Costs(F=1, I=1, W=1), Costs(F=1, I=2, W=1, comm=0.25)]
    refused = set()
    for p, v, m in GRID:
        rows = _pytorchs_rows(class_name, p, m, v)
        if rows is None:
            refused.add((p, m))
            with pytest.raises(ValueError, match=rf"{class_name} rule\), got m = {m} with p = {p}"):
                builder(p, m, v)
            continue
        ours = builder(p, m, v)
        assert ours.to_strings() == rows, (p, m, v)
        validate(ours)
        theirs = Schedule.from_strings(rows, stage_to_rank=ours.stage_to_rank)
        for cost in costs:
            assert simulate(ours, cost).makespan == simulate(theirs, cost).makespan, (p, m, v)
    assert refused == {(p, m) for p, ms in REFUSED.items() for m in ms}


def test_interleaved_1f1b_closed_form_holds_for_every_m_pytorch_runs():
    """Megatron-LM's m(F+B) + (p-1)(F+B)/v for every m >= p that PyTorch runs, not only
    multiples of p; below p, one micro-batch's chain p(F+B) plus (m-1)(F+B)/v."""
    assert simulate(interleaved_1f1b(4, 6, 2), Costs(F=1, B=2)).makespan == 22.5  # issue 18
    for f, b in [(1, 2), (1, 1), (2, 1), (1, 3)]:
        for p, v, m in GRID:
            if m in REFUSED[p]:
                continue
            expected = max(m, p) * (f + b) + (min(m, p) - 1) * (f + b) / v
            makespan = simulate(interleaved_1f1b(p, m, v), Costs(F=f, B=b)).makespan
            assert makespan == pytest.approx(expected), (p, m, v, f, b)


def test_interleaved_zb_with_one_chunk_is_zb_h1():
    for p in range(1, 7):
        for m in range(1, 3 * p + 3):
            if p > 1 and m in REFUSED.get(p, ()):
                continue
            assert interleaved_zb(p, m, 1).actions == zb_h1(p, m).actions, (p, m)


def test_refusal_is_one_line_with_pytorchs_rule_and_the_nearest_counts():
    with pytest.raises(ValueError) as info:
        interleaved_1f1b(4, 9)
    message = str(info.value)
    assert "\n" not in message
    assert "max(1, m // p) (PyTorch's ScheduleInterleaved1F1B rule)" in message
    assert "got m = 9 with p = 4 (2 rounds); try m = 8 or m = 10" in message
    with pytest.raises(ValueError, match="interleaved-zb needs num_microbatches"):
        build("interleaved-zb", 3, 7)
    for p, refused in REFUSED.items():  # the counts suggested are the nearest PyTorch runs
        for m in refused:
            with pytest.raises(ValueError) as info:
                interleaved_zb(p, m)
            lower, upper = map(int, re.findall(r"try m = (\d+) or m = (\d+)", str(info.value))[0])
            assert lower < m < upper and {lower, upper}.isdisjoint(refused), (p, m)
            assert set(range(lower + 1, upper)) <= refused, (p, m)
    with pytest.raises(
        ValueError, match=r"got m = 64 with p = 3 \(21 rounds\); try m = 63 or m = 66"
    ):
        interleaved_1f1b(3, 64)
    with pytest.raises(ValueError, match="interleaved-zb needs num_chunks >= 1, got 0"):
        interleaved_zb(3, 6, 0)


def test_interleaved_zb_holds_1f1bs_peak_activations_on_every_rank():
    """PyTorch's ZB1P, the paper's ZB-1p, runs at 1F1B's memory (Zero Bubble PP,
    arXiv:2401.10241, sec. 3; REFERENCES.md): p micro-batches of a full stage on every rank,
    here v p chunk activations of 1/v each."""
    for p in range(2, 6):
        for v in range(2, 5):
            for m in (p, 2 * p, 3 * p):
                timeline = simulate(interleaved_zb(p, m, v), Costs(F=1, I=1, W=1))
                assert [timeline.peak_activations(r) for r in range(p)] == [p] * p, (p, m, v)
