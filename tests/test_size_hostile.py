"""``ppbook size`` on hostile input: every numeric flag with NaN, infinity, -1, 0, 1e300,
10^12 and 10^400, and the searches that once ended in a traceback, a hang or invalid JSON
(issue 18, item 6).

Each case runs in a child process of a driver process (this file run as a script): the
child has its address space capped (:data:`MEMORY_CAP`) and is killed after
:data:`CASE_TIMEOUT_S` seconds, so a case that hangs or exhausts memory fails here instead
of taking the test run down. A case passes when it ends in time with exit status 0 or 2, no
traceback, at most one error line (``ppbook size: error: ...``, after argparse's usage when
argparse refuses the value) and, with ``--json``, standard JSON (no ``NaN``/``Infinity``).
Values that make no sense for a flag must be refused (exit 2) and the message must name
the flag.

Before this file's fixes (ppbook 0.2.0): ``--gpus 10^12`` ran past the timeout,
``--gpus``/``--global-batch``/``--layers``/... 10^400 ended in OverflowError tracebacks,
``--gpu-memory-gb``/``--gpu-tflops``/``--intra-node-gbps``/``--inter-node-gbps`` 1e300 and
10^400 printed ``Infinity`` or ran (1e300 GB accepted), and a search whose candidates went
beyond the simulator's limits ended with that candidate's error.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

CASE_TIMEOUT_S = 30.0
"""Most seconds one case may take (the searches asked for answer in a few seconds)."""
MEMORY_CAP = 3 * 2**30
"""The address space of each case's process, bytes (RLIMIT_AS)."""
BASE = {
    "--layers": "4",
    "--hidden": "768",
    "--heads": "12",
    "--vocab": "1000",
    "--seq-len": "64",
    "--global-batch": "8",
    "--gpus": "8",
}
"""A small job that answers in about a second; each case replaces one flag."""
HOSTILE = ["nan", "inf", "-1", "0", "1e300", str(10**12), "1" + "0" * 400]
"""The values every numeric flag is given."""
ZERO_ALLOWED = {"--top", "--experts", "--shared-experts", "--dense-layers"}
"""Flags for which 0 is a meaningful value (``--top 0`` ranks all; no experts)."""
LARGE_ALLOWED = {"--global-batch", "--top", "--gpus-per-node", "--layers", "--vocab"}
"""Flags for which 10^12 is a value to answer (maybe 'nothing fits'), not to refuse."""


def numeric_flags() -> list[str]:
    """Every option of ``ppbook size`` that takes a number (read from the parser itself,
    so a new flag is tested as soon as it exists)."""
    from ppbook.cli import size as size_cli

    parser = size_cli.add_parser(argparse.ArgumentParser().add_subparsers())
    flags = []
    for action in parser._actions:
        if not action.option_strings or action.nargs is not None or action.choices:
            continue
        if action.type is None or action.type is str or action.const is not None:
            continue
        flag = max(action.option_strings, key=len)
        if flag not in ("--model",):
            flags.append(flag)
    return flags


def cases() -> list[tuple[str, str]]:
    return [(flag, value) for flag in numeric_flags() for value in HOSTILE]


def argv_of(flag: str, value: str, json_out: bool = True) -> list[str]:
    argv = [arg for k, v in {**BASE, flag: value}.items() for arg in (k, v)]
    return ["size", *argv, *(["--json"] if json_out else [])]


# ----- the driver: runs each case in a forked, capped child ---------------------------


def _run_child(argv: list[str], out_path: str, err_path: str) -> None:
    """In the child: cap memory, send output to files, run the command, exit with its status."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    out = os.open(out_path, os.O_WRONLY)
    err = os.open(err_path, os.O_WRONLY)
    os.dup2(out, 1)
    os.dup2(err, 2)
    status = 1
    try:
        from ppbook.cli import main

        status = main(argv)
    except SystemExit as exc:  # argparse's refusals
        status = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - any other ending is what the test reports
        import traceback

        traceback.print_exc()
        status = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def drive(argvs: list[list[str]]) -> list[dict]:
    """Each argv in a forked child, at most :data:`CASE_TIMEOUT_S` seconds each."""
    import ppbook.cli.size  # noqa: F401 - loaded once, before the children fork

    results = []
    with tempfile.TemporaryDirectory() as folder:
        for k, argv in enumerate(argvs):
            out_path, err_path = (str(Path(folder) / f"{k}.{n}") for n in ("out", "err"))
            Path(out_path).write_bytes(b"")
            Path(err_path).write_bytes(b"")
            start = time.monotonic()
            pid = os.fork()
            if pid == 0:
                _run_child(argv, out_path, err_path)
            status, timed_out = None, False
            while status is None:
                done, code = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = os.waitstatus_to_exitcode(code)
                elif time.monotonic() - start > CASE_TIMEOUT_S:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    timed_out = True
                    status = -9
                else:
                    time.sleep(0.01)
            results.append(
                {
                    "argv": argv,
                    "status": status,
                    "timed_out": timed_out,
                    "seconds": time.monotonic() - start,
                    "out": Path(out_path).read_text(errors="replace")[-200_000:],
                    "err": Path(err_path).read_text(errors="replace")[-5_000:],
                }
            )
    return results


def run_cases(argvs: list[list[str]]) -> list[dict]:
    """The driver in a fresh Python process (nothing of pytest's process is forked)."""
    budget = CASE_TIMEOUT_S * len(argvs) + 60
    done = subprocess.run(
        [sys.executable, __file__],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=budget,
        check=True,
    )
    return json.loads(done.stdout)


# ----- what a case must show ----------------------------------------------------------


def strict_json(text: str):
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def problems_of(result: dict, *, must_refuse: bool, flag: str | None = None) -> list[str]:
    """What is wrong with one case's ending (an empty list when nothing is)."""
    found = []
    err_lines = result["err"].strip().splitlines()
    if result["timed_out"]:
        found.append(f"still running after {CASE_TIMEOUT_S:g} s")
    elif result["status"] not in (0, 2):
        found.append(f"exit status {result['status']}: {result['err'][-300:]!r}")
    if "Traceback" in result["err"]:
        found.append("a traceback")
    errors = [line for line in err_lines if "error" in line]
    if len(errors) > 1 or (errors and not err_lines[-1].startswith("ppbook size: error: ")):
        found.append(f"not one error line: {err_lines[-3:]!r}")
    if must_refuse:
        if result["status"] != 2:
            found.append(f"accepted (exit {result['status']})")
        elif (
            flag
            and flag not in result["err"]
            and flag.lstrip("-").replace("-", "_") not in (result["err"])
        ):
            found.append(f"the refusal does not name {flag}: {err_lines[-1:]!r}")
    if "--json" in result["argv"] and result["out"].strip():
        try:
            strict_json(result["out"])
        except ValueError as exc:
            found.append(f"stdout is not standard JSON ({exc})")
    return found


def must_refuse(flag: str, value: str) -> bool:
    if value == "0":
        return flag not in ZERO_ALLOWED
    if value == str(10**12):
        return flag not in LARGE_ALLOWED
    return True


@pytest.fixture(scope="module")
def flag_results():
    todo = cases()
    results = run_cases([argv_of(flag, value) for flag, value in todo])
    return dict(zip(todo, results, strict=True))


@pytest.mark.parametrize("value", HOSTILE, ids=["nan", "inf", "-1", "0", "1e300", "1e12", "1e400"])
def test_every_numeric_flag_answers_hostile_values_in_one_line(flag_results, value):
    failures = []
    for (flag, given), result in flag_results.items():
        if given != value:
            continue
        for problem in problems_of(result, must_refuse=must_refuse(flag, value), flag=flag):
            failures.append(f"{flag} {value[:12]}: {problem}")
    assert not failures, "\n".join(failures)


def test_the_numeric_flags_tested_include_the_ones_the_issue_names():
    assert {"--gpus", "--gpu-memory-gb", "--global-batch", "--microbatch-size"} <= set(
        numeric_flags()
    )


# ----- the searches the issue names -------------------------------------------------------


def test_candidates_beyond_the_simulator_s_limits_are_rejected_and_the_search_goes_on():
    # 4,000,000 samples on 8 GPUs: with b = 1 a replica runs 500,000 micro-batches, beyond
    # the simulator's 100,000; b = 8 and dp = 8 give 62,500, which it simulates.
    base = {**BASE, "--global-batch": "4000000"}
    argv = ["size", *[a for k, v in base.items() for a in (k, v)], "--json", "--top", "3"]
    (result,) = run_cases([argv])
    assert problems_of(result, must_refuse=False) == []
    out = strict_json(result["out"])
    assert result["status"] == 0 and out["fits"] is True
    assert out["best"]["num_microbatches"] <= 100_000
    limits = [r for r in out["rejected"] if r["kind"] == "beyond the simulator's limits"]
    assert limits and "micro-batches is beyond the limit of 100,000" in limits[0]["example"]


def test_a_trillion_gpus_is_refused_in_seconds_with_the_cap():
    (result,) = run_cases([argv_of("--gpus", str(10**12))])
    assert result["status"] == 2 and result["seconds"] < 10
    assert "--gpus" in result["err"] and "1,048,576" in result["err"]


def test_a_huge_gpu_memory_is_refused_not_printed_as_infinity():
    (result,) = run_cases([argv_of("--gpu-memory-gb", "1e300")])
    assert result["status"] == 2 and "Infinity" not in result["out"]
    assert "--gpu-memory-gb" in result["err"]


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("/dev/zero", "regular file"),
        ("/nonexistent/config.json", "cannot read config"),
        ("llama9", "cannot read config"),
    ],
)
def test_a_model_that_is_no_card_and_no_config_is_refused_in_one_line(model, said):
    argv = ["size", "--model", model, "--global-batch", "8", "--gpus", "8", "--json"]
    (result,) = run_cases([argv])
    assert problems_of(result, must_refuse=True) == []
    assert said in result["err"]


if __name__ == "__main__":
    json.dump(drive(json.load(sys.stdin)), sys.stdout)
