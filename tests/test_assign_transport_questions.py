"""Assignment 3's questions (ppbook.assign.transport): measured by the grader itself in a fresh
process (ppbook.assign.measure_transport, run as the grader runs it) and scored by equality
of losses, gradients and parameters with one process.

Right data comes from elsewhere than the scores: the runtime's own send and receive, their
code transplanted from StepRunner into a module of plain functions (the methods themselves
are refused). Each wrong kind is a transport file handed to the real measurement.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from ppbook.assign import transport
from ppbook.assign.forbidden import findings
from ppbook.assign.questions import ASSIGNMENTS, FORBIDDEN
from ppbook.dependencies import needs, sends
from ppbook.exercises import check
from ppbook.runtime.execute import StepRunner

QUESTIONS = {q.name: q for questions in ASSIGNMENTS.values() for q in questions}


def score(name: str, data: object) -> tuple[float, str]:
    return QUESTIONS[name].score(json.loads(json.dumps(data)))


def runtime_s_own() -> str:
    """The runtime's own receive and deliver (with _take and _put), as plain functions of
    ``runner``: StepRunner's code, with ``self`` renamed and its helpers called directly."""
    methods = [inspect.getsource(getattr(StepRunner, n)) for n in ("receive", "deliver")]
    helpers = [inspect.getsource(getattr(StepRunner, n)) for n in ("_take", "_put")]
    text = textwrap.dedent("\n".join(methods + helpers))
    text = re.sub(r"def (_?\w+)\(\s*self,", r"def \1(runner,", text)
    text = re.sub(r"self\.(_take|_put)\(", r"\1(runner, ", text).replace("self.", "runner.")
    return (
        "from __future__ import annotations\n\nfrom ppbook.dependencies import needs, sends\n\n"
        + text
    )


def measure(folder: Path, source: str | None, *, deadline: float | None = None) -> dict:
    """The record of the grader's measurement of ``source`` as my_transport.py in ``folder``
    (``python -I -m ppbook.assign.measure_transport``, its current folder the submission's)."""
    folder.mkdir(parents=True, exist_ok=True)
    if source is not None:
        (folder / "my_transport.py").write_text(source)
    answer = folder.parent / f"{folder.name}.json"
    if deadline is None:
        command = [sys.executable, "-I", "-m", transport.MEASURE, str(answer)]
    else:  # the same main, with a shorter deadline
        code = (
            "import sys, ppbook.assign.measure_transport as m; "
            f"m.DEADLINE = {deadline}; sys.exit(m.main([{str(answer)!r}]))"
        )
        command = [sys.executable, "-I", "-c", code]
    subprocess.run(command, cwd=folder, check=True, timeout=300, capture_output=True)
    return json.loads(answer.read_text())


@pytest.fixture(scope="module")
def right_data(tmp_path_factory):
    """The record of the runtime's own transport, through the notebook's self-check path
    (transport.measured runs the grader's module in a subprocess)."""
    folder = tmp_path_factory.mktemp("own")
    (folder / "my_transport.py").write_text(runtime_s_own())
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        return transport.measured("my_transport")


def test_the_runtime_s_own_transport_scores_full_on_every_run(right_data):
    assert sorted(right_data) == sorted(transport.RUNS)
    assert {config.nproc for config in transport.RUNS.values()} == {2, 3, 4}
    assert score("3.1", right_data) == (4, score("3.1", right_data)[1])
    assert score("3.1", right_data)[1].startswith("right: every loss of all 6 runs")
    assert score("3.2", right_data)[0] == 6
    two_steps = [name for name, config in transport.RUNS.items() if config.steps == 2]
    assert two_steps and all(len(right_data[name]["losses"]) == 2 for name in two_steps)


def test_both_questions_are_measured_by_the_grader_outside_the_kernel():
    for name in ("3.1", "3.2"):
        assert QUESTIONS[name].run == "ppbook.assign.measure_transport"
    assert not hasattr(transport, "pipeline_gradients") and not hasattr(transport, "_DONE")


def test_a_result_stored_in_the_kernel_is_not_what_the_grader_reads(tmp_path, monkeypatch):
    """The notebook's kernel (this process) stores a right record for a stub's file in every
    place it can reach: the grader's measurement, a fresh process, still finds the stub."""
    stub = STUB
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_transport.py").write_text(stub)
    right = {"ok": True, "value": {"1f1b": {"losses": [1.0]}}}
    monkeypatch.setattr(transport, "measured", lambda *args: right["value"])
    for key in list(transport._CHECKED):
        transport._CHECKED[key] = right
    record = measure(tmp_path / "graded", stub)
    assert record["ok"] is False and record["type"] == "NotImplementedError"
    assert record["message"].startswith("write receive: what part needs")


def test_wrong_data_names_the_run_the_parameter_and_the_error(right_data):
    data = json.loads(json.dumps(right_data))
    run = "zb-v p=3"
    name = sorted(data[run]["grads"])[0]
    data[run]["grads"][name] = (2 * torch.tensor(data[run]["grads"][name])).tolist()
    got, line = score("3.2", data)
    assert got == 0 and line.startswith(f"{run}: the gradient of {name} is off by up to ")
    data = json.loads(json.dumps(right_data))
    data["1f1b p=3"]["params"][name] = (1.01 * torch.tensor(data["1f1b"]["params"][name])).tolist()
    got, line = score("3.2", data)
    assert got == 0 and line.startswith(f"1f1b p=3: the value after the step of {name} is off")
    del data["1f1b"]["grads"][name]
    assert score("3.2", data)[1] == f"1f1b: the parameter {name} got no gradient"
    data["1f1b"]["losses"][0] *= 1.5
    assert "1f1b, step 1: the pipeline's loss is" in score("3.1", data)[1]
    assert score("3.1", None) == (0, "the measurement gave no result for the run 1f1b")
    assert score("3.2", {"1f1b": {"grads": {name: "x"}, "params": {}}})[0] == 0


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_loss_gradient_or_parameter_that_is_not_finite_is_wrong(right_data, bad):
    """abs(nan - want) > tol is False: the old score let a NaN loss through."""
    data = json.loads(json.dumps(right_data))
    data["zb-v"]["losses"][1] = bad
    got, line = score("3.1", data)
    assert got == 0 and "zb-v, step 2: the pipeline's loss is" in line
    data = json.loads(json.dumps(right_data))
    name = next(key for key in sorted(data["1f1b"]["grads"]) if key.endswith("bias"))
    data["1f1b"]["grads"][name][0] = bad
    got, line = score("3.2", data)
    assert got == 0 and line == f"1f1b: the gradient of {name} holds NaN or an infinity"


PEER_FOR_TWO = """
from ppbook.dependencies import needs, sends

def receive(runner, part):
    stage, kind, microbatch = part
    for need in needs(runner.schedule, stage, kind, microbatch):
        if need.message is not None:
            identity = (stage, need.message, microbatch)
            if runner.schedule.stage_to_rank[need.stage] == runner.rank:
                return runner.local.pop(identity)
            return runner.messenger.recv(1 - runner.rank, identity)  # two ranks only
    return runner.inputs[microbatch].to(runner.device) if kind == "F" else None

def deliver(runner, part, result):
    stage, kind, microbatch = part
    sent = sends(runner.schedule, stage, kind, microbatch)
    if sent is not None:
        receiver, what = sent
        identity = (receiver, what, microbatch)
        if runner.schedule.stage_to_rank[receiver] == runner.rank:
            runner.local[identity] = result.detach()
        else:
            runner.messenger.send(result, 1 - runner.rank, identity)
"""

ACTIVATION_BACK = """
from ppbook.dependencies import needs, sends

KEPT = {}  # each stage's forward output, by micro-batch

def receive(runner, part):
    stage, kind, microbatch = part
    for need in needs(runner.schedule, stage, kind, microbatch):
        if need.message is not None:
            identity = (stage, need.message, microbatch)
            sender = runner.schedule.stage_to_rank[need.stage]
            if sender == runner.rank:
                return runner.local.pop(identity)
            return runner.messenger.recv(sender, identity)
    return runner.inputs[microbatch].to(runner.device) if kind == "F" else None

def deliver(runner, part, result):
    stage, kind, microbatch = part
    if kind == "F":
        KEPT[stage, microbatch] = result.detach()
    else:  # the activation goes back in place of its gradient (same shape)
        result = KEPT.pop((stage, microbatch), result)
    sent = sends(runner.schedule, stage, kind, microbatch)
    if sent is not None:
        receiver, what = sent
        identity = (receiver, what, microbatch)
        rank = runner.schedule.stage_to_rank[receiver]
        if rank == runner.rank:
            runner.local[identity] = result.detach()
        else:
            runner.messenger.send(result, rank, identity)
"""

STUB = """
def receive(runner, part):
    raise NotImplementedError("write receive: what part needs from another stage")

def deliver(runner, part, result):
    raise NotImplementedError("write deliver: send result to the stage that waits for it")
"""

CALLS_THE_RUNTIME = """
from ppbook.runtime.execute import StepRunner

def receive(runner, part):
    return StepRunner.receive(runner, part)

def deliver(runner, part, result):
    StepRunner.deliver(runner, part, result)
"""

HIDES_THE_CALL = """
import importlib

def receive(runner, part):
    execute = importlib.reload(importlib.import_module("ppbook.runtime." + "exe" + "cute"))
    return getattr(execute, "Step" + "Runner").__dict__["rec" + "eive"](runner, part)

def deliver(runner, part, result):
    type(runner).__dict__["del" + "iver"](runner, part, result)
"""


def test_a_peer_hard_coded_for_two_ranks_fails_on_three(tmp_path):
    record = measure(tmp_path / "peer", PEER_FOR_TWO)
    assert record["ok"] is False and record["function"] in ("receive", "deliver")
    assert record["type"] == "KeyError" and "(rank 2; the runs on 3 ranks: " in record["message"]


def test_the_activation_sent_back_in_place_of_its_gradient_fails_the_backward(tmp_path):
    record = measure(tmp_path / "activation", ACTIVATION_BACK)
    assert record["ok"], record
    got, line = score("3.2", record["value"])
    assert got == 0 and "the gradient of" in line
    got, line = score("3.1", record["value"])  # the first forward is right; the step is not
    assert got == 0 and ", step 2: the pipeline's loss is" in line
    for name in transport.RUNS:
        assert record["value"][name]["losses"][0] == pytest.approx(
            transport._reference(name).losses[0], rel=1e-9
        )


def test_the_runtime_s_own_receive_and_deliver_are_refused_by_the_scan_and_while_running(
    tmp_path,
):
    forbidden = FORBIDDEN["03_send_receive"]
    found = findings({"my_transport.py": CALLS_THE_RUNTIME}, forbidden)
    assert [name for _, name in found] == [
        "ppbook.runtime.execute.StepRunner.receive",
        "ppbook.runtime.execute.StepRunner.deliver",
    ]
    assert findings({"my_transport.py": runtime_s_own()}, forbidden) == []
    for source in (CALLS_THE_RUNTIME, HIDES_THE_CALL):  # the scan cannot see the second
        record = measure(tmp_path / f"runtime{len(source)}", source)
        assert record["ok"] is False and record["type"] == "Refused", record
        assert record["function"] in ("receive", "deliver")  # whichever rank is refused first
        assert "assignment 3 refuses the runtime's own StepRunner." in record["message"]
    assert findings({"my_transport.py": HIDES_THE_CALL}, forbidden) == []


def test_a_stub_a_missing_file_and_a_syntax_error_read_as_what_to_do(tmp_path):
    assert measure(tmp_path / "none", None) == {
        "ok": False,
        "type": "FileNotFoundError",
        "message": "no my_transport.py beside the notebook: run the notebook's cell "
        "write_transport(receive, deliver), which writes it",
        "function": None,
    }
    record = measure(tmp_path / "syntax", "def receive(runner, part)\n    pass\n")
    assert record["type"] == "SyntaxError" and "my_transport.py (line 1)" in record["message"]


def test_the_self_check_gives_the_grader_s_verdict(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_transport.py").write_text(STUB)
    verdict = check("A3.1", "my_transport")
    assert not verdict and verdict.message == (
        "receive is still to do: what part needs from another stage"
    )
    (tmp_path / "my_transport.py").write_text(CALLS_THE_RUNTIME)
    verdict = check("A3.2", "my_transport")
    assert not verdict and verdict.message.startswith(
        "my_transport gave an error: Refused: in receive: assignment 3 refuses the runtime"
    )


def test_a_transport_that_never_returns_is_stopped_at_the_deadline(tmp_path):
    loops = "def receive(runner, part):\n    while True:\n        pass\n\n" + (
        "def deliver(runner, part, result):\n    pass\n"
    )
    record = measure(tmp_path / "loops", loops, deadline=8)
    assert record["type"] == "TimeoutError" and "longer than 8 s" in record["message"]


def test_write_transport_writes_the_two_functions_where_the_grader_finds_them(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)

    def receive(runner, part):
        """A stand-in for the reader's receive."""
        return None

    def deliver(runner, part, result):
        """A stand-in for the reader's deliver."""

    path = transport.write_transport(receive, deliver)
    assert path == tmp_path / "my_transport.py"
    namespace = {}
    exec(path.read_text(), namespace)  # the module as the ranks import it
    assert namespace["receive"].__doc__ == receive.__doc__
    assert namespace["needs"] is needs and namespace["sends"] is sends
    with pytest.raises(ValueError, match="needs your function receive, got"):
        transport.write_transport(deliver, deliver)
