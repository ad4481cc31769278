"""Old path of :mod:`ppbook.cost_model.across_nodes`, kept so that existing imports keep working.

``import ppbook.across_nodes`` gives that very module (the same object: attributes and monkeypatches
are shared); new code imports the new path.
"""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("ppbook.cost_model.across_nodes")
