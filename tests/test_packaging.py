"""The project as a reader meets it: one dependency list, clean notebooks, a light import."""

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"pytorch": "torch", "python-build": "build"}  # conda-forge names of PyPI packages


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[]", requirement.strip(), maxsplit=1)[0].lower()


def test_environment_yml_names_the_same_dependencies_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r) for r in project["dependencies"]}
    wanted |= {_name(r) for r in project["optional-dependencies"]["test"]}
    wanted |= {_name(r) for r in project["optional-dependencies"]["site"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip_section  # installs this package itself
    from_pip = {_name(d) for d in pip_section if d != "-e ."}  # not on conda-forge
    named = {CONDA_NAMES.get(_name(d), _name(d)) for d in conda} - {"python", "pip"}
    assert named | from_pip == wanted


def test_torch_requirement_is_a_range_that_admits_2_13():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (torch,) = [r for r in project["dependencies"] if _name(r) == "torch"]
    assert "==" not in torch
    from packaging.specifiers import SpecifierSet

    assert "2.13.0" in SpecifierSet(torch[len("torch") :])


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "the book has no chapters"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_are_stored_without_outputs(path):
    notebook = json.loads(path.read_text())
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        assert not cell.get("outputs"), f"{path.name} cell {index} has stored outputs"
        assert cell.get("execution_count") is None, f"{path.name} cell {index} has a count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_import_from_the_package_without_path_hacks(path):
    source = "\n".join(
        "".join(c["source"])
        for c in json.loads(path.read_text())["cells"]
        if c["cell_type"] == "code"
    )
    assert "sys.path" not in source and "%run" not in source
    assert not re.search(r"from \S+ import \*", source)


@pytest.mark.parametrize(
    "module",
    [
        "ppbook",
        "ppbook.schedules",
        "ppbook.simulate",
        "ppbook.timeline",
        "ppbook.symbolic",
        "ppbook.cli",
    ],
)
def test_light_modules_import_neither_torch_nor_matplotlib(module):
    code = (
        f"import sys, {module}; heavy = [m for m in ('torch', 'matplotlib') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_subcommand_loads_only_its_own_layer(tmp_path):
    # ppbook simulate runs without the sizing search, the grader or the runtime.
    code = (
        "import sys\nfrom ppbook.cli import main\n"
        "main(['simulate', '--schedule', '1f1b', '--stages', '2', '--microbatches', '2', "
        "'--json'])\n"
        "print([m for m in ('ppbook.sizing', 'ppbook.assign', 'ppbook.cli.size', "
        "'ppbook.cli.assign', 'ppbook.cli.run', 'torch') if m in sys.modules], file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("{") and out.stderr.strip() == "[]"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make book" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_jupyterlab_has_the_widget_manager_so_sliders_render():
    jupyter = Path(sys.executable).with_name("jupyter")
    if not jupyter.exists():
        pytest.fail(f"no jupyter next to {sys.executable}: install the project with its deps")
    out = subprocess.run(
        [str(jupyter), "labextension", "list"],
        capture_output=True,
        text=True,
        check=True,
        env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
    )
    listing = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    line = next(li for li in listing.splitlines() if "@jupyter-widgets/jupyterlab-manager" in li)
    assert "enabled" in line and "OK" in line
