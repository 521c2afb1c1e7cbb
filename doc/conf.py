"""Sphinx configuration of the skxclust documentation (``make docs``)."""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path

import torch

import skxclust

DOC = Path(__file__).resolve().parent
ROOT = DOC.parent
sys.path.insert(0, str(DOC))

from _generate import (  # noqa: E402
    api_sections,
    benchmark_results,
    example_links,
    optional_examples_missing,
    write_if_changed,
)

# -- project -----------------------------------------------------------------------------
project = "skxclust"
author = "the skxclust developers"
copyright = "the skxclust developers, BSD-3-Clause"
release = skxclust.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "_generated", "_api_sections.rst", "**.ipynb_checkpoints"]
default_role = "literal"

# -- pages generated from the code and the benchmark results -----------------------------
write_if_changed(DOC / "_api_sections.rst", api_sections())
write_if_changed(DOC / "_generated" / "benchmark_results.rst",
                 benchmark_results(ROOT / "benchmarks" / "results"))

_left_out = optional_examples_missing(ROOT / "examples", skxclust)
write_if_changed(DOC / "_generated" / "st_examples.rst", example_links(
    ["plot_st_vs_kmeans.py", "plot_appearance.py", "plot_1d_signals.py",
     "plot_gridsearch_landmarks.py"], _left_out))
write_if_changed(DOC / "_generated" / "gridsearch_example.rst",
                 example_links(["plot_gridsearch_landmarks.py"], _left_out))

# -- autodoc / autosummary / numpydoc ----------------------------------------------------
autosummary_generate = ["api.rst", "_api_sections.rst"]
autosummary_imported_members = True
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- sphinx-gallery ----------------------------------------------------------------------
# SKXCLUST_EXAMPLES_QUICK=1 runs every example on small data (a fast build); without it
# the examples run on their full (still small) data sets. Examples that need an estimator
# not exported yet are left out of the gallery.
_skip = [f"(^|/){re.escape(name)}$" for name in _left_out]
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    # only plot_*.py belong to the gallery (examples/ also holds scripts such as demo.py);
    # patterns are matched against bare file names and against paths
    "ignore_pattern": "|".join([r"(^|/)(?!plot_)[^/]*\.py$", *_skip]),
    "within_subsection_order": "FileNameSortKey",
    "doc_module": ("skxclust",),
    "backreferences_dir": "gen_modules/backreferences",
    "abort_on_example_error": True,
    "remove_config_comments": True,
    "download_all_examples": False,
    "show_memory": False,
    "matplotlib_animations": False,
}
os.environ.setdefault("MPLBACKEND", "Agg")
# The examples are small: one torch thread is faster than several competing for cores.
torch.set_num_threads(int(os.environ.get("SKXCLUST_DOC_THREADS", "1")))
warnings.filterwarnings("ignore", message="Matplotlib is currently using agg")
# numpydoc warns about torch-style "Shape" sections; _clean_docstring renders them as Notes
warnings.filterwarnings("ignore", message="Unknown section Shape", category=UserWarning)

# -- HTML --------------------------------------------------------------------------------
try:
    import pydata_sphinx_theme  # noqa: F401

    html_theme = "pydata_sphinx_theme"
    html_theme_options = {
        "navigation_with_keys": False,
        "show_toc_level": 2,
        "secondary_sidebar_items": ["page-toc"],
    }
except ImportError:  # pragma: no cover - fallbacks when the theme is not installed
    try:
        import furo  # noqa: F401

        html_theme = "furo"
    except ImportError:
        html_theme = "alabaster"
html_title = f"skxclust {release}"
html_static_path: list[str] = []
html_show_sourcelink = False


# -- docstring clean-up ------------------------------------------------------------------
# Raw docstrings (r"""...""", used for LaTeX) keep a line-continuation backslash
# literally; join such lines as Python does in a normal string. In numpydoc type specs,
# names with a trailing underscore ("(n_features_in_,)") would read as reST references;
# quote them as literals. torch-style "Shape" sections become Notes.
_PARAM_LINE = re.compile(r"^(\s*\*{0,2}[\w, .*\\]+\*{0,2}\s+:\s)(.*)$")
_TRAILING_UNDERSCORE = re.compile(r"(?<![`\w])(\w+_)(?![`\w])")
_SKIPPED_MEMBERS = re.compile(r"^(set_\w+_request|get_metadata_routing|set_output)$")


def _clean_docstring(app, what, name, obj, options, lines) -> None:
    i = 0
    while i < len(lines) - 1:
        if lines[i].endswith("\\") and not lines[i].endswith("\\\\"):
            lines[i] = lines[i][:-1].rstrip() + " " + lines.pop(i + 1).strip()
        else:
            i += 1
    _shape_section_as_notes(lines)
    for i, line in enumerate(lines):
        match = _PARAM_LINE.match(line)
        if match:
            lines[i] = match.group(1) + _TRAILING_UNDERSCORE.sub(r"`\1`", match.group(2))


def _shape_section_as_notes(lines: list[str]) -> None:
    """torch-style "Shape" sections are not numpydoc; show them under Notes."""
    headings = [i for i in range(len(lines) - 1)
                if lines[i].strip() and set(lines[i + 1].strip()) == {"-"}]
    names = {lines[i].strip() for i in headings}
    for i in headings:
        if lines[i].strip() == "Shape" and "Notes" not in names:
            lines[i], lines[i + 1] = "Notes", "-----"
            body = next((j for j in range(i + 2, len(lines)) if lines[j].strip()), None)
            if body is not None:
                lines[body] = "Shape: " + lines[body].strip()
            return


def _skip_member(app, what, name, obj, skip, options):
    # scikit-learn's metadata-routing and set_output helpers cross-reference its own
    # docs (set_output is documented there), and an
    # undocumented ``forward`` would show torch's generic nn.Module text
    if _SKIPPED_MEMBERS.match(name):
        return True
    if name == "forward" and getattr(obj, "__doc__", None) is None:
        return True
    return None


def setup(app) -> None:
    app.connect("autodoc-process-docstring", _clean_docstring, priority=100)
    app.connect("autodoc-skip-member", _skip_member)
