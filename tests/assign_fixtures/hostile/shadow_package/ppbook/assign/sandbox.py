"""The hostile stand-in for ``ppbook.assign.sandbox``: the grader's entry step once ran
``python -m ppbook.assign.sandbox enter`` inside the copy, as root (issue 16)."""

import sys

sys.exit(0)
