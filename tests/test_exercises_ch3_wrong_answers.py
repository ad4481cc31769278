"""Wrong answers issue 19 found accepted in chapter 3 (3.5), and others of their kind.

3.5 asks for the largest transfer time c at which 1F1B (p = 4, m = 8, F = 1 ms, B = 2 ms)
still runs 2.5 times faster than one process. One process takes m p (F+B) = 96 ms, so the
step may take 38.4 ms; 1F1B takes 33 + 16c ms (pinned in tests/test_exercises_ch3.py), so
c = 0.3375 ms exactly. A c above it misses the speed-up however close it is (0.339 is 0.4 %
above, inside a relative tolerance); a c that is a whole microsecond or more below it is not
the largest.
"""

from __future__ import annotations

import pytest

from ppbook.exercises import check


@pytest.mark.parametrize("answer", [0.339, 0.3376, 0.338, 0.34])
def test_3_5_a_transfer_time_that_misses_the_speedup_is_wrong(answer):
    verdict = check("3.5", answer)  # 33 + 16 * 0.3376 = 38.4016 ms > 38.4 ms
    assert verdict.status == "wrong", verdict.text
    assert "below 2.5" in verdict.text


@pytest.mark.parametrize("answer", [0.336, 0.3364, 0.33])
def test_3_5_a_transfer_time_a_microsecond_short_is_not_the_largest(answer):
    verdict = check("3.5", answer)  # 33 + 16 * 0.3365 = 38.384: 0.3375 still reaches 2.5
    assert verdict.status == "wrong", verdict.text
    assert "a larger c still reaches 2.5" in verdict.text


@pytest.mark.parametrize("answer", [0.3375, 0.337, 0.3372])
def test_3_5_the_largest_c_to_the_microsecond_is_right(answer):
    assert check("3.5", answer), check("3.5", answer).text
