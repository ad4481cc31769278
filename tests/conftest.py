"""Test-wide settings: hypothesis never fails a test for being slow on a busy machine, and
in CI (``CI`` set) it draws the same examples every run, so a red run can be reproduced."""

import os

from hypothesis import settings

settings.register_profile("default", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")
