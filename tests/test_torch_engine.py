"""``--engine torch``: ppbook's schedules run on PyTorch's engine, on two CPU processes.

For gpipe, 1f1b, interleaved-1f1b and zb-h1 (the issue's four) and for zb-v and
dualpipev (two stages of one rank next to each other; DualPipeV's overlapped pairs),
PyTorch's engine gives the losses, gradients and parameters of the same two steps in one
process (float64) and of ppbook's runtime; it ran exactly the schedule's order; its
timeline is the simulator's type and respects every dependency; its ranks listen on
loopback only. Every run shares one launch (both engines in the same processes).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest
import torch
from measured import assert_order_and_dependencies
from timeline_checks import (
    assert_bubble_from_gaps,
    assert_no_faster_than_the_simulator_allows,
    assert_simulated_busy_is_the_measured_mean,
    fastest_possible,
)

from ppbook.pytorch_csv import write_csv
from ppbook.runtime.config import Fault, RunConfig, check
from ppbook.runtime.context import is_loopback
from ppbook.runtime.launch import launch_many
from ppbook.runtime.measure import compare
from ppbook.runtime.reference import assert_matches_reference
from ppbook.schedules import build
from ppbook.timeline import Timeline

NAMES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-v", "dualpipev")
ENGINES = ("ppbook", "torch")


def tiny(name: str, engine: str, **kw) -> RunConfig:
    """Two float64 SGD steps of a small MLP on two ranks, reporting gradients."""
    base = dict(
        schedule=name,
        nproc=2,
        num_microbatches=4,
        hidden=8,
        microbatch_size=2,
        steps=2,
        dtype="float64",
        collect_grads=True,
        timeout=30.0,
        num_threads=1,
        engine=engine,
        label=f"{name} {engine}",
    )
    base.update(kw)
    return RunConfig(**base)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, object]:
    configs = [tiny(name, engine) for name in NAMES for engine in ENGINES]
    configs.append(tiny("interleaved-1f1b", "torch", model="transformer", seq_len=4,
                        label="transformer torch"))  # fmt: skip
    path = tmp_path_factory.mktemp("csv") / "zbv.csv"
    write_csv(build("zb-v", 2, 4), path)
    configs.append(cli_config(["--engine", "torch", "--from-csv", str(path)], label="csv torch"))
    return {c.label: r for c, r in zip(configs, launch_many(configs), strict=True)}


def cli_config(argv: list[str], **changes) -> RunConfig:
    """The RunConfig ``ppbook run`` makes of ``argv`` (with :func:`tiny`'s sizes)."""
    from ppbook.cli import run as run_cli

    parser = argparse.ArgumentParser()
    run_cli.add_arguments(parser)
    sizes = ["--hidden", "8", "--microbatch-size", "2", "--steps", "2", "--dtype", "float64",
             "--threads", "1", "--timeout", "30", "--check"]  # fmt: skip
    args = parser.parse_args([*argv, *sizes])
    return replace(run_cli.make_config(args, 2), **changes)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", NAMES)
def test_pytorchs_engine_equals_one_process_and_ppbooks_runtime(runs, name):
    theirs, ours = runs[f"{name} torch"], runs[f"{name} ppbook"]
    assert_matches_reference(theirs)  # losses, gradients, parameters: one process, float64
    assert theirs.losses == pytest.approx(ours.losses, rel=1e-12)
    assert set(theirs.grads) == set(ours.grads)
    for key, grad in ours.grads.items():
        torch.testing.assert_close(theirs.grads[key], grad, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(theirs.params[key], ours.params[key], rtol=1e-10, atol=1e-12)


@pytest.mark.timeout(180)
def test_a_transformer_on_pytorchs_engine_equals_one_process(runs):
    assert_matches_reference(runs["transformer torch"])


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", NAMES)
def test_pytorchs_engine_runs_the_schedules_order_and_measures_it(runs, name):
    result = runs[f"{name} torch"]
    assert_order_and_dependencies(result)
    for timeline in result.timelines:
        assert type(timeline) is Timeline
        assert timeline.source == "measured" and timeline.time_unit == "s"


@pytest.mark.timeout(180)
def test_pytorchs_engine_listens_on_loopback_and_compares_with_the_simulator(runs):
    result = runs["1f1b torch"]
    for rank, addresses in enumerate(result.listening):
        assert addresses, f"rank {rank}: no listening socket found (gloo listens on one)"
        assert all(is_loopback(a) for a in addresses), (rank, addresses)
    comparison = compare(result)
    assert comparison.simulated.schedule == result.schedule
    assert_bubble_from_gaps(comparison.measured)  # f and r against idle summed gap by gap
    # Measured against simulated: no step of PyTorch's engine ran faster than the
    # simulator allows with each pass's shortest measured time and free transfers, and
    # each rank's simulated compute under the measured costs is its measured mean.
    assert_no_faster_than_the_simulator_allows(result)
    assert_simulated_busy_is_the_measured_mean(comparison, result)
    assert comparison.simulated.makespan >= fastest_possible(result.timelines).makespan


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(schedule="dualpipe"), "routes micro-batches otherwise (two directions)"),
        (dict(fault=Fault("raise", 1, 2)), "fault is a hook of ppbook's runtime"),
        (dict(transport="json"), "transport is a hook of ppbook's runtime"),
        (dict(matching="strict"), "matching is a hook of ppbook's runtime"),
        (dict(engine="deepspeed"), "engine must be one of ppbook, torch, got 'deepspeed'"),
    ],
)
def test_what_pytorchs_engine_cannot_run_is_refused_before_any_process(changes, message):
    config = tiny("1f1b", changes.pop("engine", "torch"), **changes)
    with pytest.raises(ValueError) as info:
        check(config)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.timeout(180)
def test_ppbook_run_engine_torch_from_csv(runs):
    result = runs["csv torch"]
    assert result.config.engine == "torch" and result.schedule.name == "zbv"
    assert result.schedule.actions == build("zb-v", 2, 4).actions
    assert_matches_reference(result)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--schedule", "gpipe"], "--from-csv reads the whole schedule; drop --schedule"),
        (["--microbatches", "3"], "--microbatches 3, but"),
    ],
)
def test_from_csv_conflicts_are_one_line_errors(tmp_path, capsys, extra, message):
    from ppbook.cli import run as run_cli

    path = tmp_path / "g.csv"
    write_csv(build("gpipe", 2, 4), path)
    assert run_cli.main(["--from-csv", str(path), *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_torch_without_pytorchs_runtime_is_refused_before_any_process(monkeypatch):
    from torch.distributed.pipelining import schedules

    monkeypatch.delattr(schedules._PipelineScheduleRuntime, "_prepare_schedule_with_comms")
    with pytest.raises(ValueError, match=r"lacks the pipeline runtime .* tested on torch 2\.13"):
        check(tiny("1f1b", "torch"))
