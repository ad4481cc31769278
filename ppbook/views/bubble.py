"""Old path of :mod:`ppbook.views.bubble_curves`, kept so that existing imports keep working.

``import ppbook.views.bubble`` gives that very module (the same object: attributes and monkeypatches
are shared); new code imports the new path.
"""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("ppbook.views.bubble_curves")
