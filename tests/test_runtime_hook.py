"""The runtime's transport hook: RunConfig(transport=...) names a module whose receive and
deliver replace StepRunner's own (assignment 3 has the reader write them).

One launch runs two tiny float64 pipelines: one whose transport hands every step to the
runner's own methods (the single-process gradients come out), one whose transport doubles
every tensor it delivers (the loss changes: the hook is what the ranks ran).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from ppbook.assign.transport import RUNS
from ppbook.runtime.config import RunConfig, check
from ppbook.runtime.launch import launch_many
from ppbook.runtime.reference import assert_matches_reference, reference_step

OWN = """
from ppbook.runtime.execute import StepRunner

def receive(runner, part):
    return StepRunner.receive(runner, part)

def deliver(runner, part, result):
    StepRunner.deliver(runner, part, result)
"""

DOUBLED = """
from ppbook.runtime.execute import StepRunner

def receive(runner, part):
    return StepRunner.receive(runner, part)

def deliver(runner, part, result):
    StepRunner.deliver(runner, part, None if result is None else 2 * result)
"""


def tiny(schedule: str, transport: str) -> RunConfig:
    """Assignment 3's run of ``schedule`` (the grader's own), with ``transport``."""
    return replace(RUNS[schedule], transport=transport)


def test_a_transport_module_replaces_receive_and_deliver(tmp_path, monkeypatch):
    (tmp_path / "hook_own.py").write_text(OWN)
    (tmp_path / "hook_doubled.py").write_text(DOUBLED)
    monkeypatch.syspath_prepend(str(tmp_path))  # the ranks get the launcher's sys.path
    own_1f1b, own_zbv, doubled = launch_many(
        [tiny("1f1b", "hook_own"), tiny("zb-v", "hook_own"), tiny("1f1b", "hook_doubled")]
    )
    assert_matches_reference(own_1f1b)
    assert_matches_reference(own_zbv)  # ZB-V hands over between two stages of one rank too
    loss, _ = reference_step(doubled.config)
    assert not torch.isclose(torch.tensor(doubled.losses[0]), torch.tensor(loss))


def test_a_transport_the_ranks_cannot_import_is_refused_before_they_start():
    with pytest.raises(ValueError, match="cannot find the transport module 'no_such_transport'"):
        check(tiny("1f1b", "no_such_transport"))
    with pytest.raises(ValueError, match="a module's name such as 'my_transport'"):
        check(tiny("1f1b", "my transport.py"))
