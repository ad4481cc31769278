"""One pipeline stage: a model part and the four computations a schedule asks of it.

- ``F`` :meth:`Stage.forward`: run the part on a micro-batch and keep what backward needs
  (the last part also computes the loss).
- ``B`` :meth:`Stage.backward`: the full backward, gradients for the stage input and for
  the weights together.
- ``I`` :meth:`Stage.backward_input` and ``W`` :meth:`Stage.backward_weight`: the same
  backward in two passes, as zero-bubble schedules split it (Qi et al. 2024, "Zero Bubble
  Pipeline Parallelism", arXiv:2401.10241, sec. 2).

How the backward is split. The backward is a graph of autograd nodes, from the stage output
down to the stage input and to the weights. ``I`` runs the nodes that lie on a path to the
input (the previous stage waits for their result) and stops at the edges that leave them
for nodes only the weights need: it keeps the gradient flowing into each such edge. ``W``
later starts from those edges with the kept gradients and runs the rest, down to the
weights. Every node runs once, in ``I`` or in ``W``, so a weight used twice (tied weights)
gets each use's gradient once, as in ``B``. PyTorch's pipelining splits at autograd nodes
too (``stage_backward_input`` / ``stage_backward_weight``); it keeps the gradients into
the last input-path nodes and runs those nodes again in ``W``. Frozen weights
(``requires_grad=False``) are left alone; a part without trainable weights has nothing to
do in ``W``.

Mixed precision (``masters``, :class:`~ppbook.runtime.precision.MasterWeights`): after
every ``B`` and every ``W`` the stage adds the micro-batch's bf16 weight gradients into
their fp32 buffers and clears them, so micro-batches add up in fp32 (Megatron-LM's
``main_grad``). Without ``masters`` (float32, float64) the gradients add up in ``.grad``.

No communication here: :mod:`ppbook.runtime.execute` moves tensors between stages.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.autograd.graph import GradientEdge, get_gradient_edge

from ppbook.runtime.precision import MasterWeights

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class Stage:
    """The state one stage chunk keeps between a micro-batch's forward and its backward.

    ``first``: the part takes the model input (no gradient for it is sent back).
    ``loss_fn``: given for the last part; its output is ``loss_fn(out, target) / m``, so
    that summing over the m micro-batches gives the loss of the whole batch.
    ``log``: a list shared by the stages of one rank, to which each computation appends
    its action (``"1F3"``), so tests can check what really ran, in what order.
    ``masters``: in mixed precision, the fp32 master weights and gradient buffers of the
    part's :meth:`weights`, into which each ``B`` and ``W`` adds its gradients.
    """

    def __init__(
        self,
        stage: int,
        module: nn.Module,
        *,
        num_microbatches: int,
        first: bool,
        loss_fn: Loss | None = None,
        log: list[str] | None = None,
        masters: MasterWeights | None = None,
    ):
        self.stage = stage
        self.module = module
        self.num_microbatches = num_microbatches
        self.first = first
        self.loss_fn = loss_fn
        self.log = log if log is not None else []
        self.masters = masters
        self.saved: dict[int, tuple] = {}  # micro-batch -> (input, output)
        self.weight_work: dict[int, tuple] = {}  # micro-batch -> (edges, their gradients)

    def weights(self) -> list[nn.Parameter]:
        """The trainable weights of the part (each once, also when tied)."""
        return [w for w in self.module.parameters() if w.requires_grad]

    # ----- F ----------------------------------------------------------------------------

    def forward(
        self, microbatch: int, x: torch.Tensor, target: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Run the part on ``x``; return its output (the scaled loss on the last part)."""
        self.log.append(f"{self.stage}F{microbatch}")
        if not self.first:  # a leaf, so that backward leaves its gradient in x.grad
            x = x.detach().requires_grad_()
        out = self.module(x)
        if self.loss_fn is not None:
            out = self.loss_fn(out, target) / self.num_microbatches  # a scalar
        self.saved[microbatch] = (x, out)
        return out

    # ----- B ----------------------------------------------------------------------------

    def backward(self, microbatch: int, grad_output: torch.Tensor | None) -> torch.Tensor | None:
        """Full backward; return the gradient for the stage input (None on the first part)."""
        self.log.append(f"{self.stage}B{microbatch}")
        x, out = self.saved.pop(microbatch)
        if out.requires_grad:  # else: a first part without trainable weights
            torch.autograd.backward(out, grad_output)
        self._collect()
        if self.first:
            return None
        return x.grad if x.grad is not None else torch.zeros_like(x)

    # ----- I and W ----------------------------------------------------------------------

    def backward_input(
        self, microbatch: int, grad_output: torch.Tensor | None
    ) -> torch.Tensor | None:
        """``I``: the gradient for the stage input; keep the gradients that ``W`` starts from."""
        self.log.append(f"{self.stage}I{microbatch}")
        x, out = self.saved.pop(microbatch)
        if not out.requires_grad:  # a first part without trainable weights: nothing to do
            self.weight_work[microbatch] = ([], [])
            return None
        inputs = () if self.first else (get_gradient_edge(x),)
        input_path, edges = split_graph(out, inputs, self.weights())
        if not input_path:  # nothing of the backward leads to the input: W does all of it
            seed = grad_output if grad_output is not None else torch.ones_like(out)
            self.weight_work[microbatch] = ([get_gradient_edge(out)], [seed])
            return None if self.first else torch.zeros_like(x)
        grads = torch.autograd.grad(
            out, [*inputs, *edges], grad_output, retain_graph=True, allow_unused=True
        )  # the graph stays for W
        kept = [(e, g) for e, g in zip(edges, grads[len(inputs) :], strict=True) if g is not None]
        self.weight_work[microbatch] = ([e for e, _ in kept], [g for _, g in kept])
        if self.first:
            return None
        return grads[0] if grads[0] is not None else torch.zeros_like(x)

    def backward_weight(self, microbatch: int) -> None:
        """``W``: accumulate the weight gradients, from the edges and gradients ``I`` kept."""
        self.log.append(f"{self.stage}W{microbatch}")
        edges, grads = self.weight_work.pop(microbatch)
        weights = self.weights()
        if not edges or not weights:
            return
        found = torch.autograd.grad(edges, weights, grads, allow_unused=True)
        for weight, grad in zip(weights, found, strict=True):
            if grad is not None:
                weight.grad = grad if weight.grad is None else weight.grad + grad
        self._collect()

    def _collect(self) -> None:
        """Mixed precision: move this micro-batch's weight gradients into the fp32 buffers."""
        if self.masters is not None:
            self.masters.collect()


def split_graph(
    out: torch.Tensor, inputs: tuple[GradientEdge, ...], weights: list[torch.Tensor]
) -> tuple[set, list[GradientEdge]]:
    """Cut the backward graph of ``out`` between ``I`` and ``W``.

    Returns the nodes on a path from ``out`` to one of ``inputs`` (what ``I`` runs), and
    the edges from those nodes to nodes that lead only to ``weights`` (where ``W`` starts).
    """
    input_nodes = {edge.node for edge in inputs}
    weight_ids = {id(w) for w in weights}
    to_input: dict = {}  # node -> whether it leads to an input
    to_weight: dict = {}  # node -> whether it leads to a trainable weight
    stack = [(get_gradient_edge(out).node, False)]  # a leaf output: its accumulator
    while stack:  # depth-first, children before parents, without recursion
        node, children_done = stack.pop()
        if node in to_input:
            continue
        children = [child for child, _ in node.next_functions if child is not None]
        if not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in children if child not in to_input)
            continue
        to_input[node] = node in input_nodes or any(to_input[c] for c in children)
        to_weight[node] = id(getattr(node, "variable", None)) in weight_ids or any(
            to_weight[c] for c in children
        )
    input_path = {node for node, leads in to_input.items() if leads}
    edges = {}
    for node in input_path:
        for child, index in node.next_functions:
            if child is not None and not to_input[child] and to_weight[child]:
                edges[(child, index)] = GradientEdge(child, index)
    return input_path, list(edges.values())
