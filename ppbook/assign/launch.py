"""The grading kernel's launcher: ``python -I -m ppbook.assign.launch -f CONNECTION``, run
inside the sandbox in the submission's copy (used by :class:`ppbook.assign.kernel.Kernel`).

Started isolated (``-I``), the interpreter finds this launcher, ipykernel and ppbook among
the installed packages only: a ``ppbook/`` or ``ipykernel_launcher.py`` handed in beside the
notebook cannot stand in for them. ppbook is imported first, so the package stays the real
one even for the submission's own ``import ppbook...``. Only once the kernel is set up is
the copy (the current folder, ``""``) put on ``sys.path``, after the standard library as
IPython does, so the notebook imports its own modules (``my_transport.py``) as in Jupyter.
"""

from __future__ import annotations

import os
import sys

from ipykernel import kernelapp

import ppbook  # noqa: F401 (the installed package, before the copy is on sys.path)


def main() -> None:
    app = kernelapp.IPKernelApp.instance()
    app.initialize(sys.argv[1:])
    index = next(
        (
            i
            for i, p in enumerate(sys.path)
            if os.path.basename(p) in ("site-packages", "dist-packages")
        ),
        len(sys.path),
    )
    sys.path.insert(index, "")
    app.start()


if __name__ == "__main__":
    main()
