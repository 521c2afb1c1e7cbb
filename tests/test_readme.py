"""Every Python block of the README runs as written (top to bottom, one namespace) and does
what its comments state (``CHECKS``: labels, argmin and argmax identities, conservation).

The README's blocks load scikit-learn's digits; here ``sklearn.datasets.load_digits``
returns a stratified subset of :data:`SUBSET` digits (documented in the README's
Development section), so that the ST K-means blocks take seconds, not minutes.
"""

import re
from pathlib import Path

import numpy as np
import pytest
import sklearn.datasets
import torch

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


def _close(a, b, rtol=1e-6):
    """``a == b`` "to rounding", as the README means it (1e-6 relative, see its NEON section)."""
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.abs(b).max())


def check_explainable(ns):
    X, km, labels, f = ns["X"], ns["km"], ns["labels"], ns["f"]
    np.testing.assert_array_equal(labels, km.labels_)  # like KMeans: predict(X) == labels_
    np.testing.assert_array_equal(f.argmax(1), labels)
    np.testing.assert_array_equal(f > 0, labels[:, None] == np.arange(10))  # > 0 if assigned
    _close(ns["R"].sum(1), f.max(1))
    _close(ns["R7"].sum(1), f[:, 7])
    np.testing.assert_allclose(ns["P"].sum(1), 1.0)
    np.testing.assert_array_equal(ns["P"].argmax(1), labels)
    with torch.no_grad():
        _close(ns["net"](torch.from_numpy(X)).numpy(), f, rtol=1e-9)


def check_st(ns):
    X, st, labels = ns["X"], ns["st"], ns["labels"]
    np.testing.assert_array_equal(labels, st.labels_)
    np.testing.assert_array_equal(ns["D"].argmin(1), labels)
    _close(ns["R"].sum(1), st.decision_function(X).max(1))
    assert ns["aligned"].shape == ns["Rc"].shape == X.shape


def check_deep(ns):
    assert ns["R"].shape == (ns["X"].shape[0], 64)
    assert np.all(np.isfinite(ns["R"]))


def check_pipeline(ns):
    X, pipe = ns["X"], ns["pipe"]
    assert ns["R"].shape == (X.shape[0], 64)
    _close(ns["R"].sum(1), ns["f"])
    _close(ns["R3"].sum(1), pipe.decision_function(X)[:, 3])


def check_streaming(ns):
    da = pytest.importorskip("dask.array")
    X, km, R = ns["X"], ns["km"], ns["R"]
    assert isinstance(R, da.Array)  # a dask array, computed block by block
    _close(R.compute(), km.explain(X), rtol=1e-12)


def check_text(ns):
    features, relevance, X_text = ns["features"], ns["relevance"], ns["X_text"]
    assert ns["words"].shape == features.shape == (X_text.shape[0], 5)
    dense = ns["km_text"].explain(X_text)  # the 5 largest relevances of each document
    np.testing.assert_allclose(relevance, -np.sort(-dense, axis=1)[:, :5], rtol=1e-12)
    np.testing.assert_array_equal(np.take_along_axis(dense, features, 1), relevance)


def check_config(ns):
    assert skxclust.get_config()["progress"] is False


# What each README block's comments state, checked right after the block runs (the key is
# a line of the block).
CHECKS = {
    "km = ExplainableKMeans(n_clusters=10, n_init=10, random_state=0).fit(X)":
        check_explainable,
    "st = SpatialTransformerKMeans(n_clusters=10, random_state=0).fit(X)": check_st,
    "km = ExplainableKMeans(10, feature_extractor=net, random_state=0).fit(X)": check_deep,
    "R = explain_pipeline(pipe, X)": check_pipeline,
    "km.fit(Xd)": check_streaming,
    "features, relevance = km_text.explain(X_text, top_k=5)": check_text,
    "skxclust.set_config(progress=False)": check_config,
}


def test_every_readme_python_block_runs_and_does_what_its_comments_say(small_digits):
    namespace = {"__name__": "readme"}
    blocks = python_blocks(README.read_text())
    for line, code in blocks:
        try:
            exec(compile(code, f"README.md, block at line {line}", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the message names the block
            pytest.fail(f"README.md block at line {line} failed: {exc!r}")
        checks = [check for key, check in CHECKS.items() if key in code]
        assert len(checks) == 1, f"README.md block at line {line}: add its claims to CHECKS"
        checks[0](namespace)
    assert len(blocks) == len(CHECKS)
