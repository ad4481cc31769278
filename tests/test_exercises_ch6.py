"""Chapter 6's exercises: each right answer passes and each typical slip gets its own hint.

The expected numbers are worked out by hand here, never by the checks' own code. With
s = 2048, b = 1: the 13B model (h = 5120, a = 40, V = 51200) has 12h^2 + 13h =
314,639,360 parameters a layer and 51200 h + 2048 h = 272,629,760 in its embeddings; a
layer keeps sbh(34 + 5as/h) = 10,485,760 * 114 = 1,195,376,640 bytes (34 sbh =
356,515,840 with selective recomputation); the first stage adds the embedding dropout's
sbh-byte mask. Static state is 18 bytes a parameter (Megatron-LM: 2 of bf16 weights, 4 of
fp32 gradients, 12 of fp32 master weights and Adam moments). GB = 1e9 bytes.
"""

import pytest

from ppbook.exercises import check, exercises, solution

SBH = 2048 * 5120
LAYER_PARAMS = 12 * 5120**2 + 13 * 5120  # 314,639,360
EMBEDDING = 51200 * 5120 + 2048 * 5120  # 272,629,760
LAYER_BYTES = SBH * (34 + 5 * 40 * 2048 // 5120)  # 1,195,376,640
SELECTIVE_BYTES = 34 * SBH
STATIC = 18  # bytes a parameter
GB = 1e9


def test_chapter_six_has_ten_exercises_half_of_them_derive_construct_or_implement():
    found = exercises("6")
    assert [e.id for e in found] == [f"6.{k}" for k in range(1, 11)]
    kinds = [e.kind for e in found]
    assert kinds == ["compute"] * 2 + ["choose"] * 3 + ["construct", "derive", "construct"] + [
        "construct",
        "implement",
    ]


def test_6_1_one_layer():
    assert LAYER_BYTES == 1_195_376_640
    verdict = check("6.1", LAYER_BYTES / GB)
    assert verdict and "1,195,376,640 bytes" in verdict.message
    assert check("6.1", 1.195)  # rounded to three digits
    selective = check("6.1", SELECTIVE_BYTES / GB)  # 0.3565: the attention scores left out
    assert "34 sbh" in selective.message and "5as^2b" in selective.hint
    gib = check("6.1", LAYER_BYTES / 2**30)  # 1.113
    assert "GiB" in gib.message and "10^9" in gib.hint
    assert "sbh(34 + 5as/h)" in check("6.1", 2).hint
    assert "wants a number of GB" in check("6.1", "1.2 GB").message


def test_6_2_rank_zero_under_1f1b():
    # rank 0 holds p = 8 micro-batches of its 5 layers and the embedding mask
    peak = 8 * (5 * LAYER_BYTES + SBH)  # 47,898,951,680 bytes
    verdict = check("6.2", peak / GB)
    assert verdict and "holds 8 micro-batches" in verdict.message
    assert check("6.2", 47.9)
    gpipe = check("6.2", 2 * peak / GB)  # all m = 16
    assert "all m = 16" in gpipe.message and "p forwards" in gpipe.hint
    one = check("6.2", peak / 8 / GB)
    assert "one micro-batch" in one.message
    whole = check("6.2", 8 * 40 * LAYER_BYTES / GB)  # 382.5: every layer, not the stage's
    assert "all 40 layers" in whole.message and "5 layers" in whole.hint
    assert "GiB" in check("6.2", peak / 2**30).message
    assert "micro-batches in flight" in check("6.2", 10).hint
    # the review's wrong answer: the stage's layers without the embedding's dropout masks,
    # 8 * 5 * LAYER_BYTES = 47.82 GB, 0.2 % below the truth
    for no_masks in (8 * 5 * LAYER_BYTES / GB, 47.8, 47.82):
        forgot = check("6.2", no_masks)
        assert not forgot and "layers of rank 0's stage only" in forgot.message, no_masks
        assert "dropout" in forgot.hint
    assert check("6.2", 47.90) and check("6.2", 47.899)


def test_6_3_smallest_pipeline():
    # p = 4: rank 0 has 10 layers and the embeddings, 3,419,023,360 parameters (61.54 GB),
    # and holds 4 x (10 x 34 sbh + sbh) = 14.30 GB: 75.84 GB
    static4 = STATIC * (10 * LAYER_PARAMS + EMBEDDING)
    rank0 = static4 + 4 * (10 * SELECTIVE_BYTES + SBH)
    assert round(rank0 / GB, 2) == 75.84
    verdict = check("6.3", 4)
    assert verdict and "75.84 GB" in verdict.message and "92.47 GB" in verdict.message
    # p = 3: 13 layers on rank 0, 78.53 GB static + 3 x (13 x 34 sbh + sbh) = 92.47 GB
    static3 = STATIC * (13 * LAYER_PARAMS + EMBEDDING)
    assert round((static3 + 3 * (13 * SELECTIVE_BYTES + SBH)) / GB, 2) == 92.47
    short = check("6.3", 3)
    assert "92.47 GB" in short.message and "78.53 GB static" in short.message
    assert "add the activations" in short.hint  # the static state alone would fit
    assert "18 bytes a parameter" in check("6.3", 2).hint  # 118 GB static: does not fit
    assert "p = 4 fits too" in check("6.3", 5).message
    assert "whole number of stages" in check("6.3", 0).message
    assert "whole number of stages" in check("6.3", "4").message


def test_6_4_least_memory_on_rank_zero():
    # 1F1B and ZB-H1 both hold p = 8 micro-batches on rank 0: 33.22 GB static + 47.90 GB
    rank0 = STATIC * (5 * LAYER_PARAMS + EMBEDDING) + 8 * (5 * LAYER_BYTES + SBH)
    assert round(rank0 / GB, 2) == 81.12
    for name in ("1f1b", "zb-h1", " ZB-H1 "):
        verdict = check("6.4", name)
        assert verdict and "81.12 GB" in verdict.message and "ties with it" in verdict.message
    gpipe = check("6.4", "gpipe")  # all 16 micro-batches: 33.22 + 95.80 = 129.0 GB
    assert "holds 16 micro-batch" in gpipe.message and "129 GB" in gpipe.message
    assert "holds 15 micro-batch" in check("6.4", "zb-h2").message  # 2p - 1
    assert "holds 11.5 micro-batch" in check("6.4", "interleaved-1f1b").message  # p + (p-1)/v
    assert "choose one of" in check("6.4", "zb-v").message


def test_6_5_recomputation_that_fits_fastest():
    # b = 2 doubles the activations: none 33.22 + 95.80 = 129.0 GB on rank 0; selective
    # 33.22 + 8 x (5 x 34 sbh + sbh) x 2 = 61.91 GB
    selective = STATIC * (5 * LAYER_PARAMS + EMBEDDING) + 2 * 8 * (5 * SELECTIVE_BYTES + SBH)
    assert round(selective / GB, 2) == 61.91
    verdict = check("6.5", "selective")
    assert verdict and "61.91 GB" in verdict.message
    none = check("6.5", "none")
    assert "129 GB, over 80 GB" in none.message and "s^2" in none.hint
    full = check("6.5", "Full")
    assert "fits" in full.message and "another choice fits" in full.message
    assert "choose one of none, selective, full" in check("6.5", "some").message


def test_6_6_a_split_that_balances_memory():
    # 5B model, h = 4096: 201,379,840 parameters a layer, 218,103,808 in the embeddings,
    # 8,388,608 x 114 = 956,301,312 activation bytes a layer. The even split's rank 0:
    # 18 x (6 layers + embeddings) = 25.67 GB and 4 x (6 layers + mask) = 22.98 GB
    layer, embedding, act, sbh = 201_379_840, 218_103_808, 956_301_312, 2048 * 4096
    assert 12 * 4096**2 + 13 * 4096 == layer and sbh * 114 == act
    even = STATIC * (6 * layer + embedding) + 4 * (6 * act + sbh)
    assert round(even / GB, 2) == 48.66
    verdict = check("6.6", [4, 6, 7, 7])
    assert verdict and "33.8, 39, 38.8, 36.3 GB" in verdict.message
    assert check("6.6", (4, 6, 7, 7))
    flat = check("6.6", [6, 6, 6, 6])
    assert "rank 0 needs 48.66 GB" in flat.message and "holds 4 micro-batches" in flat.hint
    # rank 1 with 7 layers holds 3: 18 x 7 x 201,379,840 + 3 x 7 x 956,301,312 = 45.46 GB
    assert round((STATIC * 7 * layer + 3 * 7 * act) / GB, 2) == 45.46
    second = check("6.6", [3, 7, 7, 7])
    assert "rank 1 needs 45.46 GB" in second.message and "holds 3 micro-batches" in second.hint
    assert "4 layer counts" in check("6.6", [8, 8, 8]).message
    assert "add up to the model's 24 layers" in check("6.6", [5, 5, 5, 5]).message
    assert "at least 1" in check("6.6", [0, 8, 8, 8]).message
    assert "a list of 4 layer counts" in check("6.6", "4 6 7 7").message


@pytest.mark.parametrize(
    ("id", "words"),
    [
        ("6.1", "1.195 GB"),
        ("6.2", "47.9 GB"),
        ("6.3", "p = 4"),
        ("6.4", '"zb-h1"'),
        ("6.5", '"selective"'),
        ("6.6", "[4, 6, 7, 7]"),
    ],
)
def test_solutions_give_the_worked_answer(id, words):
    assert words in repr(solution(id))
