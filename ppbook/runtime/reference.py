"""The trusted answer: the same model, the same batch, in one process, no pipeline.

:func:`reference_run` builds the model and the batch exactly as every rank does (same
seeds) and trains it for ``config.steps`` steps, each the whole batch forward and backward
at once, then the same optimizer step (:func:`ppbook.runtime.training.make_optimizer`). A
correct pipeline gives the same loss at every step, the same gradient for every parameter
and the same parameters after the last step, up to rounding: in float64 the two agree to
about 1e-12 (:func:`assert_matches_reference`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.nn import functional

from ppbook.runtime.config import RunConfig, build_schedule, num_parts
from ppbook.runtime.models import build_blocks, step_data
from ppbook.runtime.result import RunResult
from ppbook.runtime.training import make_optimizer


@dataclass
class Reference:
    """What one process gives for a run: the loss of every step, the gradients of the last
    step, and the parameters after the last step's optimizer step (by whole-model name)."""

    losses: list[float]
    grads: dict[str, torch.Tensor]
    params: dict[str, torch.Tensor]


def reference_run(config: RunConfig) -> Reference:
    """Train ``config``'s model for ``config.steps`` steps in one process."""
    blocks = build_blocks(config, num_parts(build_schedule(config)))
    model = nn.Sequential(*blocks)
    inputs, targets, _ = step_data(config, [model])
    weights = [w for w in model.parameters() if w.requires_grad]
    optimizer = make_optimizer(config, weights) if weights else None
    losses = []
    for _ in range(config.steps):
        model.zero_grad(set_to_none=True)
        loss = functional.mse_loss(model(torch.cat(inputs)), torch.cat(targets))  # whole batch
        loss.backward()
        losses.append(loss.item())
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        if optimizer is not None:
            optimizer.step()
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    return Reference(losses, grads, params)


def reference_step(config: RunConfig) -> tuple[float, dict[str, torch.Tensor]]:
    """The loss and every parameter's gradient of ``config``'s model in one process, at
    its initial parameters (the first step of :func:`reference_run`)."""
    first = reference_run(replace(config, steps=1))
    return first.losses[0], first.grads


def assert_matches_reference(
    result: RunResult, rtol: float | None = None, atol: float | None = None
) -> None:
    """Assert that ``result``'s losses, gradients and parameters equal the single-process ones.

    Needs a run with ``collect_grads=True``. Tolerances default to 1e-10 in float64 and
    1e-4 in float32 (summing micro-batch gradients rounds differently than one batch).
    """
    if result.grads is None:
        raise ValueError("comparing gradients needs a run with collect_grads=True")
    tight = result.config.dtype == "float64"
    rtol = rtol if rtol is not None else (1e-10 if tight else 1e-4)
    atol = atol if atol is not None else (1e-12 if tight else 1e-6)
    reference = reference_run(result.config)
    schedule = result.schedule
    label = f"{schedule.name} p={schedule.num_ranks} m={schedule.num_microbatches}"
    torch.testing.assert_close(
        result.losses,
        reference.losses,
        rtol=rtol,
        atol=atol,
        msg=lambda m: f"{label}: the loss of some step differs. {m}",
    )
    for what, got, expected in (
        ("gradient of {}", result.grads, reference.grads),
        ("value of {} after the last step", result.params, reference.params),
    ):
        if set(got) != set(expected):
            missing = sorted(set(got) ^ set(expected))
            raise AssertionError(f"{label}: the {what.format(missing)} is missing on one side")
        for name, value in expected.items():
            torch.testing.assert_close(
                got[name],
                value,
                rtol=rtol,
                atol=atol,
                msg=lambda m, name=name, what=what: f"{label}: {what.format(name)} differs. {m}",
            )
