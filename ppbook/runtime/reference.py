"""The trusted answer: the same model, the same batch, in one process, no pipeline.

:func:`reference_step` builds the model and the batch exactly as every rank does (same
seeds) and runs the whole batch forward and backward at once. A correct pipeline gives
the same loss and the same gradient for every parameter, up to rounding: in float64 the
two agree to about 1e-12 (:func:`assert_matches_reference`).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

from ppbook.runtime.config import RunConfig, build_schedule, num_parts
from ppbook.runtime.models import build_blocks, step_data
from ppbook.runtime.result import RunResult


def reference_step(config: RunConfig) -> tuple[float, dict[str, torch.Tensor]]:
    """The loss and every parameter's gradient of ``config``'s model in one process."""
    blocks = build_blocks(config, num_parts(build_schedule(config)))
    model = nn.Sequential(*blocks)
    inputs, targets, _ = step_data(config, [model])
    loss = functional.mse_loss(model(torch.cat(inputs)), torch.cat(targets))  # whole batch
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    return loss.item(), grads


def assert_matches_reference(
    result: RunResult, rtol: float | None = None, atol: float | None = None
) -> None:
    """Assert that ``result``'s loss and gradients equal the single-process ones.

    Needs a run with ``collect_grads=True``. Tolerances default to 1e-10 in float64 and
    1e-4 in float32 (summing micro-batch gradients rounds differently than one batch).
    """
    if result.grads is None:
        raise ValueError("comparing gradients needs a run with collect_grads=True")
    tight = result.config.dtype == "float64"
    rtol = rtol if rtol is not None else (1e-10 if tight else 1e-4)
    atol = atol if atol is not None else (1e-12 if tight else 1e-6)
    loss, grads = reference_step(result.config)
    schedule = result.schedule
    label = f"{schedule.name} p={schedule.num_ranks} m={schedule.num_microbatches}"
    torch.testing.assert_close(
        result.loss, loss, rtol=rtol, atol=atol, msg=lambda m: f"{label}: loss differs. {m}"
    )
    if set(result.grads) != set(grads):
        raise AssertionError(
            f"{label}: gradients for {sorted(set(result.grads) ^ set(grads))} are missing "
            "on one side"
        )
    for name, expected in grads.items():
        torch.testing.assert_close(
            result.grads[name],
            expected,
            rtol=rtol,
            atol=atol,
            msg=lambda m, name=name: f"{label}: gradient of {name} differs. {m}",
        )
