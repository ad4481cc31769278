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

__version__ = "0.2.0"


def written_for(version: str) -> str | None:
    """Check the installed ppbook against the ``version`` a notebook was written for.

    Every chapter calls it in its first code cell, ``ppbook.written_for("0.2.0")``: with
    that version installed it says nothing and returns None; with another, it prints (and
    returns) one line saying which version the chapter expects, which is installed, and how
    to get the right one, since figures and exercise checks may differ between versions.
    """
    if not isinstance(version, str) or not version.strip():
        raise ValueError(f"written_for needs a version string such as '0.2.0', got {version!r}")
    if version.strip() == __version__:
        return None
    message = (
        f"This chapter was written for ppbook {version.strip()}; ppbook {__version__} is "
        f"installed, and its numbers and exercise checks may differ: check out the "
        f"book's release tag v{version.strip()} (git checkout v{version.strip()}) and run "
        f"`make book`, or install that release's wheel."
    )
    print(message)
    return message
