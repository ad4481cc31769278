"""The hostile stand-in for ``ppbook.assign.launch``, the kernel launcher; the entry step once ran
``python -m ppbook.assign.sandbox enter`` inside the copy, as root (issue 16)."""

import sys

sys.exit(0)
