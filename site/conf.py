"""Sphinx configuration of the book's website (``make site``; site/build.py runs Sphinx).

The sources are made by site/build.py in ``_build/site-src/``: the executed, static
notebooks (site/prepare.py), site/pages/*.md, the references page and the generated CLI
and API references. Sphinx with MyST-NB and the Sphinx Book Theme, all from PyPI; MathJax
is served from the site itself (the ``sphinx-mathjax-offline`` package), so every page
renders without a network. Notebooks are never executed here: site/prepare.py did it once.
"""

import ppbook

project = "ppbook: pipeline parallelism, derived, simulated and measured"
author = "the ppbook authors"
copyright = "the ppbook authors, MIT licence"
version = release = ppbook.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx-mathjax-offline",  # MathJax 3 copied into _static/mathjax: no CDN
]
root_doc = "index"
smartquotes = False  # "--max-stages" stays two hyphens, as a reader types it
exclude_patterns = ["downloads/**", "**/.ipynb_checkpoints"]

# Executed once by site/prepare.py (cached in _build/executed/); nothing runs here.
nb_execution_mode = "off"
nb_ipywidgets_js = {}  # widgets are drawn as pictures of their first state: no widget scripts
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_dmath_double_inline = True  # $$...$$ inside a paragraph, as the notebooks write it
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_default_options = {"undoc-members": False}
autodoc_inherit_docstrings = False  # torch's and matplotlib's docstrings are not ppbook's
# Docstrings name modules relative to their package (:mod:`checks` in ppbook.symbolic); where
# two modules share the name, Sphinx links the nearer one and would warn.
suppress_warnings = ["myst.header", "ref.python"]


def skip_foreign(app, what, name, obj, skip, options):
    """Leave out members that ppbook does not define (matplotlib's generated ``set``)."""
    module = getattr(obj, "__module__", None)
    if isinstance(module, str) and not module.startswith("ppbook"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", skip_foreign)


# MathJax as JupyterLab uses it: $...$ and \(...\) also inside HTML outputs (ppbook's tables
# print their formulas in dollars), not only in the text Sphinx marks as math.
mathjax3_config = {
    "tex": {"inlineMath": [["$", "$"], ["\\(", "\\)"]], "processEscapes": True},
    "options": {
        "ignoreHtmlClass": "tex2jax_ignore|mathjax_ignore|document",
        "processHtmlClass": "tex2jax_process|mathjax_process|math|output_area|text_html",
    },
}
myst_update_mathjax = False  # the classes above already include MyST's (output_area)

html_theme = "sphinx_book_theme"
html_context = {"default_mode": "light"}  # the theme's mode switch starts from a valid mode
html_title = f"ppbook {release}"
html_static_path = ["static"]  # site/static: the site's own CSS
html_css_files = ["ppbook.css"]
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
html_theme_options = {
    "use_download_button": False,  # each page links its committed notebook itself
    "use_fullscreen_button": False,
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
