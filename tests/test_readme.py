"""Every Python block of the README runs as written (top to bottom, one namespace).

The README's blocks load scikit-learn's digits; here ``sklearn.datasets.load_digits``
returns a stratified subset of :data:`SUBSET` digits (documented in the README's
Development section), so that the ST K-means blocks take seconds, not minutes.
"""

import re
from pathlib import Path

import pytest
import sklearn.datasets

import skxclust
from skxclust.datasets import stratified_subset

README = Path(__file__).resolve().parents[1] / "README.md"
SUBSET = 360
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of every fenced ```python block of ``text``."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


@pytest.fixture
def small_digits(monkeypatch):
    full = sklearn.datasets.load_digits

    def load_digits(*args, return_X_y=False, **kwargs):
        bunch = full(*args, **kwargs)
        X, y = stratified_subset(bunch.data, bunch.target, SUBSET, random_state=0)
        if return_X_y:
            return X, y
        bunch.data, bunch.target = X, y
        bunch.images = X.reshape(-1, 8, 8)
        return bunch

    monkeypatch.setattr(sklearn.datasets, "load_digits", load_digits)
    saved = skxclust.get_config()  # the README sets options: leave them as they were
    yield
    skxclust.set_config(**saved)


def test_readme_has_the_python_blocks_of_every_section():
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 6
    for name in ("ExplainableKMeans(", "SpatialTransformerKMeans(", "feature_extractor=",
                 "explain_pipeline(", "partial_fit(", "set_config("):
        assert any(name in code for _, code in blocks), name


def test_every_readme_python_block_runs(small_digits):
    namespace = {"__name__": "readme"}
    for line, code in python_blocks(README.read_text()):
        try:
            exec(compile(code, f"README.md, block at line {line}", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the message names the block
            pytest.fail(f"README.md block at line {line} failed: {exc!r}")
    assert namespace["R"].shape[0] > 0
