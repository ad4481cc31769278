"""Wrong answers issue 19 found accepted in chapter 9, and others of their kind.

9.3: a makespan under F = 10, B = 20 and c = 0.5 ms is 330 ms plus 0.5 ms per transfer on
the critical path; 1F1B's path has 16 (the simulator's makespan grows by 16 ms per ms of
transfer, tests/test_exercises_ch9.py), so 338 ms. 337.5 and 338.5 count 15 and 17
transfers, 337 and 339 count 14 and 18: each is a wrong count, whatever its relative
distance from 338. 9.5: only float64 lets the pipeline and one process agree to 1e-10
(3.6 asks the same), so every other dtype is wrong.
"""

from __future__ import annotations

import pytest

from ppbook.exercises import check
from ppbook.runtime.config import RunConfig


@pytest.mark.parametrize("transfers", [12, 14, 15, 17, 18, 20])
def test_9_3_a_makespan_with_another_count_of_transfers_is_wrong(transfers):
    answer = 330 + 0.5 * transfers
    verdict = check("9.3", answer)
    assert verdict.status == "wrong", verdict.text
    assert f"{transfers} transfers" in verdict.text


@pytest.mark.parametrize("answer", [338, 338.0, 338.1, 337.9])
def test_9_3_sixteen_transfers_rounded_is_right(answer):
    assert check("9.3", answer), check("9.3", answer).text


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_9_5_only_float64_compares_with_one_process(dtype):
    config = RunConfig(nproc=2, device="cuda", dtype=dtype, collect_grads=True)
    verdict = check("9.5", config)
    assert verdict.status == "wrong", verdict.text
    assert "float64" in verdict.text
