"""Real pipelines on CPU processes (gloo) against the single-process model.

For every schedule of ppbook.schedules, p in {2, 3, 4} and m in {1, 2, p, 2p} where the
schedule allows it (a schedule that allows none of them fails the run, unless it is a
stated exclusion: DualPipe at odd p), plus the hand-written corner cases of
ppbook.runtime.examples at p = 2: two training steps give the losses, the gradients and
the parameters of the same two steps in one process (float64), each rank ran exactly its
actions of the schedule in order, and the measured timeline respects every dependency on
the aligned clocks.

All runs for one p share one launch (ppbook.runtime.launch.launch_many), so the grid
costs a few process starts, not hundreds. Set PPBOOK_QUICK=1 to run p = 2 only.
"""

from __future__ import annotations

import os

import pytest
import torch
from measured import assert_order_and_dependencies
from timeline_checks import (
    assert_bubble_from_gaps,
    assert_no_faster_than_the_simulator_allows,
    assert_simulated_busy_is_the_measured_mean,
    fastest_possible,
)

from ppbook.runtime.config import RunConfig, check
from ppbook.runtime.context import is_loopback
from ppbook.runtime.examples import (
    overlapped_pair,
    reordered_backward,
    split_one_f_one_b,
    two_routes,
)
from ppbook.runtime.launch import PipelineError, launch_many
from ppbook.runtime.measure import compare
from ppbook.runtime.reference import assert_matches_reference, reference_step
from ppbook.schedules import SCHEDULES

SIZES = (2,) if os.environ.get("PPBOOK_QUICK") else (2, 3, 4)
TRANSFORMER_CASES = {"1f1b", "zb-h1", "dualpipev", "interleaved-1f1b"}


def tiny(schedule, nproc: int, m: int, **kw) -> RunConfig:
    """A float64 run of a tiny model that reports gradients and parameters; two SGD steps."""
    name = schedule if isinstance(schedule, str) else schedule.name
    model = "transformer" if name in TRANSFORMER_CASES and m == nproc else "mlp"
    base = dict(
        schedule=schedule,
        nproc=nproc,
        num_microbatches=m,
        model=model,
        hidden=8,
        seq_len=4,
        microbatch_size=2,
        steps=2,
        dtype="float64",
        collect_grads=True,
        timeout=30.0,
        label=f"{name} p={nproc} m={m} {model}",
    )
    base.update(kw)
    return RunConfig(**base)


REFUSED: dict[tuple[int, str], str] = {}
"""(p, schedule) -> why the schedule refused every m at that p (filled by :func:`grid`)."""

EXCLUDED = {(3, "dualpipe"): "even"}
"""Schedules that may refuse a p, with a word their reason must contain: DualPipe feeds
half of the micro-batches from each end, so it needs an even p."""


def grid(p: int) -> list[RunConfig]:
    """Every schedule, for each m in {1, 2, p, 2p} it accepts; one that accepts none of
    them is recorded in REFUSED (test_every_schedule_is_exercised fails on it)."""
    configs = []
    for name in SCHEDULES:
        accepted = False
        for m in sorted({1, 2, p, 2 * p}):
            config = tiny(name, p, m)
            try:
                check(config)
            except ValueError as exc:  # m not allowed by this schedule (say, 1F1B with m < p)
                REFUSED[(p, name)] = str(exc)
                continue
            configs.append(config)
            accepted = True
        if accepted:
            REFUSED.pop((p, name), None)
    if p == 2:
        for schedule in (reordered_backward(), split_one_f_one_b(2, 4), overlapped_pair()):
            configs.append(tiny(schedule, 2, schedule.num_microbatches))
        configs.append(tiny(two_routes(), 2, 2, model="transformer"))
    return configs


CASES = [(p, config.label) for p in SIZES for config in grid(p)]


@pytest.fixture(scope="module")
def runs():
    """Results by p and label; each p's grid runs in one launch, on first use."""
    cache: dict[int, dict] = {}

    def get(p: int) -> dict:
        if p not in cache:
            configs = grid(p)
            cache[p] = {c.label: r for c, r in zip(configs, launch_many(configs), strict=True)}
        return cache[p]

    return get


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("p", "label"), CASES, ids=[label for _, label in CASES])
def test_pipeline_equals_single_process(runs, p, label):
    result = runs(p)[label]
    assert_matches_reference(result)  # loss and every gradient, float64

    # every rank ran its row in order; the measured timelines respect the dependencies
    assert_order_and_dependencies(result)


@pytest.mark.timeout(180)
def test_runs_listen_on_loopback_only_and_compare_with_the_simulator(runs):
    result = runs(2)["1f1b p=2 m=4 mlp"]
    for rank, addresses in enumerate(result.listening):
        assert addresses, f"rank {rank}: no listening socket found (gloo listens on one)"
        assert all(is_loopback(a) for a in addresses), (rank, addresses)
    assert all(abs(offset) < 0.05 for offset in result.clock_offsets)  # one host, one clock

    comparison = compare(result)
    assert comparison.simulated.schedule == result.schedule
    assert comparison.simulated.source == "simulated" and comparison.measured.source == "measured"
    for timeline in (comparison.measured, comparison.simulated):
        assert_bubble_from_gaps(timeline)  # f and r against idle summed gap by gap
    # Measured against simulated: no step ran faster than the simulator allows with each
    # pass's shortest measured time, each rank's simulated compute is its measured mean,
    # and the comparison's costs (means) simulate no faster than the shortest times.
    assert_no_faster_than_the_simulator_allows(result)
    assert_simulated_busy_is_the_measured_mean(comparison, result)
    assert comparison.simulated.makespan >= fastest_possible(result.timelines).makespan
    assert comparison.costs.transfer >= 0
    assert "bubble fraction f = idle/total" in comparison.table()


@pytest.mark.timeout(120)
def test_untagged_messages_give_wrong_gradients_but_the_right_loss():
    """Rank 0 takes its gradients in the other order than rank 1 sends them. Paired by order
    alone, micro-batch 1's backward gets micro-batch 0's gradient: the loss is untouched,
    the gradients of stage 0 are wrong. The mailbox (in the grid above) gets them right."""
    schedule = reordered_backward()
    (naive,) = launch_many([tiny(schedule, 2, 2, matching="order", steps=1)])
    with pytest.raises(AssertionError, match="gradient of 0"):
        assert_matches_reference(naive)
    loss, grads = reference_step(naive.config)
    assert naive.loss == pytest.approx(loss, rel=1e-12)
    for name, grad in grads.items():
        if name.startswith("1."):  # stage 1 is not affected: its inputs arrive in order
            torch.testing.assert_close(naive.grads[name], grad, rtol=1e-10, atol=1e-12)


@pytest.mark.timeout(120)
def test_a_mispaired_message_is_detected():
    with pytest.raises(PipelineError) as caught:
        launch_many([tiny(reordered_backward(), 2, 2, matching="strict", steps=1)])
    message = str(caught.value)
    assert "MessageMismatch" in message
    assert "expected the gradient for 0B1 from rank 1" in message
    assert "the next message was the gradient for 0B0" in message
    assert caught.value.rank == 0


def test_every_schedule_is_exercised():
    """A schedule whose builder fails for every m would drop out of the grid: not silently."""
    for p in SIZES:
        for name in SCHEDULES:
            reason = REFUSED.get((p, name))
            if reason is None:
                continue
            expected = EXCLUDED.get((p, name))
            assert expected is not None and expected in reason, f"{name} p={p}: {reason}"
    exercised = {(p, label.split(" ")[0]) for p, label in CASES}
    assert exercised | set(EXCLUDED) >= {(p, name) for p in SIZES for name in SCHEDULES}


def test_the_grid_covers_the_schedules_the_issue_names():
    """A schedule that stopped building would drop out of the grid silently: guard it."""
    covered = {label.rsplit(" ", 1)[0] for _, label in CASES}
    for name in ("gpipe", "1f1b", "zb-h1"):
        for m in (1, 2, 4):
            assert f"{name} p=2 m={m}" in covered
    assert {"interleaved-1f1b p=2 m=2", "interleaved-1f1b p=2 m=4"} <= covered
