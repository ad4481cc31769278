"""Old path of :mod:`ppbook.views.memory_panel`, kept so that existing imports keep working.

``import ppbook.views.memory`` gives that very module (the same object: attributes and monkeypatches
are shared); new code imports the new path.
"""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("ppbook.views.memory_panel")
