"""Grade a submitted notebook: run it in a fresh, walled-in kernel, collect each question's
answer as plain data, and score that data outside the kernel (issue 10, "The grader").

:func:`grade` copies the submission's folder to a fresh temporary folder (without the other
notebooks in it), runs every code cell there in a new kernel (:class:`ppbook.assign.kernel.
Kernel`) inside the strongest sandbox this machine allows (:mod:`ppbook.assign.sandbox`),
with a limit for the whole notebook and one per cell, then evaluates each question's
``collect`` expression in that kernel (each with its own time limit), kills everything the
kernel started and removes the folder. Nothing the submission prints or returns is trusted
for more than data: each question's ``score`` runs here, in the grader, and re-checks it.

A question is any object with ``name``, ``max_score``, ``collect`` (the source of one
expression giving JSON data), ``score`` (data -> (score, one line of feedback)) and
``timeout`` (seconds for ``collect``), as :mod:`ppbook.assign.questions` defines them.
Feedback is one line: an unfinished stub (``NotImplementedError("write f: what")``) reads
"f is still to do: what"; another exception "f raised ValueError: ..."; a cell that ran out
of time is named by its first line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ppbook.assign.kernel import Kernel, Outcome, first_line
from ppbook.assign.processes import become_subreaper
from ppbook.assign.sandbox import Limits, choose
from ppbook.checks import one_line

DEFAULT_TIMEOUT = 300.0
"""Seconds for all the notebook's cells together (``--timeout``)."""
DEFAULT_CELL_TIMEOUT = 120.0
"""Seconds for one cell."""
MAX_COPY_BYTES = 512 * 2**20
"""The largest submission folder the grader copies."""
MAX_ANSWER_BYTES = 16 * 2**20
FEEDBACK_CHARS = 200
"""The longest line of feedback (:func:`ppbook.checks.one_line`)."""
_STUB = re.compile(r"^write ([\w.]+)(?::\s*(.*))?$", re.DOTALL)


@dataclass
class QuestionResult:
    name: str
    score: float
    max_score: float
    feedback: str


@dataclass
class Report:
    """A graded notebook: the total, one result per question, the isolation that was in force
    and notes on the run (cells that ran out of time, a kernel that died)."""

    notebook: str
    assignment: str
    questions: list[QuestionResult]
    isolation: str
    notes: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return sum(q.score for q in self.questions)

    @property
    def max_score(self) -> float:
        return sum(q.max_score for q in self.questions)

    def as_dict(self) -> dict:
        """The ``--json`` object."""
        return {
            "notebook": self.notebook,
            "assignment": self.assignment,
            "score": self.score,
            "max_score": self.max_score,
            "questions": [asdict(q) for q in self.questions],
            "isolation": self.isolation,
            "notes": list(self.notes),
        }

    def text(self) -> str:
        """The report a person reads: one line per question, the total, the isolation."""
        width = max((len(q.name) for q in self.questions), default=0)
        lines = [f"{self.notebook} ({self.assignment}): {self.score:g} / {self.max_score:g}"]
        for q in self.questions:
            lines.append(f"  {q.name:<{width}}  {q.score:g}/{q.max_score:g}  {q.feedback}")
        lines += [f"  note: {note}" for note in self.notes]
        lines.append(f"  isolation: {self.isolation}")
        return "\n".join(lines)


def assignment_of(notebook: dict, path: Path) -> str:
    """The assignment a notebook answers: its ``metadata.ppbook.assignment`` (written by
    ``ppbook assign build``), else the file's stem."""
    name = notebook.get("metadata", {}).get("ppbook", {}).get("assignment")
    return name if isinstance(name, str) and name else path.stem


def _read(path: Path) -> dict:
    if path.suffix != ".ipynb" or not path.is_file():
        raise ValueError(f"a submission is an .ipynb file, got {str(path)!r}")
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path.name} is not a notebook (JSON): {exc}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise ValueError(f"{path.name} is not a notebook: it has no list of cells")
    return notebook


def _copy(folder: Path, notebook: Path, into: Path) -> None:
    """Copy ``folder`` (without other notebooks and checkpoints) to ``into``."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n in (".ipynb_checkpoints", "__pycache__", ".git")}
        skipped |= {n for n in names if _special(os.path.join(directory, n))}
        if Path(directory) == folder:
            skipped |= {n for n in names if n.endswith(".ipynb") and n != notebook.name}
        return skipped

    total = 0
    for directory, _, files in os.walk(folder):
        total += sum(os.lstat(os.path.join(directory, f)).st_size for f in files)
        if total > MAX_COPY_BYTES:
            raise ValueError(
                f"{folder} holds over {MAX_COPY_BYTES // 2**20} MiB; grade a folder of "
                "submissions only"
            )
    shutil.copytree(folder, into, symlinks=True, ignore=ignore)


def _special(path: str) -> bool:
    """A FIFO, socket or device: reading one could block the copy for ever."""
    mode = os.lstat(path).st_mode
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode))


def _own(root: Path, uid: int) -> None:
    for directory, dirs, files in os.walk(root):
        os.chown(directory, uid, uid)
        for name in dirs + files:
            os.lchown(os.path.join(directory, name), uid, uid)


def _collect_code(expression: str, answer: Path, work: Path) -> str:
    return f"""def _ppbook_collect():
    import json, traceback
    try:
        value = ({expression}
        )
        record = {{"ok": True, "value": value}}
    except BaseException as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if not f.name.startswith("_ppbook_")
                  and ("ipykernel_" in f.filename or f.filename.startswith({str(work)!r}))]
        record = {{"ok": False, "type": type(exc).__name__, "message": str(exc)[:300],
                  "function": frames[-1].name if frames else None}}
    try:
        text = json.dumps(record)
    except (TypeError, ValueError) as exc:
        text = json.dumps({{"ok": False, "type": "TypeError", "function": None,
                           "message": "the answer is not plain data (JSON): " + str(exc)[:200]}})
    with open({str(answer)!r}, "w") as file:
        file.write(text)
_ppbook_collect()
del _ppbook_collect
"""


def _read_answer(answer: Path) -> dict | None:
    try:
        descriptor = os.open(answer, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as file:
        data = file.read(MAX_ANSWER_BYTES + 1)
    try:
        record = json.loads(data) if len(data) <= MAX_ANSWER_BYTES else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def explain(record: dict) -> str:
    """One line of feedback for an answer that raised (``record``: type, message, function)."""
    kind, message = record.get("type", "Error"), one_line(record.get("message", ""), FEEDBACK_CHARS)
    function = record.get("function")
    if kind == "NotImplementedError":
        stub = _STUB.match(message)
        if stub:
            todo = f"{stub.group(1)} is still to do"
            return f"{todo}: {stub.group(2)}" if stub.group(2) else todo
        return f"{function or 'a function'} is still to do" + (f": {message}" if message else "")
    where = f"{function} raised " if function else ""
    return f"{where}{kind}: {message}" if message else f"{where}{kind}"


def _score(question, data) -> tuple[float, str]:
    try:
        score, feedback = question.score(data)
    except Exception as exc:  # the data was not what the question expects
        return 0.0, one_line(
            f"the answer could not be checked: {type(exc).__name__}: {exc}", FEEDBACK_CHARS
        )
    score = min(max(float(score), 0.0), float(question.max_score))
    return score, one_line(feedback, FEEDBACK_CHARS)


def _run_cells(kernel: Kernel, cells: list[dict], timeout: float, cell_timeout: float):
    """Run the code cells; returns (notes, why the notebook stopped or None)."""
    notes: list[str] = []
    deadline = time.monotonic() + timeout
    for number, cell in enumerate(cells, start=1):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") != "code" or not source.strip():
            continue
        where = f"cell {number} (`{first_line(source)}`)"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            notes.append(f"the notebook's {timeout:g} s ran out before {where}")
            break
        limit = min(cell_timeout, remaining)
        outcome = kernel.run(source, limit)
        if outcome.status == "timeout":
            notes.append(f"{where} ran out of time ({limit:g} s) and was interrupted")
        elif outcome.status == "stuck":
            return notes, f"{where} ran out of time ({limit:g} s) and did not stop"
        elif outcome.status == "died":
            return notes, f"the kernel ended in {where}"
    return notes, None


def _question(kernel: Kernel, question, answer: Path) -> tuple[Outcome, dict | None]:
    answer.unlink(missing_ok=True)
    outcome = kernel.run(
        _collect_code(question.collect, answer, kernel.work), float(question.timeout)
    )
    return outcome, _read_answer(answer)


def grade(
    path: str | os.PathLike,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    cell_timeout: float = DEFAULT_CELL_TIMEOUT,
    questions: list | None = None,
    isolation: str | None = None,
    limits: Limits | None = None,
) -> Report:
    """Run and score the notebook at ``path`` (see the module's docstring). ``questions``
    default to the assignment's (:func:`ppbook.assign.questions.questions_for`);
    ``isolation`` forces a sandbox mode (:data:`ppbook.assign.sandbox.MODES`)."""
    path = Path(path).resolve()
    notebook = _read(path)
    if timeout <= 0 or cell_timeout <= 0:
        raise ValueError(f"time limits must be > 0 s, got {timeout!r} and {cell_timeout!r}")
    assignment = assignment_of(notebook, path)
    if questions is None:
        from ppbook.assign.questions import questions_for

        questions = questions_for(assignment)
    collects = sum(float(q.timeout) for q in questions)
    limits = limits or Limits(cpu_seconds=int(timeout + collects + 60))
    root = Path(tempfile.mkdtemp(prefix="ppbook-grade-"))
    try:
        work, scratch = root / "submission", root / "scratch"
        _copy(path.parent, path, work)
        for folder in (scratch / "home", scratch / "tmp"):
            folder.mkdir(parents=True)
        sandbox = choose(isolation)
        if sandbox.uid is not None:
            _own(root, sandbox.uid)
        become_subreaper()
        results = []
        with Kernel(sandbox, work, scratch, limits) as kernel:
            kernel.start()
            notes, stopped = _run_cells(kernel, notebook["cells"], timeout, cell_timeout)
            for question in questions:
                if stopped:
                    results.append(_result(question, 0.0, f"not graded: {stopped}"))
                    continue
                outcome, record = _question(kernel, question, scratch / "tmp" / "answer.json")
                results.append(_judge(question, outcome, record))
                if outcome.status in ("stuck", "died"):
                    stopped = f"the kernel stopped while grading question {question.name}"
                    notes.append(stopped)
        return Report(path.name, assignment, results, sandbox.describe(), notes)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _result(question, score: float, feedback: str) -> QuestionResult:
    return QuestionResult(str(question.name), score, float(question.max_score), feedback)


def _judge(question, outcome: Outcome, record: dict | None) -> QuestionResult:
    collect = f"`{first_line(question.collect)}`"
    if outcome.status in ("timeout", "stuck"):
        function = (record or {}).get("function") or collect
        return _result(question, 0.0, f"{function} ran out of time ({question.timeout:g} s)")
    if record is None:
        why = outcome.error or f"the kernel {outcome.status}"
        return _result(
            question, 0.0, one_line(f"no answer came back from {collect}: {why}", FEEDBACK_CHARS)
        )
    if not record.get("ok"):
        return _result(question, 0.0, explain(record))
    score, feedback = _score(question, record.get("value"))
    return _result(question, score, feedback)
