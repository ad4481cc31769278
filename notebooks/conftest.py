"""pytest settings for the notebooks folder: which notebooks nbval collects."""

import os


def pytest_ignore_collect(collection_path, config):
    """The chapters (``notebooks/*.ipynb``) are executed once per session by the site's
    build (tests/test_site.py: each from a fresh kernel, failing on any cell error, as
    nbval does for notebooks that store no outputs), so nbval leaves them out when it
    collects the whole tree. A chapter named on the command line
    (``pytest --nbval notebooks/01_bubble.ipynb``), or ``PPBOOK_NBVAL_CHAPTERS=1``, runs
    under nbval as before; the assignments always do."""
    from pathlib import Path

    path = Path(collection_path)
    notebooks = Path(__file__).resolve().parent
    if path.suffix != ".ipynb" or path.resolve().parent != notebooks:
        return None
    if os.environ.get("PPBOOK_NBVAL_CHAPTERS") == "1":
        return None
    here = Path(config.invocation_params.dir)
    named = {(here / arg.split("::")[0]).resolve() for arg in config.args}
    return None if path.resolve() in named else True
