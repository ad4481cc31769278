"""ppbook: the package behind the pipeline-parallelism textbook companion.

Layers, lightest first (dependencies flow one way):

- ``ppbook.symbolic``: closed forms derived with sympy (chapter 1).
- ``ppbook.pipeline_schedule``, ``ppbook.schedules``, ``ppbook.simulate``, ``ppbook.timeline``:
  schedules as plain data and the simulator that times them (standard library only).
- ``ppbook.cost_model``: what a real model weighs and how long its passes take: model
  cards, parameter and activation bytes, FLOPs, GPU times, the sizing search.
- ``ppbook.views``, ``ppbook.widgets``: pictures, text, Chrome traces, sliders.
- ``ppbook.runtime``: the minimal torch.distributed pipeline (the only layer that imports torch).

``import ppbook`` imports none of the heavy layers: import the submodule you need.
"""

__version__ = "0.1.0"
