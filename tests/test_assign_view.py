"""The sandbox's view of the file system (ppbook.assign.view.mounts): the private /tmp is
mounted before anything below it, so an interpreter or checkout that lives in /tmp (a CI
clone, a virtual environment there) is shown on top of it instead of hidden under it."""

from pathlib import Path

from ppbook.assign import view


def test_the_private_tmp_comes_before_every_folder_shown_below_it(tmp_path, monkeypatch):
    venv = tmp_path / "clone" / ".venv"
    package = tmp_path / "clone" / "ppbook"
    for folder in (venv, package):
        folder.mkdir(parents=True)
    monkeypatch.setattr(view, "python_folders", lambda: (str(venv), str(package)))
    work, scratch = tmp_path / "grade" / "submission", tmp_path / "grade" / "scratch"
    steps = view.mounts(work, scratch, copy_bytes=2**20, tmp_bytes=2**20)
    targets = [step.target for step in steps]
    tmp = targets.index("/tmp")
    below = [i for i, t in enumerate(targets) if Path(t).is_relative_to("/tmp") and t != "/tmp"]
    assert {str(venv), str(package), str(work), str(scratch)} <= {targets[i] for i in below}
    assert all(i > tmp for i in below), targets
    for index, step in enumerate(steps):  # every parent before its children
        for earlier in targets[index + 1 :]:
            assert not Path(step.target).is_relative_to(earlier) or step.target == earlier
