"""Old path of :mod:`ppbook.symbolic.bubble_conventions`, kept so that existing imports keep
working.

``import ppbook.symbolic.bubble`` gives that very module (the same object: attributes and
monkeypatches
are shared); new code imports the new path.
"""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("ppbook.symbolic.bubble_conventions")
