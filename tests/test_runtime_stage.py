"""The split backward (I then W) of one stage against torch.autograd on the whole model.

No process is started: two Stage objects in one process, the first sending its output to
the second by hand, compared with one backward through the same modules (float64).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional

from ppbook.runtime.stage import Stage


@pytest.fixture(autouse=True)
def float64():
    """Every tensor and module of these tests in float64; the default restored after."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def tied() -> nn.Sequential:
    """Linear, Tanh, Linear, the second Linear sharing the first's weight."""
    first, second = nn.Linear(5, 5), nn.Linear(5, 5)
    second.weight = first.weight
    return nn.Sequential(first, nn.Tanh(), second)


def frozen() -> nn.Sequential:
    """Linear, Tanh, Linear, Tanh, Linear with the middle Linear frozen."""
    model = nn.Sequential(nn.Linear(5, 5), nn.Tanh(), nn.Linear(5, 5), nn.Tanh(), nn.Linear(5, 5))
    model[2].requires_grad_(False)
    return model


def run_twice() -> nn.Sequential:
    """One Linear applied twice in a row (its weight used twice)."""
    linear = nn.Linear(5, 5)
    return nn.Sequential(linear, nn.Tanh(), linear)


def run_stages(first_part, last_part, x, target, how: str) -> None:
    """F of both stages, then the backward as ``how`` says: ``"B"`` or ``"IW"``."""
    first = Stage(0, first_part, num_microbatches=1, first=True)
    last = Stage(1, last_part, num_microbatches=1, first=False, loss_fn=functional.mse_loss)
    last.forward(0, first.forward(0, x).detach(), target)
    if how == "B":
        first.backward(0, last.backward(0, None))
    else:
        first.backward_input(0, last.backward_input(0, None))
        for part in (first_part, last_part):
            assert all(w.grad is None for w in part.parameters()), "I must not touch weights"
        last.backward_weight(0)
        first.backward_weight(0)
    assert not first.saved and not last.saved
    assert not first.weight_work and not last.weight_work


def expected_grads(first_part, last_part, x, target) -> list:
    """torch.autograd on the whole model in one process: the trusted answer."""
    first_part, last_part = copy.deepcopy(first_part), copy.deepcopy(last_part)
    functional.mse_loss(last_part(first_part(x)), target).backward()
    return [w.grad for part in (first_part, last_part) for w in part.parameters()]


CASES = {
    "tied weights on the last stage": lambda: (nn.Sequential(nn.Linear(5, 5)), tied()),
    "tied weights on the first stage": lambda: (tied(), nn.Sequential(nn.Linear(5, 5))),
    "a module run twice": lambda: (nn.Sequential(nn.Linear(5, 5)), run_twice()),
    "a frozen module on the last stage": lambda: (nn.Sequential(nn.Linear(5, 5)), frozen()),
    "a frozen module on the first stage": lambda: (frozen(), nn.Sequential(nn.Linear(5, 5))),
    "a first stage without parameters": lambda: (nn.Sequential(nn.Tanh()), tied()),
    "a first stage, all frozen": lambda: (nn.Linear(5, 5).requires_grad_(False), tied()),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("how", ["B", "IW"])
def test_the_backward_gives_the_gradients_of_autograd(case, how):
    torch.manual_seed(0)
    first_part, last_part = CASES[case]()
    x, target = torch.randn(3, 5), torch.randn(3, 5)
    expected = expected_grads(first_part, last_part, x, target)
    run_stages(first_part, last_part, x, target, how)
    got = [w.grad for part in (first_part, last_part) for w in part.parameters()]
    for index, (grad, reference) in enumerate(zip(got, expected, strict=True)):
        if reference is None:  # a frozen weight
            assert grad is None, index
        else:
            torch.testing.assert_close(grad, reference, rtol=1e-12, atol=1e-12)


def test_split_backward_counts_a_tied_weight_once_per_use():
    """The defect's own numbers: I+W equals B for the tied weight, not about twice it."""
    torch.manual_seed(1)
    grads = {}
    for how in ("B", "IW"):
        torch.manual_seed(1)
        first_part, last_part = nn.Sequential(nn.Linear(5, 5)), tied()
        x, target = torch.randn(3, 5), torch.randn(3, 5)
        run_stages(first_part, last_part, x, target, how)
        grads[how] = last_part[0].weight.grad
    torch.testing.assert_close(grads["IW"], grads["B"], rtol=1e-12, atol=1e-12)


def test_w_runs_only_what_i_left():
    """I sends back the input gradient of autograd; W then adds only weight gradients."""
    torch.manual_seed(2)
    part = nn.Sequential(nn.Linear(5, 5), nn.Tanh(), nn.Linear(5, 5))
    x, grad_out = torch.randn(3, 5), torch.randn(3, 5)
    leaf = x.clone().requires_grad_()
    (expected_input_grad,) = torch.autograd.grad(copy.deepcopy(part)(leaf), leaf, grad_out)
    stage = Stage(1, part, num_microbatches=1, first=False)
    stage.forward(0, x)
    input_grad = stage.backward_input(0, grad_out)
    torch.testing.assert_close(input_grad, expected_input_grad, rtol=1e-12, atol=1e-12)
    stage.backward_weight(0)
    assert all(w.grad is not None for w in part.parameters())


def test_a_stage_that_passes_its_input_through():
    """A part without operations (Identity): I hands the output gradient straight back."""
    stage = Stage(1, nn.Identity(), num_microbatches=1, first=False)
    x, grad_out = torch.randn(3, 5), torch.randn(3, 5)
    stage.forward(0, x)
    torch.testing.assert_close(stage.backward_input(0, grad_out), grad_out)
    stage.backward_weight(0)
