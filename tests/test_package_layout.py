"""The package's layout: modules with distinct names, the cost model in one folder, old
import paths kept, and imports that flow one way (no cycle, no upward import)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ppbook"

#: Modules moved this release: the old path gives the very module at the new one.
MOVED = {
    "ppbook.memory": "ppbook.cost_model.memory_bytes",
    "ppbook.flops": "ppbook.cost_model.flops",
    "ppbook.layer_time": "ppbook.cost_model.layer_time",
    "ppbook.gpu_cards": "ppbook.cost_model.gpu_cards",
    "ppbook.across_nodes": "ppbook.cost_model.across_nodes",
    "ppbook.step_work": "ppbook.cost_model.step_work",
    "ppbook.sizing": "ppbook.cost_model.sizing_search",
    "ppbook.sizing_costs": "ppbook.cost_model.search_costs",
    "ppbook.sizing_result": "ppbook.cost_model.search_result",
    "ppbook.sizing_step": "ppbook.cost_model.search_step",
    "ppbook.symbolic.memory": "ppbook.symbolic.activation_peaks",
    "ppbook.symbolic.bubble": "ppbook.symbolic.bubble_conventions",
    "ppbook.symbolic.sizing": "ppbook.symbolic.microbatch_target",
    "ppbook.views.memory": "ppbook.views.memory_panel",
    "ppbook.views.bubble": "ppbook.views.bubble_curves",
    "ppbook.widgets.bubble": "ppbook.widgets.bubble_explorer",
    "ppbook.widgets.sizing": "ppbook.widgets.sizing_explorer",
    "ppbook.schedule": "ppbook.pipeline_schedule",
    "ppbook.widgets.timeline": "ppbook.widgets.timeline_explorer",
    "ppbook.widgets.zero_bubble": "ppbook.widgets.zero_bubble_explorer",
}


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_alias(path: Path) -> bool:
    return "sys.modules[__name__] = importlib.import_module(" in path.read_text()


def _modules() -> dict[str, Path]:
    return {_name(p): p for p in PACKAGE.rglob("*.py") if not _is_alias(p)}


def _imports(name: str, path: Path, top_level_only: bool) -> set[str]:
    """The ppbook modules ``name`` imports (at module level only, if asked: imports
    inside functions run on use and cannot make an import cycle)."""
    tree = ast.parse(path.read_text())
    kept = [
        n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name == "__getattr__")
    ]
    nodes = kept if top_level_only else [n for k in kept for n in ast.walk(k)]
    found = set()
    for node in nodes:
        if isinstance(node, ast.If):  # `if TYPE_CHECKING:` blocks never run
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("ppbook")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("ppbook"):
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def _resolve(imported: set[str], modules: dict[str, Path]) -> set[str]:
    resolved = set()
    for name in imported:
        name = MOVED.get(name, name)
        if name in modules:
            resolved.add(name)
    return resolved


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_import_path_gives_the_very_module_at_the_new_one(old, new):
    code = (
        f"import importlib; a = importlib.import_module({old!r}); "
        f"b = importlib.import_module({new!r}); assert a is b, (a, b); "
        f"from {old} import __doc__ as d; assert d == b.__doc__"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_package_s_list_of_moves_is_this_release_s_and_maps_old_names_to_new():
    from ppbook.moved import MOVED as listed
    from ppbook.moved import current

    assert listed == MOVED
    assert current("ppbook.sizing.SCHEDULES") == "ppbook.cost_model.sizing_search.SCHEDULES"
    assert current("ppbook.sizing_costs.Hardware") == "ppbook.cost_model.search_costs.Hardware"
    assert current("ppbook.schedules.build") == "ppbook.schedules.build"


@pytest.mark.parametrize("stem", ["memory", "bubble", "sizing", "timeline", "zero_bubble"])
def test_the_names_that_were_shared_now_name_one_module_or_none(stem):
    holders = [n for n, p in _modules().items() if p.stem == stem]
    assert len(holders) <= 1, holders


def test_no_module_sits_beside_a_package_of_nearly_its_name():
    modules = _modules()
    packages = {n for n, p in modules.items() if p.name == "__init__.py"}
    beside = [n for n in modules if n + "s" in packages or n.rstrip("s") in packages - {n}]
    assert beside == []


def test_the_cost_model_is_one_folder():
    names = {p.stem for p in (PACKAGE / "cost_model").glob("*.py")}
    assert {"memory_bytes", "flops", "layer_time", "sizing_search", "across_nodes"} <= names


def test_modules_import_each_other_in_no_cycle():
    """Between modules (package ``__init__`` files, which re-export, left out), counting
    imports inside functions too: a lazy import that closes a cycle is still a cycle a
    reader has to untangle (runtime.worker and runtime.torch_engine had one)."""
    modules = {n: p for n, p in _modules().items() if p.name != "__init__.py"}
    graph = {n: _resolve(_imports(n, p, False), modules) - {n} for n, p in modules.items()}
    cycles, state = [], {}

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(trail[trail.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


@pytest.mark.parametrize(
    ("low", "high"),
    [
        ("ppbook.pytorch_csv", "ppbook.simulate"),
        ("ppbook.runtime", "ppbook.views"),
        ("ppbook.runtime", "ppbook.widgets"),
        ("ppbook.pipeline_schedule", "ppbook.simulate"),
        ("ppbook.simulate", "ppbook.cost_model"),
        ("ppbook.symbolic", "ppbook.views"),
    ],
)
def test_a_lower_layer_imports_nothing_from_a_higher_one(low, high):
    modules = _modules()
    offenders = []
    for name, path in modules.items():
        if name == low or name.startswith(low + "."):
            for imported in _resolve(_imports(name, path, False), modules):
                if imported == high or imported.startswith(high + "."):
                    offenders.append(f"{name} -> {imported}")
    assert offenders == []


def test_the_old_recording_path_still_gives_plot_comparison():
    from ppbook.runtime import recording
    from ppbook.views.comparison import plot_comparison

    assert recording.plot_comparison is plot_comparison
    assert "ppbook.views" not in importlib.import_module("ppbook.runtime.recording").__dict__
