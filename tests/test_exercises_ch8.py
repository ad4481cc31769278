"""Chapter 8's exercises: each right answer passes and each typical slip gets its own hint.

The expected answers and numbers are worked out by hand here, not by the checks' code.
The 70B-class model (80 layers, h = 8192, 64 heads, V = 32,000, s = 4096, untied, no
learned positions) with tp = 4 and pp = 8 under 1F1B: rank 0 holds 10 layers of
(12h^2 + 7h)/4 + 6h parameters and the embedding's V h / 4, 16 bytes each; its
activations are p = 8 micro-batches of 10 layers (Korthikanti: 10 sbh + 24 sbh / t with
selective recomputation, 2 sbh with full) and of the embedding dropout's sbh-byte mask.
GB = 1e9 bytes.
"""

import pytest
import sympy as sp

from ppbook.exercises import check, exercises, solution
from ppbook.exercises.ch8_jobs import shortest_split

GB = 1e9
H, S, V70, TP, P = 8192, 4096, 32000, 4, 8
SBH = S * H  # b = 1
RANK0_PARAMS = 10 * ((12 * H * H + 7 * H) // TP + 6 * H) + V70 * H // TP
RANK0_STATIC = 16 * RANK0_PARAMS  # 33.27 GB


def rank0_total(per_layer_sbh: float, b: int = 1) -> float:
    """Rank 0's peak under 1F1B: static state + p micro-batches of 10 layers and a mask."""
    return RANK0_STATIC + P * b * (10 * per_layer_sbh + 1) * SBH


def test_chapter_eight_has_eight_exercises_half_of_them_derive_or_construct():
    found = exercises("8")
    assert [e.id for e in found] == [f"8.{k}" for k in range(1, 9)]
    assert sum(e.kind in ("derive", "construct", "implement") for e in found) == 4
    assert "[9, 9, 9, 5]" in repr(solution("8.3"))


def test_hand_worked_memory_of_rank_0():
    assert round(RANK0_STATIC / GB, 1) == 33.3
    assert round(rank0_total(10 + 24 / TP) / GB, 1) == 76.5  # selective
    assert round(rank0_total(2) / GB, 1) == 38.9  # full
    assert round(rank0_total(2, b=4) / GB, 1) == 55.8
    assert round(rank0_total(2, b=8) / GB, 1) == 78.4


def test_8_1_microbatches_per_pipeline():
    # dp = 64 / (4 * 8) = 2 replicas; m = 512 / (2 * 4) = 64.
    assert check("8.1", 64) and check("8.1", 64.0)
    assert "whole batch" in check("8.1", 128).message  # 512 / 4: dp forgotten
    assert "samples" in check("8.1", 256).message  # 512 / 2: b forgotten
    assert "all 64 GPUs" in check("8.1", 2).message
    assert "dp = N / pp" in check("8.1", 16).message  # dp = 8
    assert "dp = N / tp" in check("8.1", 8).message  # dp = 16
    assert "dp * m * b" in check("8.1", 5).message
    assert "whole number" in check("8.1", 64.5).message


def test_8_2_the_split_of_gpt3_on_64_a100():
    # 174.6e9 parameters at 16 bytes are 2.79 TB: with dp = 2 each replica's 32 GPUs would
    # hold 87 GB of static state each, so dp = 1 and tp * pp = 64. The simulator decides
    # between (8, 8) and (4, 16): V-Min (about a third of 1F1B's activations) lets the
    # deeper pipeline run without recomputation, and it wins.
    assert 174.6e9 * 16 / 32 > 80 * GB
    verdict = check("8.2", (4, 16, 1))
    assert verdict and "v-min" in verdict.message and "recompute none" in verdict.message
    assert check("8.2", [4, 16, 1])
    slower = check("8.2", (8, 8, 1))
    assert not slower and "fits" in slower.message and "(4, 16, 1) takes" in slower.message
    replicas = check("8.2", (4, 8, 2))
    assert "alone need" in replicas.message and "whole model's state" in replicas.hint
    assert "spans nodes" in check("8.2", (16, 4, 1)).message
    assert "not the 64 GPUs" in check("8.2", (8, 8, 2)).message
    assert "three numbers" in check("8.2", 881).message


def test_8_3_a_layer_split_that_balances_the_head():
    # A layer's F + B with selective recomputation: bsh(72h + 16s) FLOPs; the head's
    # 6bshV. With h = s = 4096 and V = 256,000 the head is 4.26 layers' worth, so the last
    # stage takes 5 layers and the others 9: every stage 9 to 9.26 layers' worth.
    layer = 72 * 4096 + 16 * 4096
    head = 6 * 256000
    assert round(head / layer, 2) == 4.26
    last_ms = (5 * layer + head) * 4096 * 4096 / 400e12 * 1e3
    verdict = check("8.3", [9, 9, 9, 5])
    assert verdict and f"{last_ms:.1f} ms" in verdict.message
    step, split = shortest_split()
    assert split == (9, 9, 9, 5)
    # 1F1B's step lies between m and m + p - 1 passes of its slowest stage.
    assert 8 * last_ms / 1e3 <= step <= 11 * last_ms / 1e3
    even = check("8.3", [8, 8, 8, 8])  # the last stage: 8 + 4.26 layers' worth
    assert not even and "stage 3" in even.message and "logits" in even.hint
    overshoot = check("8.3", [10, 10, 9, 3])  # now the first stage is the slowest
    assert not overshoot and "stage 0" in overshoot.message and "as equal" in overshoot.hint
    assert "adding up to 32" in check("8.3", [8, 8, 8]).message
    assert "at least 1" in check("8.3", [0, 10, 11, 11]).message
    assert "list of 4" in check("8.3", "9995").message


def test_8_4_recomputation_on_64_gb():
    verdict = check("8.4", "full")
    assert verdict and f"{rank0_total(2) / GB:.1f} GB" in verdict.message
    selective = check("8.4", " Selective ")
    assert not selective and f"{rank0_total(10 + 24 / TP) / GB:.1f} GB" in selective.message
    assert "over 64 GB" in check("8.4", "none").message
    assert "wants" in check("8.4", "some").message


def test_8_5_the_largest_microbatch_that_fits():
    verdict = check("8.5", 4)
    assert verdict and f"{rank0_total(2, b=4) / GB:.1f} GB" in verdict.message
    too_big = check("8.5", 8)
    assert not too_big and f"{rank0_total(2, b=8) / GB:.1f} GB" in too_big.message
    assert "in proportion to b" in too_big.hint
    assert "so does b = 4" in check("8.5", 2).message
    assert "not one of" in check("8.5", 3).message


def test_8_6_a_configuration_rejected_for_its_activations():
    answer = dict(tp=4, pp=8, microbatch_size=1, recompute="none")
    verdict = check("8.6", answer)
    assert verdict and "activations" in verdict.message
    # tp * pp = 8: 65e9 parameters at 16 bytes over 8 GPUs are 130 GB before activations.
    static = check("8.6", dict(tp=4, pp=2, microbatch_size=1, recompute="none"))
    assert not static and "alone need" in static.message and "16 bytes" in static.hint
    fits = check("8.6", dict(tp=4, pp=8, microbatch_size=1, recompute="full"))
    assert not fits and "this fits" in fits.message
    other = check("8.6", dict(tp=4, pp=8, microbatch_size=3, recompute="none"))
    assert "not for memory" in other.message  # 256 samples a replica, b = 3
    uneven = dict(tp=4, pp=3, microbatch_size=1, recompute="none")
    assert "must divide" in check("8.6", uneven).message
    assert "a dict with keys" in check("8.6", (4, 8)).message


@pytest.mark.parametrize("id_", [f"8.{k}" for k in range(1, 9)])
def test_unanswered_gives_nothing_away(id_):
    assert check(id_, None).status == "unanswered"


def test_8_7_zero_2_bytes_per_parameter():
    # By hand: 2 bytes of bf16 weights kept whole; 4 of fp32 gradients and 4 + 4 + 4 of
    # master weights and moments over the d replicas: 2 + 16/d (2.125 at d = 128).
    d = sp.Symbol("d", positive=True)
    verdict = check("8.7", 2 + 16 / d)
    assert verdict and "2.125 bytes" in verdict.message
    assert check("8.7", (2 * d + 16) / d)  # any form of the same function
    assert "ZeRO-1's" in check("8.7", 6 + 12 / d).message  # the gradients left whole
    assert "ZeRO-3's" in check("8.7", 18 / d).message  # the weights sharded too
    assert "counts 18 bytes" in check("8.7", 2 + 14 / d).message  # bf16 gradients (16 bytes)
    assert "in d only" in check("8.7", 2 + 16 / sp.Symbol("n")).message
    assert "sympy expression" in check("8.7", "2 + 16/d").message


def test_8_8_a_layout_that_fits_only_with_expert_parallelism():
    # Mixtral at tp = 2, pp = 4: a stage's 8 layers of 8 SwiGLU experts, 3 h f / 2 each
    # (h = 4096, f = 14,336), are 5.6e9 parameters, 101 GB at 18 bytes: nothing fits
    # without ep; with ep = 8 a GPU keeps one expert a layer.
    assert 8 * 8 * 3 * 4096 * 14336 // 2 * 18 > 100e9
    verdict = check("8.8", (2, 4, 8))
    assert verdict and "alone need" in verdict.message
    assert "not needed" in check("8.8", (8, 4, 2)).message  # fits without ep already
    assert "choose ep > 1" in check("8.8", (2, 4, 1)).message
    assert "must divide dp = 8" in check("8.8", (2, 4, 16)).message
    assert "must divide the 64 GPUs" in check("8.8", (3, 4, 2)).message
    assert "three numbers" in check("8.8", 248).message
