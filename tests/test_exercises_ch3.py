"""Chapter 3's exercises: each right answer passes and each typical slip gets its own hint.

The expected answers are worked out by hand in the comments (the messages from the rows
of ``zb_v(2, 4)``, the bubble of a timeline whose times are written out here), or pinned
from the simulator where a comment says so; never by calling the check's own code. The
right answer to 3.6 starts two processes (about 20 s on two cores).
"""

import pytest

from ppbook.exercises import check, exercises, solution
from ppbook.runtime.config import RunConfig
from ppbook.runtime.examples import reordered_backward
from ppbook.runtime.plan import message_order
from ppbook.schedule import Schedule
from ppbook.schedules import gpipe, one_f_one_b
from ppbook.timeline import Timeline

# Rank 1 of zb_v(2, 4) runs 1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3
# 2I2 2W2 1I2 2I3 1I3 1W2 2W3 1W3. 1F needs stage 0's activation and 2I stage 3's gradient
# (both on rank 0); 2F and 1I take theirs from the other stage of rank 1.
USED = [
    "activation for 1F0",
    "activation for 1F1",
    "gradient for 2B0",
    "activation for 1F2",
    "gradient for 2B1",
    "activation for 1F3",
    "gradient for 2B2",
    "gradient for 2B3",
]
# Rank 0 runs 0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 ...: it sends 1F2's input before 2B0's.
SENT = [
    "activation for 1F0",
    "activation for 1F1",
    "activation for 1F2",
    "gradient for 2B0",
    "gradient for 2B1",
    "activation for 1F3",
    "gradient for 2B2",
    "gradient for 2B3",
]

FORWARD_SWAPPED = [["0F0", "0F1", "0B1", "0B0"], ["1F1", "1F0", "1B1", "1B0"]]


def test_chapter_three_has_seven_exercises_four_of_them_construct_or_implement():
    found = exercises("3")
    assert [e.id for e in found] == [f"3.{k}" for k in range(1, 8)]
    assert sum(e.kind in ("construct", "implement") for e in found) == 4
    assert all(check(e.id, None).status == "unanswered" for e in found)


def test_3_1_ideal_speedup():
    # one process: m p (F+B); the pipeline: (m+p-1)(F+B); 2 * 8 / 9 = 16/9 = 1.777...
    assert check("3.1", 16 / 9)
    assert check("3.1", 1.78)  # three significant digits are enough (1e-9 refused it before)
    assert "is p" in check("3.1", 2).message
    assert "inverse" in check("3.1", 9 / 16).message
    busy = check("3.1", 8 / 9)
    assert "m/(m+p-1)" in busy.message and "multiply by p" in busy.hint
    assert "not the speed-up" in check("3.1", 1.5).message
    assert "wants a speed-up" in check("3.1", "1.78").message


def test_3_2_messages_rank_1_receives():
    assert check("3.2", USED)
    assert check("3.2", [m.replace("2B", "2I") for m in USED])  # I, as ZB-V runs it
    sender = check("3.2", SENT)
    assert "order in which rank 0 sends" in sender.message and "rank 1's actions" in sender.hint
    local = check("3.2", USED[:2] + ["activation for 2F0"] + USED[2:])
    assert "both live on rank 1" in local.message and "stage_to_rank" in local.hint
    swapped = check("3.2", [USED[1], USED[0], *USED[2:]])
    assert "from entry 0" in swapped.message
    assert "receives 8 messages" in check("3.2", USED[:-1]).message
    assert "twice" in check("3.2", [*USED[:-1], USED[0]]).message
    assert "cannot read 'gradient for 2F0'" in check("3.2", ["gradient for 2F0"]).message
    assert "wants a list of message names" in check("3.2", "activation for 1F0").message


def test_3_3_forward_mispairing():
    right = check("3.3", FORWARD_SWAPPED)
    assert right and "rank 1 uses ['activation for 1F1', 'activation for 1F0']" in right.message
    assert check("3.3", Schedule.from_strings(FORWARD_SWAPPED))
    # The chapter's own example mis-pairs gradients, not activations: not an answer.
    backward = check("3.3", reordered_backward())
    assert "only gradients" in backward.message and "1F1 before 1F0" in backward.hint
    assert "in the order they are sent" in check("3.3", one_f_one_b(2, 2)).message
    assert "in the order they are sent" in check("3.3", gpipe(2, 2)).message
    assert "m = 2 micro-batches, got p = 2 and m = 4" in check("3.3", one_f_one_b(2, 4)).message
    # rank 0 waits in 0B0 for rank 1's 1B0, which comes after 1F0, which needs 0F1: deadlock
    stuck = [["0F0", "0B0", "0F1", "0B1"], ["1F1", "1B1", "1F0", "1B0"]]
    assert check("3.3", stuck).status == "wrong"
    assert "cannot parse action '0X0'" in check("3.3", [["0F0", "0X0"], ["1F0"]]).message
    assert "wants a Schedule" in check("3.3", "0F0 0F1").message


def test_message_order_of_the_chapters_backward_example():
    assert message_order(reordered_backward(), 1, 0) == (
        ["gradient for 0B0", "gradient for 0B1"],
        ["gradient for 0B1", "gradient for 0B0"],
    )


def _measured() -> Timeline:
    """A 'measured' 1F1B step, p = 2, m = 2, with times written out by hand (seconds).

    Makespan 11; rank 0 busy 1 + 1 + 2 + 2 = 6, rank 1 busy 1 + 3 + 1 + 3 = 8. Total
    2 * 11 = 22, idle 8: f = 8/22 = 0.3636, r = 8/14 = 0.5714.
    """
    starts = [[0, 1, 5, 9], [1, 2, 5, 6]]
    ends = [[1, 2, 7, 11], [2, 5, 6, 9]]
    return Timeline.from_arrays(one_f_one_b(2, 2), starts, ends, source="measured")


def test_3_4_bubble_fraction_of_a_measured_step():
    timeline = _measured()
    assert check("3.4", 8 / 22, timeline=timeline)
    assert check("3.4", 0.364, timeline=timeline)
    assert "bubble ratio" in check("3.4", 8 / 14, timeline=timeline).message
    assert "busy share" in check("3.4", 14 / 22, timeline=timeline).message
    assert "one makespan" in check("3.4", 8 / 11, timeline=timeline).message
    assert "one rank's idle share" in check("3.4", 5 / 11, timeline=timeline).message  # rank 0
    assert "one rank's idle share" in check("3.4", 3 / 11, timeline=timeline).message  # rank 1
    assert "not f of this step" in check("3.4", 0.1, timeline=timeline).message
    assert "timeline=one_f_one_b_run.timeline" in check("3.4", 0.3).message


def test_3_5_largest_transfer_time():
    # One process: m p (F+B) = 8 * 4 * 3 = 96 ms; the step may take 96 / 2.5 = 38.4 ms.
    # Pinned from the simulator: 1F1B (p = 4, m = 8) takes 33 ms at c = 0 and 49 ms at
    # c = 1, linear in between: 33 + 16c = 38.4 at c = 0.3375. GPipe's 33 + 6c: c = 0.9.
    verdict = check("3.5", 0.3375)
    assert verdict and "adds 16 ms" in verdict.message
    assert not check("3.5", 0.338)  # 38.408 ms: rounded up, it misses 2.5 (issue 19)
    gpipe_answer = check("3.5", 0.9)
    assert "GPipe's answer" in gpipe_answer.message and "47.4 ms" in gpipe_answer.message
    assert "below 2.5" in check("3.5", 0.34).message  # 33 + 16 * 0.34 = 38.44 ms
    assert "a larger c still reaches 2.5" in check("3.5", 0.2).message  # 36.2 ms
    assert "no less than 0" in check("3.5", -1).message


SMALL = dict(schedule="zb-h1", nproc=2, num_microbatches=4, hidden=16, timeout=30.0)


def test_3_6_wrong_configs_are_caught_before_any_process_starts():
    float64 = dict(SMALL, dtype="float64")
    one_f = check("3.6", RunConfig(**dict(float64, schedule="1f1b"), collect_grads=True))
    assert "runs 1f1b, not ZB-H1" in one_f.message and "schedule='zb-h1'" in one_f.hint
    single = check("3.6", RunConfig(**SMALL, collect_grads=True))
    assert "about 1e-4" in single.message and single.hint == "dtype='float64'."
    kept = check("3.6", RunConfig(**float64))
    assert "nothing to compare" in kept.message and "collect_grads=True" in kept.hint
    three = dict(float64, nproc=3, num_microbatches=3)
    assert "two processes, got nproc = 3" in check("3.6", RunConfig(**three)).message
    big = check("3.6", RunConfig(**dict(float64, hidden=1024), collect_grads=True))
    assert "hidden <= 128" in big.message
    slow = check("3.6", RunConfig(**dict(float64, timeout=600.0), collect_grads=True))
    assert "timeout <= 60" in slow.message
    assert "unknown schedule 'zb_h1'" in check("3.6", RunConfig(schedule="zb_h1")).message
    assert "wants a RunConfig" in check("3.6", "zb-h1").message


@pytest.mark.timeout(120)
def test_3_6_a_right_config_runs_and_matches_one_process():
    verdict = check("3.6", RunConfig(**SMALL, dtype="float64", collect_grads=True, steps=2))
    # ZB-H1, p = 2, m = 4: each rank runs one I and one W per micro-batch, 2 * 4 of each.
    assert verdict, verdict.text
    assert "8 I and 8 W passes ran on 2 ranks" in verdict.message


def test_solutions_are_there_when_asked():
    assert "16/9" in repr(solution("3.1"))
    assert "0.3375" in repr(solution("3.5"))
