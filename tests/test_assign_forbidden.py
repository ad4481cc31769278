"""Forbidden calls (ppbook.assign.forbidden): the ways a submission can reach what its
assignment asks it to write (aliases, getattr with a constant, star imports, an import
inside the function, import functions, exec, IPython magics, re-exports) are found, and
the legitimate code the assignments use is not. The self-check gives the grader's verdict.
"""

import pytest

import ppbook.schedules
from ppbook.assign.forbidden import canonical, findings, forbids, scan
from ppbook.exercises import check

FORBIDDEN = ("ppbook.schedules", "ppbook.pytorch_csv", "torch.distributed.pipelining")
STEP_RUNNER = ("ppbook.runtime.execute.StepRunner.receive",)

EVASIONS = {
    "alias": ("import ppbook.schedules as s\ns.one_f_one_b(4, 8)", "one_f_one_b"),
    "from import": ("from ppbook.schedules import one_f_one_b as mine\nmine(4, 8)", "one_f_one_b"),
    "star import": ("from ppbook.schedules import *\none_f_one_b(4, 8)", ""),
    "attribute chain": ("import ppbook\nppbook.schedules.one_f_one_b(4, 8)", "one_f_one_b"),
    "getattr": ("import ppbook\ngetattr(getattr(ppbook, 'sched' + 'ules'), 'gpipe')", "gpipe"),
    "import_module": (
        "import importlib\nimportlib.import_module('ppbook.schedules').zb_h1",
        "zb_h1",
    ),
    "import_module from": (
        "from importlib import import_module as load\nload('.schedules', 'ppbook').gpipe",
        "gpipe",
    ),
    "__import__": ("__import__('ppbook').schedules.one_f_one_b(4, 8)", "one_f_one_b"),
    "sys.modules": ("import sys\nsys.modules['ppbook.schedules'].gpipe", "gpipe"),
    "inside the function": (
        "def one_f_one_b_rows(p, m):\n    from ppbook import schedules\n"
        "    return schedules.one_f_one_b(p, m).to_strings()",
        "one_f_one_b",
    ),
    "assigned alias": ("import ppbook\nx = ppbook\ny = x.schedules\ny.gpipe(2, 4)", "gpipe"),
    "exec": ("exec('from ppbook.schedules import gpipe')", "gpipe"),
    "magic line": ("import ppbook\n%time ppbook.schedules.one_f_one_b(4, 8)\n!ls", "one_f_one_b"),
    "cell magic": ("%%capture out\nimport ppbook.schedules", ""),
    "shell string": (
        "import subprocess\nsubprocess.run(['python', '-c', 'import ppbook.schedules'])",
        "",
    ),
}


@pytest.mark.parametrize("name", EVASIONS)
def test_every_way_to_reach_a_forbidden_module_is_found(name):
    source, function = EVASIONS[name]
    lines = scan({"cell 5": source}, FORBIDDEN)
    assert len(lines) >= 1, name
    assert lines[0].startswith("cell 5 uses ppbook.schedules")
    assert lines[0].endswith(function)


@pytest.mark.parametrize(
    "source",
    ["from ppbook.schedules import one_f_one_b", "from ppbook.schedules import *\none_f_one_b"],
)
def test_a_re_export_is_found_where_its_object_is_defined(source):
    """ppbook.schedules re-exports one_f_one_b from ppbook.schedules.basic: forbidding the
    module that defines it forbids the name that re-exports it."""
    defined = ppbook.schedules.one_f_one_b.__module__
    assert defined != "ppbook.schedules"
    assert scan({"cell 1": source}, (defined,)) == [f"cell 1 uses {defined}.one_f_one_b"]


def test_legitimate_code_is_not_flagged():
    source = (
        "from ppbook.schedule import Schedule\nfrom ppbook.simulate import simulate\n"
        "import ppbook.schedule\nfrom ppbook.costs import Costs\n"
        "from ppbook.assign.score_schedules import DESIGN_COSTS, DESIGN_M, MEMORY_LIMIT\n"
        "def one_f_one_b_rows(p, m):\n"
        '    """Unlike ppbook.schedules.one_f_one_b, written here."""\n'
        "    print('compare with ppbook.schedules')\n"
        "    schedules = [[f'{r}F0'] for r in range(p)]\n"
        "    return ppbook.schedule.Schedule.from_strings(schedules).to_strings()\n"
        "simulate(Schedule.from_strings([['0F0', '0B0']]), Costs(F=1, B=2))\n"
    )
    assert scan({"cell 2": source}, FORBIDDEN) == []


def test_names_are_shared_across_cells_and_the_finding_names_the_cell_of_the_use():
    sources = {"cell 2": "import ppbook.runtime.execute as ex", "cell 4": "ex.StepRunner.receive"}
    assert scan(sources, STEP_RUNNER) == ["cell 4 uses ppbook.runtime.execute.StepRunner.receive"]
    method = "from ppbook.runtime.execute import StepRunner\nStepRunner.receive(runner, part)"
    assert scan({"my_transport.py": method}, STEP_RUNNER) == [
        "my_transport.py uses ppbook.runtime.execute.StepRunner.receive"
    ]
    assert scan({"cell 1": "from ppbook.runtime.execute import StepRunner"}, STEP_RUNNER) == []


@pytest.mark.parametrize(
    "source", ["def f(:\n", "%%bash\nfor x in (; do", "\x00", "(" * 200 + ")" * 200, "[" * 10**5]
)
def test_a_source_that_does_not_parse_is_skipped_not_a_crash(source):
    assert scan({"cell 1": source, "cell 2": "import ppbook.schedules"}, FORBIDDEN) == [
        "cell 2 uses ppbook.schedules"
    ]


def test_a_name_forbids_what_is_below_it_only():
    assert forbids(FORBIDDEN, "ppbook.schedules.basic.one_f_one_b")
    assert not forbids(FORBIDDEN, "ppbook.schedule.Schedule")
    assert not forbids(FORBIDDEN, "ppbook.schedules_extra")
    assert not forbids(FORBIDDEN, "ppbook")
    assert canonical("ppbook.assign.score_schedules.one_f_one_b") == (
        f"{ppbook.schedules.one_f_one_b.__module__}.one_f_one_b"
    )
    assert findings({"x": "import os"}, ()) == []


def test_the_self_check_refuses_a_forbidden_call_as_the_grader_does():
    from ppbook.schedules import one_f_one_b

    def one_f_one_b_rows(num_stages, num_microbatches):
        return one_f_one_b(num_stages, num_microbatches).to_strings()

    def hidden(num_stages, num_microbatches):  # through a helper of the notebook's own
        return helper(num_stages, num_microbatches)

    verdict = check("A2.1", one_f_one_b_rows)
    assert not verdict
    assert "uses ppbook.schedules" in repr(verdict)
    assert "which assignment 2 asks you to write yourself (0 of 4 points)" in repr(verdict)
    assert "uses ppbook.schedules" in repr(check("A2.3", hidden))


def helper(num_stages, num_microbatches):
    module = __import__("ppbook.schedules", fromlist=["gpipe"])
    return module.gpipe(num_stages, num_microbatches).to_strings()


def test_the_self_check_of_a_module_question_scans_the_module_file(tmp_path, monkeypatch):
    (tmp_path / "my_transport.py").write_text(
        "from ppbook.runtime.execute import StepRunner\n\n\n"
        "def receive(runner, part):\n    return StepRunner.receive(runner, part)\n\n\n"
        "def deliver(runner, part, result):\n    return StepRunner.deliver(runner, part, result)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    verdict = repr(check("A3.1", "my_transport"))
    assert "not yet: uses ppbook.runtime.execute.StepRunner.receive, which assignment 3" in verdict
