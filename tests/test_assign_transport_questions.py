"""Assignment 3's questions (ppbook.assign.transport): scored by gradient equality with one
process; right data from a real two-process run of the runtime's own send and receive.
"""

from __future__ import annotations

import json

import pytest
import torch

from ppbook.assign import transport
from ppbook.assign.questions import ASSIGNMENTS
from ppbook.dependencies import needs, sends
from ppbook.symbolic.symbols import c, m, p, t_b, t_f, v

QUESTIONS = {q.name: q for questions in ASSIGNMENTS.values() for q in questions}
MAKESPAN = m * (t_f + t_b) + (p - 1) * (t_f + t_b) / v
WITH_TRANSFER = MAKESPAN + 2 * (p * v - 1) * c
BEST_CHUNKS = [5, 4, 3, 5, 2, 3]  # read off a simulated table of v = 1..8 for each case


def score(name: str, data: object) -> tuple[float, str]:
    return QUESTIONS[name].score(json.loads(json.dumps(data)))


@pytest.fixture(scope="module")
def pipeline_data(tmp_path_factory):
    """Losses and gradients of transport.RUNS with the runtime's own send and receive, as
    the notebook gets them: write_transport, then pipeline_gradients."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("assignment_3"))
        module = transport.write_transport(receive, deliver, "own_transport")
        patch.syspath_prepend(str(module.parent))  # the ranks get the launcher's sys.path
        return transport.pipeline_gradients("own_transport")


def test_assignment_3_scores_the_runtime_s_own_transport_full(pipeline_data):
    assert score("3.1", pipeline_data)[0] == 4
    assert score("3.2", pipeline_data)[0] == 6


def test_assignment_3_a_wrong_gradient_names_the_parameter_and_the_error(pipeline_data):
    data = json.loads(json.dumps(pipeline_data))
    name = sorted(data["zb-v"]["grads"])[0]
    data["zb-v"]["grads"][name] = (2 * torch.tensor(data["zb-v"]["grads"][name])).tolist()
    got, line = score("3.2", data)
    assert got == 0 and line.startswith(f"zb-v: the gradient of {name} is off by up to ")
    del data["1f1b"]["grads"][name]
    assert score("3.2", data)[1] == f"1f1b: the parameter {name} got no gradient"
    data["1f1b"]["loss"] *= 1.5
    assert "1f1b: the pipeline's loss is" in score("3.1", data)[1]
    assert score("3.1", None) == (0, "pipeline_gradients gave no result for the 1f1b run")
    assert score("3.2", {"1f1b": {"grads": {name: "x"}}, "zb-v": {}})[0] == 0


def test_assignment_3_an_unfinished_transport_reads_as_work_to_do(tmp_path, monkeypatch):
    (tmp_path / "stub_transport.py").write_text(
        "def receive(runner, part):\n"
        '    raise NotImplementedError("write receive: what part needs from another stage")\n'
        "def deliver(runner, part, result):\n"
        "    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(NotImplementedError, match="^write receive: what part needs"):
        transport.pipeline_gradients("stub_transport")
    monkeypatch.setattr(transport, "_launched", lambda name: pytest.fail("launched again"))
    with pytest.raises(NotImplementedError, match="^write receive"):  # the same file: kept
        transport.pipeline_gradients("stub_transport")


def receive(runner, part):
    """A stand-in for the reader's receive: the runtime's own."""
    from ppbook.runtime.execute import StepRunner

    return StepRunner.receive(runner, part)


def deliver(runner, part, result):
    """A stand-in for the reader's deliver: the runtime's own."""
    from ppbook.runtime.execute import StepRunner

    StepRunner.deliver(runner, part, result)


def test_write_transport_writes_the_two_functions_where_the_ranks_import_them(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    path = transport.write_transport(receive, deliver)
    assert path == tmp_path / "my_transport.py"
    namespace = {}
    exec(path.read_text(), namespace)  # the module as the ranks import it
    assert namespace["receive"].__doc__ == receive.__doc__
    assert namespace["needs"] is needs and namespace["sends"] is sends
    with pytest.raises(ValueError, match="needs your function receive, got"):
        transport.write_transport(deliver, deliver)
