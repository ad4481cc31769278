"""Old path of :mod:`ppbook.widgets.zero_bubble_explorer`, kept so that existing imports
keep working.

``import ppbook.widgets.zero_bubble`` gives that very module
(the same object: attributes and monkeypatches are shared); new code imports the new path.
"""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("ppbook.widgets.zero_bubble_explorer")
