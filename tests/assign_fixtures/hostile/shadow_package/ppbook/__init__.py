"""A hostile stand-in for ppbook, handed in beside a notebook (``tests/test_assign_hostile.py``
copies it next to ``shadow.ipynb``): whatever imports it from the submission's folder writes
ESCAPE_MARKER outside the copy and tries to remount ``/`` read-write. The grader's entry step
and kernel must never import it."""

import os
import subprocess
from pathlib import Path

Path("ESCAPE_MARKER").write_text(f"written by uid {os.getuid()}")
if not os.environ.get("PPBOOK_FIXTURE_CONTROL"):  # the test's control run leaves / alone
    subprocess.run(["mount", "-o", "remount,rw", "/"], capture_output=True, check=False)
