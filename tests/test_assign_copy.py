"""What the grader copies for a submission (ppbook.assign.submission.copy_submission): the
notebook's own folder when it is the only notebook there; only the notebook when the folder
holds a class's submissions, so that no kernel sees another student's files."""

from pathlib import Path

from ppbook.assign.submission import copy_submission


def _notebook(path: Path) -> Path:
    path.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    return path


def test_a_notebook_alone_in_its_folder_brings_its_files(tmp_path):
    folder = tmp_path / "alice"
    folder.mkdir()
    notebook = _notebook(folder / "alice.ipynb")
    (folder / "helper.py").write_text("X = 1\n")
    copy_submission(folder, notebook, tmp_path / "copy")
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == ["alice.ipynb", "helper.py"]


def test_in_a_class_folder_only_the_notebook_is_copied(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    alice = _notebook(folder / "alice.ipynb")
    _notebook(folder / "bob.ipynb")
    (folder / "bob_transport.py").write_text("SECRET = 'bob'\n")
    (folder / "scores.csv").write_text("notebook,score\nbob.ipynb,10\n")
    copy_submission(folder, alice, tmp_path / "copy")
    assert [p.name for p in (tmp_path / "copy").iterdir()] == ["alice.ipynb"]
    assert (tmp_path / "copy" / "alice.ipynb").read_bytes() == alice.read_bytes()
