"""The cost model: what a training job weighs and how long its pieces take.

Everything ``ppbook size`` and chapters 6 to 8 compute about a real model lives here, one
module a concern, lightest first:

- :mod:`.model_shape`: a model's shape (``ModelShape``: GQA, SwiGLU, MoE, MLA, in the
  fields of a Hugging Face config) and its parallel layout (``Parallel``: tp, pp, dp, ep,
  cp, ZeRO stage, recomputation), with ``check_fit`` and the layer split; :mod:`.model_cards`
  the published models as cards (``ppbook/data/model_cards.json``) and ``read_hf_config``.
- :mod:`.parameters`: parameter counts, total and active, per tensor- and expert-parallel
  rank.
- :mod:`.activation_bytes`: what each layer keeps for its backward, tensor by tensor;
  :mod:`.memory_bytes` the bytes of parameters, gradients and optimizer state (18 bytes a
  parameter as Megatron keeps them, ZeRO 1 to 3 and FSDP) and of activations per rank.
- :mod:`.flops`: floating-point operations of each pass; :mod:`.gpu_cards` the GPUs'
  published peaks (``ppbook/data/gpu_cards.json``); :mod:`.layer_time` a layer's pass
  times on a GPU, fitted to H200 measurements; :mod:`.step_work` the rest of a step's own
  work (embeddings, gradient accumulation, the optimizer step) and its collectives (tensor
  parallelism with or without sequence parallelism, expert parallelism's all-to-all,
  context parallelism's ring, ZeRO and FSDP).
- :mod:`.across_nodes`: tensor against pipeline parallelism across nodes (chapter 7).
- :mod:`.sizing_search`: the search over layouts (``ppbook size``), with its costs in
  :mod:`.search_costs`, its stage costs and ranking in :mod:`.search_step` and its result
  in :mod:`.search_result`.

The links between GPUs (:mod:`ppbook.links`) belong to the simulator, which this layer
uses to time a step; nothing below :mod:`ppbook.cost_model` imports it.
"""
