"""Every fully qualified Sphinx cross-reference to skxclust (``:func:`~skxclust.nn.x```,
``:mod:`skxclust._lloyd```, ...) in the package, the docs, the examples and the benchmarks
names something that exists. Sphinx checks the references of the pages it builds; this
also covers the private modules' docstrings, which no page renders."""

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROLE = re.compile(r":(?:func|mod|data|class|meth|attr|obj|exc):"
                  r"`(?:[^`<]*<)?~?(skxclust[\w.]*?)(?:\(\))?>?`")
SOURCES = ("skxclust/**/*.py", "doc/*.rst", "doc/user_guide/*.rst", "examples/*.py",
           "benchmarks/*.py")


def resolves(target: str) -> bool:
    """Whether the dotted ``target`` is a module or an attribute path below one."""
    parts = target.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for name in parts[split:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


def references():
    for pattern in SOURCES:
        for path in sorted(ROOT.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            for match in ROLE.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                yield f"{path.relative_to(ROOT)}:{line}", match.group(1)


REFERENCES = list(references())


def test_every_qualified_reference_names_something_that_exists():
    assert len(REFERENCES) > 250  # the scan sees the references (318 when written)
    missing = [f"{where} {target}" for where, target in REFERENCES if not resolves(target)]
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("target, exists", [
    ("skxclust.nn.warp_solver.fit_warps", True), ("skxclust._lloyd", True),
    ("skxclust.SpatialTransformerKMeans.explain", True),
    ("skxclust.nn.warp_solver.fit_warp", False), ("skxclust._lloyd.lloyd_loop", False),
    ("skxclust.nn.nonexistent_module", False)])
def test_resolution_tells_a_name_that_exists_from_one_that_does_not(target, exists):
    assert resolves(target) is exists


def test_the_pattern_reads_tilde_explicit_title_and_call_forms():
    text = (":func:`~skxclust.nn.fit_warps` :mod:`skxclust._lloyd` "
            ":meth:`the fit <skxclust.SpatialTransformerKMeans.fit>` "
            ":func:`skxclust.nn.neuralize()`")
    assert [m.group(1) for m in ROLE.finditer(text)] == [
        "skxclust.nn.fit_warps", "skxclust._lloyd", "skxclust.SpatialTransformerKMeans.fit",
        "skxclust.nn.neuralize"]
