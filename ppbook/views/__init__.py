"""Views of a timeline: everything that turns a :class:`~ppbook.timeline.Timeline` into
something to look at. One layer, below the widgets and above the simulator.

- :mod:`~ppbook.views.gantt`: Gantt charts of a timeline, with a memory panel;
- :mod:`~ppbook.views.memory_panel`: the activation-memory panel;
- :mod:`~ppbook.views.colors`: the colours and names of the boxes' kinds;
- :mod:`~ppbook.views.bubble_curves`: bubble curves against m (chapter 1);
- :mod:`~ppbook.views.text`: a timeline as text, and its metrics;
- :mod:`~ppbook.views.trace`: Chrome trace export (Perfetto, chrome://tracing).

``import ppbook.views`` imports no plotting library; the modules that draw import
matplotlib themselves.
"""
