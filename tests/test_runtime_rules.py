"""The runtime takes its message rules from ppbook.dependencies, the one definition.

Which action receives which message and which one sends it (``needs`` and ``sends``) is
written once; the runtime's plan (which messages cross which ranks, in which order) and its
core loop (what each action receives and sends) must use it, not re-derive neighbours.
Checked on the source, and on what the plan says for every schedule.
"""

from __future__ import annotations

import ast
import inspect

import pytest

from ppbook.dependencies import ACTIVATION, GRADIENT
from ppbook.runtime import execute, plan
from ppbook.runtime.plan import incoming, used_by
from ppbook.schedules import SCHEDULES, build


def called_names(module) -> set[str]:
    tree = ast.parse(inspect.getsource(module))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


@pytest.mark.parametrize("module", [plan, execute], ids=["plan", "execute"])
def test_the_runtime_uses_the_dependency_rules(module):
    called = called_names(module)
    assert {"needs", "sends"} <= called, sorted(called)
    assert "neighbours" not in called, "neighbours re-derived outside ppbook.dependencies"


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_every_message_sent_is_used_once(name):
    """Each cross-rank message: one sender, one user, an activation for F, a gradient for
    B or I; counted against the schedule's own actions (no rule function involved)."""
    schedule = build(name, 2, 4)
    rank_of = schedule.stage_to_rank
    for rank in range(schedule.num_ranks):
        sent = sorted(i for messages in incoming(schedule, rank).values() for i in messages)
        used = sorted(i for _, i in used_by(schedule, rank))
        assert sent == used
        expected = []
        for row in schedule.actions:
            for step in row:
                for stage, kind, mb in step.parts:
                    route = schedule.route(mb)
                    k = route.index(stage)
                    if rank_of[stage] != rank:
                        continue
                    if kind == "F" and k > 0 and rank_of[route[k - 1]] != rank:
                        expected.append((stage, ACTIVATION, mb))
                    if kind in ("B", "I") and k < len(route) - 1 and rank_of[route[k + 1]] != rank:
                        expected.append((stage, GRADIENT, mb))
        assert used == sorted(expected)
