"""Interactive controls for the chapters (ipywidgets); import the submodule you need.

- ``ppbook.widgets.bubble``: chapter 1's bubble explorer, p and m sliders.
"""
