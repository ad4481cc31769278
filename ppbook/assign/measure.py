"""Questions the grader measures itself, outside the submission's kernel (``Question.run``;
used by :mod:`ppbook.assign.grade`).

After the notebook's cells and the kernel's questions, with the kernel closed, each
distinct ``run`` module is started once, behind the same walls as the kernel
(:func:`ppbook.assign.kernel.run_walled`), as ``python -I -m RUN ANSWER_PATH`` with the
submission's copy as its current folder; its time limit is the largest ``timeout`` of the
questions naming it. It leaves one record at ANSWER_PATH (in the scratch folder, outside the
copy), read like the kernel's (:func:`ppbook.assign.answers.read_answer`), and every
question naming the module is scored from that one record: a stub reads as work still to
do, an error as one line, no record as the measurement's own last line of output.

What the notebook wrote into its copy (assignment 3's ``my_transport.py``) lives, in the
namespace modes, on a ``tmpfs`` that ends with the kernel. So before the kernel closes,
:func:`hand_back_code` has it copy the regular files of its folder into the scratch folder,
and :func:`measured_copy` builds the measurement's copy from them, again without links or
special files (the kernel's code may have put some there), owned by the sandbox uid.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ppbook.assign.answers import judge, read_answer
from ppbook.assign.report import QuestionResult
from ppbook.assign.sandbox import Limits, Sandbox
from ppbook.assign.submission import copy_submission, own

HAND_BACK_SECONDS = 60.0
"""Seconds the kernel has to copy its folder for the measurement."""


def hand_back_code(target: Path) -> str:
    """Code for the kernel: copy the regular files of its folder (its current folder, not
    following links) to ``target``."""
    return f"""def _ppbook_hand_back():
    import os, shutil
    for directory, folders, files in os.walk("."):
        folders[:] = [f for f in folders if not os.path.islink(os.path.join(directory, f))
                      and f not in ("__pycache__", ".ipynb_checkpoints")]
        os.makedirs(os.path.join({str(target)!r}, directory), exist_ok=True)
        for name in files:
            path = os.path.join(directory, name)
            if os.path.isfile(path) and not os.path.islink(path):
                shutil.copyfile(path, os.path.join({str(target)!r}, path))
_ppbook_hand_back()
del _ppbook_hand_back
"""


def measured_copy(handed: Path, notebook: str, into: Path, work: Path, uid: int | None) -> Path:
    """The folder the measurement runs in: what the kernel handed back in ``handed`` (copied
    to ``into`` without links or special files), or the submission's copy ``work`` if it
    handed back nothing."""
    if not handed.is_dir() or handed.is_symlink():
        return work
    copy_submission(handed, Path(notebook), into)
    if uid is not None:
        own(into, uid)
    return into


def measured(
    questions: list,
    sandbox: Sandbox,
    work: Path,
    scratch: Path,
    limits: Limits,
) -> dict[int, QuestionResult]:
    """The result of each question with a ``run`` module, by its index in ``questions``."""
    from ppbook.assign import kernel

    modules: dict[str, list[int]] = {}
    for index, question in enumerate(questions):
        if getattr(question, "run", ""):
            modules.setdefault(question.run, []).append(index)
    results: dict[int, QuestionResult] = {}
    for number, (module, indices) in enumerate(modules.items()):
        answer = scratch / "tmp" / f"measured-{number}.json"
        answer.unlink(missing_ok=True)
        timeout = max(float(questions[i].timeout) for i in indices)
        argv = [sys.executable, "-I", "-m", module, str(answer)]
        outcome = kernel.run_walled(sandbox, work, scratch, limits, argv, timeout)
        record = read_answer(answer)
        for index in indices:
            question = questions[index]
            results[index] = judge(question, outcome, record, f"the measurement {module}")
    return results
