"""Pages written at build time by ``conf.py``: the API listing and the benchmark tables.

The API listing is built from each module's ``__all__``, so a public name added to the
package appears in the reference without editing the docs, and a module or estimator that
does not exist yet is simply left out. Benchmark tables are read from
``benchmarks/results/*.json``.
"""

from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path

__all__ = ["api_sections", "benchmark_results", "example_links", "optional_examples_missing",
           "write_if_changed"]

# (title, module, intro); modules that cannot be imported are skipped.
API_MODULES = [
    ("Estimators and pipeline explanations", "skxclust",
     "The scikit-learn estimators, and relevance through whole pipelines."),
    ("Neural-network layers and relevance rules", "skxclust.nn",
     "Pure torch (no scikit-learn import): the neuralized k-means layers, the NEON rules "
     "that explain them, LRP through feature extractors with its rules as objects, and the "
     "warps of ST K-means. The building blocks behind them stay in the submodules named in "
     "the package docstring (e.g. ``skxclust.nn.tps``, ``skxclust.nn.centroid_update``)."),
    ("Metrics", "skxclust.metrics", "Clustering accuracy and scorers."),
    ("Plotting", "skxclust.plotting",
     "Figures of centroids and relevance maps (needs matplotlib)."),
    ("Data sets and deformations", "skxclust.datasets",
     "Loaders for image data and deterministic deformation generators."),
]

# Names an example may need before the package exports them (see optional_examples_missing).
OPTIONAL_NAMES = ("SpatialTransformerKMeans",)


def write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it already holds it (keeps incremental builds)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _heading(text: str, char: str) -> str:
    return f"{text}\n{char * len(text)}\n"


def _autosummary(module: str, names: list[str]) -> str:
    lines = [".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""]
    lines += [f"   {name}" for name in names]
    return f".. currentmodule:: {module}\n\n" + "\n".join(lines) + "\n"


def api_sections() -> str:
    """reST with one autosummary section per importable public module."""
    parts = []
    for title, module_name, intro in API_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        names = [n for n in getattr(module, "__all__", []) if not n.startswith("_")]
        classes = sorted(n for n in names if inspect.isclass(getattr(module, n, None)))
        functions = sorted(n for n in names if inspect.isfunction(getattr(module, n, None)))
        others = sorted(n for n in names if n not in classes and n not in functions
                        and callable(getattr(module, n, None)))
        if not (classes or functions or others):
            continue
        parts.append(_heading(title, "-"))
        parts.append(f":mod:`{module_name}` — {intro}\n")
        for label, group in (("Classes", classes), ("Functions", functions),
                             ("Other callables", others)):
            if group:
                parts.append(f"**{label}**\n")
                parts.append(_autosummary(module_name, group))
    return "\n".join(parts)


def optional_examples_missing(examples_dir: Path, package) -> list[str]:
    """File names of gallery examples that use a name the package does not export yet."""
    missing = [n for n in OPTIONAL_NAMES if not hasattr(package, n)]
    return sorted(p.name for p in Path(examples_dir).glob("plot_*.py")
                  if any(n in p.read_text() for n in missing))


def example_links(names: list[str], left_out: list[str]) -> str:
    """A "see also" block linking the gallery examples ``names`` that are built.

    Examples left out of this build (see :func:`optional_examples_missing`) are named
    without a link, so that the page builds without dangling references.
    """
    built = [n for n in names if n not in left_out]
    lines = []
    if built:
        refs = ", ".join(f":ref:`sphx_glr_auto_examples_{n}`" for n in built)
        lines.append(f".. seealso::\n\n   Examples: {refs}.\n")
    if len(built) < len(names):
        pending = ", ".join(f"``examples/{n}``" for n in names if n in left_out)
        lines.append(f".. note::\n\n   {pending}: in the gallery once the estimator they "
                     "use is exported by the package.\n")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- benchmarks
def _is_scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _cell(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        text = f"{value:.4g}"
    else:
        text = str(value)
    return text.replace("|", "/").replace("\n", " ") or "–"


def _table(header: list[str], rows: list[list]) -> str:
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in [header, *rows]:
        lines.append(f"   * - {_cell(row[0])}")
        lines += [f"     - {_cell(c)}" for c in row[1:]]
    return "\n".join(lines) + "\n"


def _tables(data: dict) -> list[str]:
    """Tables for the parts of a result file that are tabular; the rest stays in the JSON."""
    out = []
    scalars = {k: v for k, v in data.items() if _is_scalar(v)}
    if scalars:
        out.append(_table(["field", "value"], [[k, v] for k, v in scalars.items()]))
    for key, value in data.items():
        if isinstance(value, dict) and value and all(_is_scalar(v) for v in value.values()):
            out.append(f"**{key}**\n\n" + _table(["name", "value"],
                                                 [[k, v] for k, v in value.items()]))
        elif isinstance(value, dict) and value and all(
            isinstance(v, dict) and all(_is_scalar(x) for x in v.values())
            for v in value.values()
        ):
            columns = list(dict.fromkeys(c for v in value.values() for c in v))
            rows = [[k, *(v.get(c) for c in columns)] for k, v in value.items()]
            out.append(f"**{key}**\n\n" + _table(["name", *columns], rows))
        elif isinstance(value, list) and value and all(
            isinstance(v, dict) and all(_is_scalar(x) for x in v.values()) for v in value
        ):
            columns = list(dict.fromkeys(c for v in value for c in v))
            rows = [[v.get(c) for c in columns] for v in value]
            out.append(f"**{key}**\n\n" + _table(columns, rows))
    return out


def benchmark_results(results_dir: Path) -> str:
    """reST for every ``*.json`` in ``results_dir``: its tables, then the raw file."""
    files = sorted(Path(results_dir).glob("*.json"))
    if not files:
        return (".. note::\n\n   No benchmark results yet. Run ``make bench``; every result "
                "file it writes to ``benchmarks/results/`` appears here on the next "
                "``make docs``.\n")
    parts = []
    for path in files:
        parts.append(_heading(path.stem, "~"))
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            parts.append(f".. warning::\n\n   ``{path.name}`` could not be read ({exc}).\n")
            continue
        if isinstance(data, dict):
            parts.extend(_tables(data))
        parts.append(f"Raw file ``benchmarks/results/{path.name}``:\n")
        parts.append(f".. literalinclude:: /../benchmarks/results/{path.name}\n"
                     "   :language: json\n")
    return "\n".join(parts)
