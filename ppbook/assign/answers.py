"""A question's answer as data: the code that collects it in the kernel, the reading of the
record it leaves (refusing what is not plain data) and the one line of feedback it earns
(used by :mod:`ppbook.assign.grade`).

A record is one JSON object: ``{"ok": true, "value": DATA}`` or ``{"ok": false, "type":
"ValueError", "message": "...", "function": "receive" or null}``, written by the kernel's
collect (:func:`collect_code`) or by a question's measuring module (``Question.run``).
:func:`read_answer` reads it without following a link and refuses, with one line, what no
plain answer holds: NaN or an infinity, an integer of more digits than Python converts,
nesting too deep to read, more than :data:`MAX_ANSWER_BYTES`.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from ppbook.assign.kernel import Outcome, first_line
from ppbook.assign.report import FEEDBACK_CHARS, QuestionResult, clean

MAX_ANSWER_BYTES = 16 * 2**20
_STUB = re.compile(r"^write ([\w.]+)(?::\s*(.*))?$", re.DOTALL)
NOT_FINITE = "the answer holds NaN or an infinity: give finite numbers"
HUGE = "the answer holds an integer of over 4300 digits"


class _NotFinite(ValueError):
    pass


def collect_code(expression: str, answer: Path, work: Path) -> str:
    """Code for the kernel: evaluate ``expression`` and write its record to ``answer``."""
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
    except ValueError as exc:
        text = json.dumps({{"refused": {HUGE!r}}} if "integer string" in str(exc) else
                          {{"refused": "the answer is not plain data: " + str(exc)[:150]}})
    except (TypeError, RecursionError) as exc:
        text = json.dumps({{"ok": False, "type": "TypeError", "function": None,
                           "message": "the answer is not plain data (JSON): " + str(exc)[:200]}})
    with open({str(answer)!r}, "w") as file:
        file.write(text)
_ppbook_collect()
del _ppbook_collect
"""


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e400 reads as an infinity
        raise _NotFinite(text)
    return number


def _no_constant(text: str) -> float:
    raise _NotFinite(text)


def read_answer(answer: Path) -> dict | None:
    """The record at ``answer``; None if there is none (or it is a link, or not a JSON
    object); ``{"refused": LINE}`` for data that is no plain answer."""
    try:
        descriptor = os.open(answer, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as file:
        data = file.read(MAX_ANSWER_BYTES + 1)
    if len(data) > MAX_ANSWER_BYTES:
        return {"refused": f"the answer is over {MAX_ANSWER_BYTES // 2**20} MiB of data"}
    try:
        record = json.loads(data, parse_constant=_no_constant, parse_float=_finite)
    except _NotFinite:
        return {"refused": NOT_FINITE}
    except RecursionError:
        return {"refused": "the answer is nested too deeply to read"}
    except UnicodeDecodeError:
        return None
    except ValueError as error:
        if "integer string conversion" in str(error):
            return {"refused": HUGE}
        return None  # not JSON: the record was not written by the collect
    return record if isinstance(record, dict) else None


def explain(record: dict) -> str:
    """One line of feedback for an answer that raised (``record``: type, message, function)."""
    kind = clean(record.get("type", "Error"), 60) or "Error"
    message = clean(record.get("message", ""), FEEDBACK_CHARS)
    function = record.get("function")
    function = clean(function, 60) if function else None
    if kind == "NotImplementedError":
        stub = _STUB.match(message)
        if stub:
            todo = f"{stub.group(1)} is still to do"
            return f"{todo}: {stub.group(2)}" if stub.group(2) else todo
        return f"{function or 'a function'} is still to do" + (f": {message}" if message else "")
    where = f"{function} raised " if function else ""
    return clean(f"{where}{kind}: {message}" if message else f"{where}{kind}")


def score(question, data) -> tuple[float, str]:
    """``question.score(data)``, clamped to the question's points; an error there (data of
    the wrong shape) is 0 with one line."""
    try:
        got, feedback = question.score(data)
        got = float(got)
    except Exception as exc:  # noqa: BLE001 (the data was not what the question expects)
        return 0.0, clean(f"the answer could not be checked: {type(exc).__name__}: {exc}")
    if not math.isfinite(got):
        return 0.0, clean(f"the answer could not be checked: its score is {got}")
    return min(max(got, 0.0), float(question.max_score)), clean(feedback)


def result(question, points: float, feedback: str) -> QuestionResult:
    return QuestionResult(str(question.name), points, float(question.max_score), feedback)


def judge(question, outcome: Outcome, record: dict | None, source: str = "") -> QuestionResult:
    """The result of one question from how its collect (or measurement) ran and the record
    it left; ``source`` names where the answer came from (default: the collect's line)."""
    source = source or f"`{first_line(question.collect)}`"
    if outcome.status in ("timeout", "stuck"):
        function = (record or {}).get("function") or source
        return result(question, 0.0, f"{function} ran out of time ({question.timeout:g} s)")
    if record is None:
        why = outcome.error or f"the kernel {outcome.status}"
        return result(question, 0.0, f"no answer came back from {source}: {why}")
    if "refused" in record:
        return result(question, 0.0, record["refused"])
    if not record.get("ok"):
        return result(question, 0.0, explain(record))
    points, feedback = score(question, record.get("value"))
    return result(question, points, feedback)
