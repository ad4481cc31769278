"""Exercise 3.6 of chapter 3: a run on real processes that passes the gradient check.

The one exercise of the book whose check starts processes (``notebooks/03_running.ipynb``;
section 2 introduces ``RunConfig``). It checks the reader's
:class:`~ppbook.runtime.config.RunConfig` before any process starts
(:func:`ppbook.runtime.config.check`, then: ZB-H1 on two ranks, a small run, gradients kept
for the comparison, float64), then launches it and compares every step's loss, the
gradients and the parameters with the same model trained in one process
(:func:`ppbook.runtime.reference.assert_matches_reference`). torch is imported only then.
:mod:`ppbook.exercises.ch3` registers it with the chapter's other exercises.
"""

from __future__ import annotations

from ppbook.checks import shown
from ppbook.exercises import exercise, right, wrong
from ppbook.runtime.config import RunConfig
from ppbook.runtime.config import check as check_config
from ppbook.schedules import zb_h1

LIMITS = {"num_microbatches": 16, "steps": 3, "hidden": 128, "microbatch_size": 16}
"""The largest run 3.6 launches, so that its check finishes in seconds on two cores."""

MAX_TIMEOUT = 60.0
"""Seconds a rank of 3.6's run may wait: a hang fails fast instead of freezing the notebook."""


@exercise(
    "3.6",
    "Construct a RunConfig that trains ZB-H1 (the backward split into I and W) on two "
    "processes in float64 and whose gradients the check can compare with one process.",
    kind="construct",
    solution='`RunConfig(schedule="zb-h1", nproc=2, num_microbatches=4, hidden=16, steps=2, '
    'dtype="float64", collect_grads=True, timeout=30.0)`: '
    "`collect_grads=True` gathers every gradient (and every parameter after the last "
    "optimizer step) on rank 0, which the comparison needs; float64 makes the pipeline and "
    "one process agree to about 1e-12, where float32 rounds the micro-batch sums apart.",
    answer_name="answer_6",
)
def _zb_h1_run(answer):
    if not isinstance(answer, RunConfig):
        return wrong(f"this exercise wants a RunConfig(...), got {shown(answer)}.")
    schedule = check_config(answer)  # a ValueError says what is wrong with the config
    expected = zb_h1(answer.nproc, answer.num_microbatches)
    if schedule.actions != expected.actions:
        return wrong(
            f"this config runs {schedule.name}, not ZB-H1.",
            "schedule='zb-h1' splits every backward into I and W.",
        )
    if answer.nproc != 2:
        return wrong(f"this exercise runs on two processes, got nproc = {answer.nproc}.")
    too_big = [f"{k} <= {v}" for k, v in LIMITS.items() if getattr(answer, k) > v]
    if too_big or answer.timeout > MAX_TIMEOUT:
        return wrong(
            "keep the run small, so that the check finishes in seconds: "
            + ", ".join(too_big + [f"timeout <= {MAX_TIMEOUT:g}"])
            + "."
        )
    if answer.dtype != "float64":
        return wrong(
            f"in {answer.dtype} the micro-batch sums round differently than one batch: the "
            "comparison would hold only to about 1e-4.",
            "dtype='float64'.",
        )
    if not answer.collect_grads:
        return wrong(
            "each rank keeps its gradients to itself: there is nothing to compare.",
            "collect_grads=True gathers every gradient on rank 0.",
        )
    return _run_and_compare(answer)


def _run_and_compare(config: RunConfig):
    """Launch ``config`` and compare it with one process (imports torch)."""
    from ppbook.runtime.launch import PipelineError, launch
    from ppbook.runtime.reference import assert_matches_reference

    try:
        result = launch(config)
        assert_matches_reference(result)
    except (PipelineError, AssertionError) as error:
        return wrong(f"the run did not match one process: {str(error).splitlines()[0]}")
    ran = [action for row in result.executed[-1] for action in row]  # the last step's
    inputs, weights = sum("I" in a for a in ran), sum("W" in a for a in ran)
    return right(
        f"{inputs} I and {weights} W passes ran on {config.nproc} ranks; the loss of every step, "
        f"all {len(result.grads)} gradients and the parameters after the last optimizer step "
        "match one process to 1e-10."
    )
