"""Chapter 9's exercises: each right answer passes, each usual slip gets its own hint.

The right answers here are worked out by hand (a map counted boundary by boundary, the
makespan from the slope of the simulator in the transfer time, NTP's formula on three
numbers), not by calling the check's own code.
"""

from __future__ import annotations

import pytest

from ppbook.costs import Costs
from ppbook.exercises import check
from ppbook.exercises.ch9 import crossing_messages
from ppbook.runtime.config import RunConfig
from ppbook.schedules import one_f_one_b
from ppbook.simulate import simulate


def test_9_1_modes_of_three_machines():
    # 3 ranks on 2 GPUs: ranks 0 and 2 on GPU 0, so no NCCL; 2 on 4: one GPU each; no CUDA.
    assert check("9.1", ["shared-gpu", "nccl", "cpu"])
    assert check("9.1", ("Shared-GPU ", "NCCL", "cpu"))  # case and spaces do not matter
    assert "two ranks land on one GPU" in check("9.1", ["nccl", "nccl", "cpu"]).message
    assert "can hold the ranks" in check("9.1", ["cpu", "nccl", "cpu"]).message
    assert "a GPU of its own" in check("9.1", ["shared-gpu", "shared-gpu", "cpu"]).message
    assert "sees no GPU" in check("9.1", ["shared-gpu", "nccl", "shared-gpu"]).message
    assert "not a mode" in check("9.1", ["cpu", "gpu", "nccl"]).message
    assert "a list of 3 modes" in check("9.1", "nccl").message


def test_9_2_neighbours_on_one_gpu():
    # 1F1B, m = 8: each boundary between neighbouring ranks carries 8 activations and 8
    # gradients a step. Blocks cross one boundary (16), round robin three (48).
    assert crossing_messages([0, 0, 1, 1]) == 16
    assert crossing_messages([0, 1, 0, 1]) == 48
    assert crossing_messages([0, 1, 1, 0]) == 32
    assert check("9.2", [0, 0, 1, 1]) and check("9.2", ["cuda:1", "cuda:1", "cuda:0", "cuda:0"])
    assert "round robin" in check("9.2", [0, 1, 0, 1]).message
    assert "a map with 16 exists" in check("9.2", [0, 1, 1, 0]).message
    assert "holds 3 of the 4 ranks" in check("9.2", [0, 0, 0, 1]).message
    assert "is not GPU 0 or 1" in check("9.2", [0, 2, 1, 1]).message
    assert "one GPU per rank" in check("9.2", [0, 1]).message


def test_9_3_makespan_of_1f1b_under_the_cpu_costs():
    # (m+p-1)(F+B) = 11 x 30 = 330 ms without transfers; the simulator's makespan grows by
    # 16 ms per ms of transfer (two runs give the slope), so 330 + 16 x 0.5 = 338 ms.
    slope = (
        simulate(one_f_one_b(4, 8), Costs(F=10, B=20, comm=1)).makespan
        - simulate(one_f_one_b(4, 8), Costs(F=10, B=20)).makespan
    )
    assert slope == 16
    assert check("9.3", 338) and check("9.3", 338.05)
    assert not check("9.3", 338.4)  # 16.8 transfers: no whole count (issue 19)
    assert "GPipe" in check("9.3", 333).message  # (m+p-1)(F+B) + 2(p-1)c
    assert "leaves out the transfers" in check("9.3", 330).message
    assert "without the bubble" in check("9.3", 240).message
    assert "whole model" in check("9.3", 960).message
    assert "wants a time in ms" in check("9.3", "338").message


def test_9_4_smallest_m_below_ten_percent():
    assert check("9.4", 11)
    ten = check("9.4", 10)  # (p-1)/(m+p-1) = 1/11 < 0.1, but the transfers add idle time
    assert "not below 0.10" in ten.message and "without transfers" in ten.hint
    assert "a smaller m does too" in check("9.4", 12).message
    assert "not below" in check("9.4", 4).message and not check("9.4", 4).hint
    assert "wants a whole number of micro-batches" in check("9.4", 10.5).message


def test_9_5_a_run_for_the_shared_path():
    good = RunConfig(nproc=2, device="cuda", dtype="float64", collect_grads=True)
    verdict = check("9.5", good)
    single = RunConfig(nproc=2, device="cuda", collect_grads=True)  # float32 by default
    assert "dtype='float64'" in check("9.5", single).hint
    assert verdict and "cuda:0, cuda:0" in verdict.message
    assert "never touches the GPU" in check("9.5", RunConfig(collect_grads=True)).message
    assert "nothing to compare" in check("9.5", RunConfig(device="cuda")).message
    one = RunConfig(nproc=1, device="cuda", collect_grads=True, dtype="float64")
    assert "one rank sends no message" in check("9.5", one).message
    refused = RunConfig(schedule="zb-h2", num_microbatches=1, device="cuda", collect_grads=True)
    assert "m >= 2p-1" in check("9.5", refused).message  # the config's own check speaks
    assert "wants a RunConfig" in check("9.5", {"device": "cuda"}).message


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (2.0, "as the message left"),  # 12.0 - 10.0
        (1.4, "as the answer arrived"),  # 12.0 - 10.6
        (-1.7, "wrong sign"),
        (0.3, "not the offset"),  # half the round trip: the bound, not the offset
    ],
)
def test_9_6_offset_from_one_round_trip(answer, words):
    assert check("9.6", 12.0 - (10.0 + 10.6) / 2)  # 1.7 ms: the stamp against the middle
    assert words in check("9.6", answer).message
