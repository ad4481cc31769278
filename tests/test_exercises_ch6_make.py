"""Chapter 6's exercises 6.7 to 6.10 (derive, construct, implement): right answers pass, and
each kind of slip is refused with a hint that names it.

The right answers here are worked out by hand (6.7's expression, 6.9's bytes) or written
here without the checks' code (6.10's counter). With the 13B model (h = 5120, s = 2048):
sbh = 10,485,760 bytes at b = 1, 314,639,360 parameters a layer, 272,629,760 in the
embeddings. Llama 3 70B (h = 8192, 64 heads, 8 key/value heads of 128, d_ff = 28672,
V = 128256, s = 8192, no biases, untied): 2 h^2 + 2 h (8 * 128) + 3 h d_ff = 855,638,016
parameters in a layer's matrices, 2h = 16,384 in its two RMSNorms (whole on every
tensor-parallel rank), 128256 h = 1,050,673,152 in the word embeddings. GB = 1e9 bytes.
"""

import pytest
import sympy as sp
import torch

from ppbook.cost_model.memory_bytes import Parallel
from ppbook.exercises import check, solution

GB = 1e9
h, a, g, d_ff, e, t = sp.symbols("h a g d_ff e t", positive=True)

# Per token on one rank, sequence parallelism splitting everything by t: two norms' inputs
# and outputs 4eh, Q K V e(a + 2g)h/a, the attention output eh, the fp32 logsumexp 4a,
# SwiGLU 3e d_ff.
LLAMA_LAYER = (e * (4 * h + (a + 2 * g) * h / a + h + 3 * d_ff) + 4 * a) / t


# ----- 6.7 (derive) -------------------------------------------------------------------------


def test_6_7_the_derived_expression_passes_in_any_form():
    at_70b = LLAMA_LAYER.subs({h: 8192, a: 64, g: 8, d_ff: 28672, e: 2, t: 8})
    assert at_70b == 34336  # 2 (32768 + 10240 + 8192 + 86016) / 8 + 256 / 8
    verdict = check("6.7", LLAMA_LAYER)
    assert verdict and "34,336 bytes a token" in verdict.message
    assert check("6.7", sp.expand(LLAMA_LAYER))
    # the same names with other assumptions are the same symbols to the check
    hi, ai, gi, fi, ei, ti = sp.symbols("h a g d_ff e t", integer=True, positive=True)
    assert check("6.7", (ei * (5 * hi + hi + 2 * gi * hi / ai + 3 * fi) + 4 * ai) / ti)


@pytest.mark.parametrize(
    ("slip", "words", "hint"),
    [  # each slip, written in more than one way where the reader might
        ((e * (4 * h * t + (a + 2 * g) * h / a + h + 3 * d_ff) + 4 * a) / t, "norms", "sequence"),
        (e * (4 * h + (a + 2 * g) * h / a + h + 3 * d_ff) / t + 4 * a / t + 0 * h, None, None),
        ((e * (4 * h + 3 * h + h + 3 * d_ff) + 4 * a) / t, "all a heads", "g heads"),
        ((e * (4 * h + (a + 2 * g) * h / a + h + 2 * d_ff) + 4 * a) / t, "two d_ff", "3 d_ff"),
        (e * (4 * h + (a + 2 * g) * h / a + h + 3 * d_ff) + 4 * a, "whole layer", "1/t"),
        (LLAMA_LAYER + 2 * h / t, "dropout masks", "without dropout"),
        (LLAMA_LAYER - 4 * a / t + e * a / t, "logsumexp of e bytes", "fp32"),
        (LLAMA_LAYER - 4 * a / t, "no logsumexp", "4 bytes"),
    ],
)
def test_6_7_each_slip_is_named(slip, words, hint):
    if words is None:  # the right answer written another way: a control for the table
        assert check("6.7", slip)
        return
    verdict = check("6.7", slip)
    assert not verdict and words in verdict.message and hint in verdict.hint


def test_6_7_other_wrong_expressions_say_where_they_go_wrong():
    no_output = (e * (4 * h + (a + 2 * g) * h / a + 3 * d_ff) + 4 * a) / t
    verdict = check("6.7", no_output)
    assert not verdict and "grows with h and e and t" in verdict.hint
    off_by_one = check("6.7", LLAMA_LAYER + 1)
    assert not off_by_one and "a constant is off" in off_by_one.hint
    s_, b_ = sp.symbols("s b", positive=True)
    per_microbatch = check("6.7", s_ * b_ * LLAMA_LAYER)
    assert "uses b, s" in per_microbatch.message and "per token" in per_microbatch.message
    assert "sympy expression" in check("6.7", "e*(4*h)/t").message
    assert "sympy expression" in check("6.7", 34336).message
    assert "a finite number at h = " in check("6.7", LLAMA_LAYER / (t - 1)).message  # t = 1
    assert "a finite number" in check("6.7", sp.Function("u")(h)).message


# ----- 6.8 (construct) ----------------------------------------------------------------------

SBH = 2048 * 5120
LAYER_PARAMS = 12 * 5120**2 + 13 * 5120
EMBEDDING = 51200 * 5120 + 2048 * 5120
MIDDLE_STATIC = 18 * 5 * LAYER_PARAMS  # 28.32 GB
BEST = ["full"] + ["selective"] * 5 + ["none"] * 2


def test_6_8_each_rank_gets_the_least_recomputation_that_fits():
    # b = 4: rank r holds 8 - r micro-batches of 5 layers (rank 0 also the embedding's mask)
    rank0_full = 18 * (5 * LAYER_PARAMS + EMBEDDING) + 8 * 4 * (5 * 2 + 1) * SBH
    assert round(rank0_full / GB, 1) == 36.9  # full: each layer's input, 2 sbh
    rank1_selective = MIDDLE_STATIC + 7 * 4 * 5 * 34 * SBH
    assert round(rank1_selective / GB, 1) == 78.2
    rank6_none = MIDDLE_STATIC + 2 * 4 * 5 * 114 * SBH
    assert round(rank6_none / GB, 1) == 76.1
    verdict = check("6.8", BEST)
    assert verdict and "36.9, 78.2" in verdict.message and "76.1" in verdict.message
    assert check("6.8", [" Full"] + ["SELECTIVE"] * 5 + ["none", "none"])
    assert check("6.8", tuple(BEST))


def test_6_8_a_rank_that_overflows_is_named():
    # rank 0 with selective: 33.22 + 8 x 4 x (5 x 34 + 1) sbh = 90.6 GB
    rank0 = 18 * (5 * LAYER_PARAMS + EMBEDDING) + 8 * 4 * (5 * 34 + 1) * SBH
    assert round(rank0 / GB, 1) == 90.6
    uniform = check("6.8", ["selective"] * 8)
    assert "rank 0 needs 90.6" in uniform.message and "holds 8 micro-batches" in uniform.hint
    # rank 5 without recomputation: 28.32 + 3 x 4 x 570 sbh = 100.0 GB
    assert round((MIDDLE_STATIC + 3 * 4 * 5 * 114 * SBH) / GB, 1) == 100.0
    short = check("6.8", ["full"] + ["selective"] * 4 + ["none"] * 3)
    assert "rank 5 needs 100 GB" in short.message and "holds 3 micro-batches" in short.hint
    assert "rank 0 needs" in check("6.8", ["none"] * 8).message


@pytest.mark.parametrize(
    ("modes", "rank"),
    [
        (["full"] * 8, 1),  # "full" everywhere fits, the slowest of all
        (["full"] * 2 + ["selective"] * 4 + ["none"] * 2, 1),
        (["full"] + ["selective"] * 6 + ["none"], 6),
        (["full"] + ["selective"] * 5 + ["none", "selective"], 7),
        (["full"] + ["selective"] * 3 + ["full"] + ["selective"] + ["none"] * 2, 4),
    ],
)
def test_6_8_more_recomputation_than_a_rank_needs_is_refused(modes, rank):
    verdict = check("6.8", modes)
    assert not verdict and "every rank fits" in verdict.message
    assert f"rank {rank} fits with" in verdict.message and "least recomputation" in verdict.hint


def test_6_8_malformed_answers():
    assert "8 modes" in check("6.8", ["full"] * 7).message
    assert "8 modes" in check("6.8", ["full"] * 7 + ["some"]).message
    assert "a list of 8 modes" in check("6.8", "full").message


# ----- 6.9 (construct) ----------------------------------------------------------------------

LLAMA_MATRICES = 2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672
LLAMA_NORMS = 2 * 8192
LLAMA_EMBEDDING = 128256 * 8192


def test_6_9_three_stages_of_eight_with_sequence_parallelism_fit():
    assert LLAMA_MATRICES == 855_638_016
    # p = 3 splits 80 layers [27, 27, 26]: rank 0 holds 27 layers and the embeddings
    params = 27 * (LLAMA_MATRICES / 8 + LLAMA_NORMS) + LLAMA_EMBEDDING / 8
    static = 18 * params
    activations = 3 * 27 * 34336 * 8192  # p micro-batches of 27 layers, 6.7's bytes a token
    assert round(static / GB, 2) == 54.35 and round(activations / GB, 2) == 22.78
    verdict = check("6.9", (3, Parallel(tp=8, sp=True, attention="flash")))
    assert verdict and "24 GPUs" in verdict.message
    assert "54.35 GB static, 22.78 GB activations" in verdict.message
    assert f"{(static + activations) / GB:.4g} GB" in verdict.message
    # selective recomputation drops the scores of standard attention as FlashAttention does
    assert check("6.9", [3, Parallel(tp=8, sp=True, recompute="selective")])
    assert check("6.9", (3, Parallel(tp=8, sp=True, attention="flash", zero=1)))  # dp = 1


@pytest.mark.parametrize(
    ("layout", "words", "hint"),
    [
        ((3, Parallel(tp=8, attention="flash")), "over 80 GB", "norms' region"),
        ((3, Parallel(tp=8, sp=True)), "over 80 GB", "s x s scores"),
        ((2, Parallel(tp=8, sp=True, attention="flash")), "over 80 GB", "leaves"),
        ((12, Parallel(tp=2, sp=True, attention="flash")), "over 80 GB", "must shrink"),
        ((6, Parallel(tp=4, sp=True, attention="flash")), "over 80 GB", "must shrink"),
        ((4, Parallel(tp=8, sp=True, attention="flash")), "32 GPUs, over 24", "multiplies"),
        ((3, Parallel(tp=8, sp=True, attention="flash", dp=2, zero=3)), "48 GPUs", "multiplies"),
        ((3, Parallel(tp=4, sp=True, attention="flash", cp=2)), "108.7 GB static", "sequence"),
        ((2, Parallel(tp=8, sp=True, attention="flash", dp=1, zero=3)), "79.38 GB static", "24"),
        ((1, Parallel(tp=8, sp=True, attention="flash", dp=2, zero=3)), "over 80 GB", "24 GPUs"),
        ((3, Parallel(tp=8, sp=True, recompute="full")), "without full recomputation", ""),
    ],
)
def test_6_9_layouts_that_do_not_fit_or_break_the_rules(layout, words, hint):
    verdict = check("6.9", layout)
    assert not verdict and words in verdict.message and hint in verdict.hint


def test_6_9_malformed_answers():
    assert "b = 1" in check("6.9", (3, Parallel(tp=8, sp=True, microbatch_size=2))).message
    assert "a pair (p, Parallel" in check("6.9", Parallel(tp=8)).message
    assert "a pair (p, Parallel" in check("6.9", (3, {"tp": 8})).message
    assert "whole number of stages" in check("6.9", (0, Parallel(tp=8))).message
    assert "whole number of stages" in check("6.9", (2.5, Parallel(tp=8))).message
    assert "must divide" in check("6.9", (3, Parallel(tp=3, attention="flash"))).message


# ----- 6.10 (implement) -----------------------------------------------------------------------


def _counter(*, params=False, once=True, nbytes="storage", last=False):
    """A saved-bytes counter written here; its keywords make the usual slips."""

    def saved_bytes(module, x):
        weights = {w.untyped_storage().data_ptr() for w in module.parameters()}
        kept, total = {}, 0

        def pack(tensor):
            nonlocal total
            storage = tensor.untyped_storage()
            if params or storage.data_ptr() not in weights:
                size = {
                    "storage": storage.nbytes(),
                    "tensor": tensor.nbytes,
                    "numel": tensor.numel(),
                }[nbytes]
                total += size
                if last:
                    kept[storage.data_ptr()] = size
                else:
                    kept.setdefault(storage.data_ptr(), size)
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            module(x)
        return sum(kept.values()) if once else total

    return saved_bytes


def test_6_10_a_counter_by_storage_without_parameters_is_right():
    verdict = check("6.10", _counter())
    assert verdict and "4 blocks" in verdict.message
    assert check("6.10", _counter(last=True))  # which view of a storage comes last: no matter


@pytest.mark.parametrize(
    ("counter", "slip"),
    [
        (_counter(params=True), "parameters too"),
        (_counter(params=True, last=True), "parameters too"),
        (_counter(once=False, nbytes="tensor"), "not each storage once"),
        (_counter(nbytes="tensor"), "size of the first tensor"),
        (_counter(nbytes="numel"), "elements"),
        (_counter(nbytes="numel", last=True), "elements"),
    ],
)
def test_6_10_each_slip_is_named(counter, slip):
    verdict = check("6.10", counter)
    assert not verdict and "the block keeps" in verdict.message and slip in verdict.hint


def test_6_10_other_wrong_functions():
    outputs = check("6.10", lambda module, x: module(x).untyped_storage().nbytes())
    assert not outputs and "saved_tensors_hooks" in outputs.hint
    constant = check("6.10", lambda module, x: 7520)
    assert not constant and "the block keeps" in constant.message
    raising = check("6.10", lambda module, x: 1 / 0)
    assert "raised ZeroDivisionError" in raising.message
    assert "a number of bytes" in check("6.10", lambda module, x: "many").message
    assert "a function saved_bytes" in check("6.10", 7520).message


@pytest.mark.parametrize(
    ("id", "words"),
    [
        ("6.7", "(e*(4*h + (a + 2*g)*h/a + h + 3*d_ff) + 4*a)/t"),
        ("6.8", '["full"] + ["selective"] * 5 + ["none"] * 2'),
        ("6.9", '(3, Parallel(tp=8, sp=True, attention="flash"))'),
        ("6.10", "saved_tensors_hooks"),
    ],
)
def test_solutions_give_the_worked_answer(id, words):
    assert words in repr(solution(id))
