"""Sphinx configuration of the vastml documentation (built by ``bash scripts/docs.sh``)."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "_tools"))

project = "vastml"
author = "the vastml authors"
copyright = "vastml authors"

try:
    import vastml

    release = vastml.__version__
except Exception:  # pragma: no cover - docs can still build the prose without the extension
    release = "0.1"
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "docstring_fixes",  # docs/_tools/docstring_fixes.py: plain-text notation made rst-safe
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_tools", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]
templates_path = ["_templates"]

# Markdown (MyST)
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3

# API reference: one page per sub-package, written from its ``__all__`` at build time, so a
# name added to or renamed in ``__all__`` appears without editing the docs.
autosummary_generate = True
autosummary_imported_members = True
autodoc_member_order = "bysource"
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()
numpydoc_xref_param_type = False

import api_pages  # noqa: E402  (docs/_tools/api_pages.py)

api_pages.write_api_pages(HERE / "api")

# Gallery
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "plot_gallery": "False" if os.environ.get("DOCS_NO_GALLERY") == "1" else "True",
    "reset_modules": ("matplotlib",),
    "show_memory": False,
    "min_reported_time": 1,
    "backreferences_dir": "api/backrefs",
    "doc_module": ("vastml",),
    "reference_url": {"vastml": None},
}

warnings.filterwarnings("ignore", category=UserWarning, message="Matplotlib is currently using agg")

# Math is rendered by MathJax from its CDN (the Sphinx default). To look at the pages offline,
# point it at a local copy, e.g. Debian's libjs-mathjax (MathJax 2 wants its config):
#   VASTML_DOCS_MATHJAX=file:///usr/share/javascript/mathjax/MathJax.js?config=TeX-AMS_CHTML
if os.environ.get("VASTML_DOCS_MATHJAX"):
    mathjax_path = os.environ["VASTML_DOCS_MATHJAX"]

# HTML
html_theme = "pydata_sphinx_theme"
html_title = f"vastml {release}"
html_static_path = ["_static"]
html_css_files = ["vastml.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
    "header_links_before_dropdown": 6,
    # The benchmark and conventions pages are wide tables: give them the page's full width.
    "secondary_sidebar_items": {
        "guide/*": ["page-toc"],
        "api/**": ["page-toc"],
        "auto_examples/*": ["page-toc"],
        "benchmarks/*": [],
        "conventions": [],
    },
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_sidebars = {"index": [], "conventions": []}
html_show_sourcelink = False
