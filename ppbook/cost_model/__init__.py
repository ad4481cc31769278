"""The cost model: what a training job weighs and how long its pieces take.

Everything ``ppbook size`` and chapters 6 to 8 compute about a real model lives here, one
module a concern, lightest first:

- :mod:`.memory_bytes`: the model's shape and parallel layout, its parameter counts, the
  bytes of parameters, gradients and optimizer state, and the activations each layer keeps.
- :mod:`.flops`: floating-point operations of each pass; :mod:`.gpu_cards` the GPUs'
  published peaks (``ppbook/data/gpu_cards.json``); :mod:`.layer_time` a layer's pass
  times on a GPU, fitted to H200 measurements; :mod:`.step_work` the rest of a step's own
  work (embeddings, gradient accumulation, the optimizer step).
- :mod:`.across_nodes`: tensor against pipeline parallelism across nodes (chapter 7).
- :mod:`.sizing_search`: the search over layouts (``ppbook size``), with its costs in
  :mod:`.search_costs`, its stage costs and ranking in :mod:`.search_step` and its result
  in :mod:`.search_result`.

The links between GPUs (:mod:`ppbook.links`) belong to the simulator, which this layer
uses to time a step; nothing below :mod:`ppbook.cost_model` imports it.
"""
