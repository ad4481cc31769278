"""FLOPs and pass times of a transformer split into pipeline stages (chapters 6 and 8).

Per micro-batch and tensor-parallel rank, counted as the Zero Bubble paper's Table 1
(Qi et al. 2024, arXiv:2401.10241): a layer's forward ``F`` is 24 b s h^2 + 4 b s^2 h
FLOPs, its input-gradient pass ``I`` (the paper's B) 24 b s h^2 + 8 b s^2 h, its
weight-gradient pass ``W`` 24 b s h^2 (MLP width 4h; matrix multiplies only), and
``B = I + W``. The last part adds the logits' 2 b s h V per pass; the embedding lookup
counts none. Recomputation runs its forward again before the backward: ``I`` grows by
all of ``F`` (full) or by the attention's 4 b s^2 h (selective). The tests check each
against :func:`ppbook.symbolic.transformer.layer_flops`, where the multiplies are listed.

:func:`stage_costs` turns them into :class:`~ppbook.costs.Costs` in seconds for a
schedule, with the activation bytes of :mod:`ppbook.cost_model.memory_bytes`, ready for the
simulator.
"""

from __future__ import annotations

from ppbook.checks import as_quantity
from ppbook.cost_model.memory_bytes import (
    ModelShape,
    Parallel,
    check_fit,
    layers_of,
    part_activation_bytes,
    parts_of,
)
from ppbook.costs import Costs
from ppbook.pipeline_schedule import Schedule


def layer_flops(shape: ModelShape, parallel: Parallel) -> dict[str, float]:
    """FLOPs of one micro-batch through one layer on one rank: ``F``, ``I``, ``W``, ``B``."""
    check_fit(shape, parallel)
    s, h, t = shape.seq_len, shape.hidden, parallel.tp
    tokens = s * parallel.microbatch_size
    linear = 2 * (4 + 2 * shape.ffn_multiple) * tokens * h * h  # weight multiplies, forward
    attention = 4 * tokens * s * h  # QK^T and attention over V, forward
    again = {"none": 0, "selective": attention, "full": linear + attention}[parallel.recompute]
    out = {
        "F": (linear + attention) / t,
        "I": (linear + 2 * attention + again) / t,
        "W": linear / t,
    }
    out["B"] = out["I"] + out["W"]
    return out


def part_flops(shape: ModelShape, parallel: Parallel, layers_per_part) -> list[dict[str, float]]:
    """FLOPs of one micro-batch through each model part (``F``, ``I``, ``W``, ``B = I + W``);
    the last part adds the logits' 2 b s h V per pass (the embedding lookup counts none)."""
    layers = layers_of(shape, layers_per_part)
    one = layer_flops(shape, parallel)
    out = [{k: n * x for k, x in one.items()} for n in layers]
    logits = 2 * shape.seq_len * parallel.microbatch_size * shape.hidden
    logits *= -(-shape.vocab // parallel.tp)
    for key, times in (("F", 1), ("I", 1), ("W", 1), ("B", 2)):
        out[-1][key] += times * logits
    return out


def stage_costs(
    schedule: Schedule,
    shape: ModelShape,
    parallel: Parallel,
    flops_per_second: float,
    layers_per_part=None,
    **kwargs,
) -> Costs:
    """:class:`~ppbook.costs.Costs` in seconds for ``schedule``: ``F``, ``I``, ``W`` and
    ``B = I + W`` from :func:`part_flops` at ``flops_per_second``, and ``activation_bytes``
    (:func:`stage_values`).

    Values are per stage in ppbook's cost convention (one device's share: a part's own
    time divided by ``schedule.chunk_share``, which the simulator multiplies back).
    ``kwargs`` go to ``Costs`` (``comm``, ``comm_bytes``, ``bandwidth``). Times are in
    seconds (``time_unit="s"``, which simulated timelines then carry).
    """
    kwargs.setdefault("time_unit", "s")
    return Costs(
        **stage_values(schedule, shape, parallel, flops_per_second, layers_per_part), **kwargs
    )


def stage_values(
    schedule: Schedule,
    shape: ModelShape,
    parallel: Parallel,
    flops_per_second: float,
    layers_per_part=None,
) -> dict[str, list[float]]:
    """What :func:`stage_costs` puts in its ``Costs``, per stage: ``F``, ``B``, ``I`` and
    ``W`` in seconds and ``activation_bytes``, without building the ``Costs`` (a sizing
    search needs the times of every option, and the ``Costs`` of the few it simulates)."""
    speed = as_quantity(flops_per_second, "flops_per_second", "stage_costs", inclusive=False)
    layers = parts_of(schedule, shape, layers_per_part)
    flops = part_flops(shape, parallel, layers)
    sizes = part_activation_bytes(shape, parallel, layers)
    share = schedule.chunk_share
    parts = [schedule.model_part(k) for k in range(schedule.num_stages)]
    values = {key: [flops[k][key] / speed / share for k in parts] for key in ("F", "B", "I", "W")}
    values["activation_bytes"] = [sizes[k] / share for k in parts]
    return values
