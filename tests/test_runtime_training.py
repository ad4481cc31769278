"""``steps`` steps train: N pipelined steps give the parameters of N steps in one process.

Two CPU processes (gloo), a small MLP in float64, three steps of SGD (and one run of
Adam): after every step each rank steps the optimizer on its stages, DualPipe's two copies
of a part first sum their gradients. Also a model with a first part without parameters,
tied weights and a frozen Linear, under full and split backward. The loss of every step,
the last step's gradients and the parameters after the last step equal those of the same
training in one process (ppbook.runtime.reference.reference_run).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch import nn

from ppbook.runtime.config import RunConfig
from ppbook.runtime.launch import launch_many
from ppbook.runtime.models import build_blocks
from ppbook.runtime.reference import assert_matches_reference, reference_run
from ppbook.runtime.training import copied_parts
from ppbook.schedules import build

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "dualpipe", "dualpipev")


def training(schedule: str, optimizer: str = "sgd", lr: float = 0.1) -> RunConfig:
    return RunConfig(
        schedule=schedule,
        nproc=2,
        num_microbatches=4,
        hidden=8,
        microbatch_size=2,
        steps=3,
        optimizer=optimizer,
        lr=lr,
        dtype="float64",
        collect_grads=True,
        timeout=30.0,
        label=f"{schedule} {optimizer}",
    )


def unusual_blocks(num_parts: int) -> list[nn.Module]:
    """A first part without parameters, then tied weights and a frozen Linear."""

    def tied() -> nn.Sequential:
        first, second = nn.Linear(5, 5), nn.Linear(5, 5)
        second.weight = first.weight  # the second Linear shares the first's weight
        return nn.Sequential(first, nn.Tanh(), second)

    frozen = nn.Sequential(nn.Tanh(), nn.Linear(5, 5).requires_grad_(False), nn.Tanh())
    if num_parts == 2:
        return [nn.Tanh(), nn.Sequential(tied(), frozen, nn.Linear(5, 5))]
    return [nn.Tanh(), tied(), frozen, nn.Sequential(tied(), nn.Linear(5, 5))]


def unusual(schedule: str, num_parts: int) -> RunConfig:
    config = training(schedule)
    return replace(
        config, model=unusual_blocks(num_parts), input_shape=(5,), label=f"{schedule} unusual"
    )


CONFIGS = [training(name) for name in SCHEDULES] + [training("dualpipe", "adam", lr=0.01)]
CONFIGS += [unusual("1f1b", 2), unusual("zb-h1", 2), unusual("zb-v", 4), unusual("dualpipe", 2)]


@pytest.fixture(scope="module")
def results():
    return {c.label: r for c, r in zip(CONFIGS, launch_many(CONFIGS), strict=True)}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("label", [c.label for c in CONFIGS])
def test_pipelined_steps_train_as_one_process_does(results, label):
    result = results[label]
    assert_matches_reference(result)  # every step's loss, last gradients, final parameters
    assert result.losses[2] < result.losses[1] < result.losses[0]  # it learns
    assert all(timeline.time_unit == "s" for timeline in result.timelines)


def test_training_moves_the_parameters():
    """The reference itself trains: its parameters leave their initial values."""
    config = training("1f1b")
    initial = {}
    for index, block in enumerate(build_blocks(config, 2)):
        for name, value in block.named_parameters():
            initial[f"{index}.{name}"] = value.detach()
    trained = reference_run(config).params
    assert set(trained) == set(initial)
    assert all(not torch.equal(trained[name], initial[name]) for name in initial)


def test_only_dualpipe_holds_copies_of_a_part():
    assert copied_parts(build("dualpipe", 2, 4)) == [0, 1]
    for name in ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "dualpipev"):
        assert copied_parts(build(name, 2, 4)) == [], name
