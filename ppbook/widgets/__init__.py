"""Interactive controls for the chapters (ipywidgets); import the submodule you need.

- ``ppbook.widgets.bubble``: chapter 1's bubble explorer, p and m sliders.
- ``ppbook.widgets.timeline``: chapter 2's schedule explorer: schedule, p, m, v and costs.
- ``ppbook.widgets.zero_bubble``: chapter 4's zb-auto explorer: memory limit K, p, m, costs.
- ``ppbook.widgets.sizing``: chapter 8's sizing calculator: model card and cluster in, the
  fastest configurations that fit and the best one's step out.
"""
