"""Interactive controls for the chapters (ipywidgets); import the submodule you need.

- ``ppbook.widgets.bubble_explorer``: chapter 1's bubble explorer: p, m, v and a target bubble; the
  smallest m that meets it; the curves and a timeline whose ramps shrink as m grows.
- ``ppbook.widgets.timeline_explorer``: chapter 2's schedule explorer: schedule, p, m, v and costs;
  its readouts (closed form against simulated, schedules side by side) are
  ``ppbook.widgets.compare``.
- ``ppbook.widgets.zero_bubble_explorer``: chapter 4's zb-auto explorer: memory limit K, p, m,
  costs.
- ``ppbook.widgets.sizing_explorer``: chapter 8's sizing calculator: model card and cluster in, the
  fastest configurations that fit and the best one's step out.
- ``ppbook.widgets.layout``: the layout they share: controls that wrap with slider tracks
  >= 150 px, 2x PNG pictures at their declared size that keep their space when hidden.
"""
