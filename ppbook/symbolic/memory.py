"""Old path of :mod:`ppbook.symbolic.activation_peaks`, kept so that existing imports keep working.

``import ppbook.symbolic.memory`` gives that very module (the same object: attributes and
monkeypatches
are shared); new code imports the new path.
"""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("ppbook.symbolic.activation_peaks")
