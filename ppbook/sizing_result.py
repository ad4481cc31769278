"""Old path of :mod:`ppbook.cost_model.search_result`, kept so that existing imports keep working.

``import ppbook.sizing_result`` gives that very module (the same object: attributes and
monkeypatches
are shared); new code imports the new path.
"""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("ppbook.cost_model.search_result")
