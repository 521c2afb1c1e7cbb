"""The refused inputs and the fitted estimators shared by the input-validation tests.

One case list (``CASES``) drives the tests of ``tests/test_input_validation_refused.py`` and
the table of refused inputs in ``doc/user_guide/refused_inputs.rst``; a ``Case`` is one
refused input with the methods that must refuse it, the exception and the message. The
estimators, the data ``X`` and ``fitted`` (fitted estimators, built once) are shared with
``tests/test_input_validation_accepted.py``; ``assert_same`` is the deep comparison both use
to check that nothing was changed.
"""

from __future__ import annotations

import copy
import functools
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import InvalidParameterError

from skxclust import ExplainableKMeans, SpatialTransformerKMeans

RNG = np.random.default_rng(0)
X = RNG.random((8, 16))  # 8 samples, 4 x 4 images (or 16 features)
COLUMNS = [f"p{i}" for i in range(16)]

ESTIMATORS = {
    "explainable": lambda **p: ExplainableKMeans(
        **{"n_clusters": 2, "random_state": 0, "device": "cpu", **p}),
    "spatial": lambda **p: SpatialTransformerKMeans(
        **{"n_clusters": 2, "n_steps": 2, "n_landmarks": 4, "max_iter": 2,
           "random_state": 0, "device": "cpu", **p}),
}
CLASS_NAMES = {"explainable": "ExplainableKMeans", "spatial": "SpatialTransformerKMeans"}
BOTH = ("explainable", "spatial")

FIT = ("fit", "fit_predict", "fit_transform", "partial_fit")
# A partial_fit chunk may hold fewer rows than n_clusters once the model is seeded.
FULL_FIT = ("fit", "fit_predict", "fit_transform")
INFER = ("predict", "transform", "score", "decision_function", "predict_proba", "explain",
         "align")
ALL = FIT + INFER
WEIGHTED = FIT + ("score",)
ONLY = {"predict_proba": "explainable", "align": "spatial"}


def has_method(estimator: str, method: str) -> bool:
    return ONLY.get(method, estimator) == estimator


# -- fitted estimators, shared by tests and the table generator -----------------------------
def _dataframe(data=X, columns=COLUMNS):
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(data, columns=columns)


@functools.cache
def fitted(estimator: str, kind: str = "array"):
    """A fitted estimator; never call methods on it directly (deep-copy it first)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "unfitted":
            return ESTIMATORS[estimator]()
        if kind == "dataframe":
            return ESTIMATORS[estimator]().fit(_dataframe())
        if kind == "k1":
            return ESTIMATORS[estimator](n_clusters=1).fit(X)
        return ESTIMATORS[estimator]().fit(X)


# -- the cases ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One refused input.

    ``data`` builds X, ``kwargs`` the other arguments of the call; ``params`` are set on
    the estimator before the call. ``names`` must appear literally in the message.
    """

    id: str
    what: str
    methods: tuple
    exc: type
    match: str
    data: Callable[[], Any] = lambda: X.copy()
    kwargs: Callable[[], dict] = dict
    params: dict = field(default_factory=dict)
    estimators: tuple = BOTH
    fitted: str = "array"
    names: tuple = ()


def _with(value, mask=None):
    out = X.copy()
    out[mask if mask is not None else (slice(0, 3), 5)] = value
    return out


def _memo(build):
    """Build a value once, return copies (sparse and pandas objects are slow to make)."""
    return lambda: copy.deepcopy(_memo_value(build))


@functools.cache
def _memo_value(build):
    return build()


DATA_CASES = [
    Case("X-nan", "``X`` contains NaN", ALL, ValueError, r"Input X contains NaN",
         lambda: _with(np.nan)),
    Case("X-posinf", "``X`` contains +inf", ALL, ValueError, r"Input X contains infinity",
         lambda: _with(np.inf)),
    Case("X-neginf", "``X`` contains -inf", ALL, ValueError, r"Input X contains infinity",
         lambda: _with(-np.inf)),
    Case("X-no-rows", "``X`` has no rows, shape (0, n_features)", ALL, ValueError,
         r"Found array with 0 sample\(s\)", lambda: np.empty((0, 16))),
    Case("X-no-columns", "``X`` has no columns, shape (n, 0)", ALL, ValueError,
         r"Found array with 0 feature\(s\)", lambda: np.empty((8, 0))),
    Case("X-1d", "``X`` is 1-D", ALL, ValueError, r"Expected 2D array, got 1D array",
         lambda: X[0].copy()),
    Case("X-3d", "``X`` is 3-D", ALL, ValueError, r"Found array with dim 3",
         lambda: X.reshape(8, 4, 4).copy()),
    Case("X-scalar", "``X`` is a scalar", ALL, ValueError, r"Expected 2D array, got scalar array",
         lambda: np.float64(3.0)),
    Case("X-complex", "``X`` is complex", ALL, ValueError, r"Complex data not supported",
         lambda: X + 1j),
    Case("X-strings", "``X`` holds strings", ALL, ValueError, r"could not convert string to float",
         lambda: np.full((8, 16), "a")),
    Case("X-object-none", "``X`` is an object array holding None", ALL, ValueError,
         r"Input X contains NaN", lambda: np.where(X > 0.9, None, X).astype(object)),
    Case("X-ragged", "``X`` is a ragged nested list", ALL, ValueError, r"inhomogeneous shape",
         lambda: [[0.0] * 16, [0.0] * 15]),
    Case("X-sparse", "``X`` is a scipy.sparse matrix (CSR, CSC, COO, ...); "
         ":class:`ExplainableKMeans` accepts it", ALL, TypeError,
         r"SpatialTransformerKMeans does not accept sparse input \(it works on dense images "
         r"and signals\)", _memo(lambda: sp.csr_matrix(X)), estimators=("spatial",)),
    Case("X-series", "``X`` is a pandas Series", ALL, ValueError,
         r"Expected a 2-dimensional container", _memo(lambda: _dataframe().iloc[0])),
    Case("X-dataframe-string-column", "``X`` is a DataFrame with a string column", ALL,
         ValueError, r"could not convert string to float",
         _memo(lambda: _dataframe().assign(p0="x"))),
    Case("X-dataframe-mixed-names", "``X`` is a DataFrame with int and str column names", ALL,
         TypeError, r"Feature names are only supported if all input features have string "
         r"names", _memo(lambda: _dataframe(columns=["a"] + list(range(15))))),
    Case("X-huge-float64", "float64 ``X`` whose squared distances overflow (values ~1e200)", ALL,
         ValueError, r"X has values too large for squared distances in torch\.float64",
         lambda: X * 1e200),
    Case("X-constant-row-contrast-noise", "``X`` has a constant row, with "
         "``noise=\"contrast\"`` (its noise variance would be 0)", FIT + ("score",),
         ValueError, r"noise='contrast' scales each row's noise variance by its contrast "
         r"\|\|x - mean\(x\)\|\|\^2, and 1 row\(s\) of X are constant \(the first: row 2\)",
         lambda: _with(0.5, mask=(2, slice(None))), params={"noise": "contrast"},
         estimators=("spatial",), names=("noise",)),
    # partial_fit on a float64 model computes a float32 chunk in float64: no overflow there
    Case("X-huge-float32", "float32 ``X`` whose squared distances overflow (values ~1e30)",
         FULL_FIT + INFER,
         ValueError, r"X has values too large for squared distances in torch\.float32",
         lambda: (X * 1e30).astype(np.float32)),
    Case("X-fewer-rows-than-clusters", "fewer samples than ``n_clusters``", FULL_FIT,
         ValueError,
         r"n_samples=1 should be >= n_clusters=2", lambda: X[:1].copy(),
         names=("n_samples=1", "n_clusters=2")),
    Case("X-wrong-n-features", "``X`` with another number of features than in fit", INFER,
         ValueError, r"X has 15 features, but \w+ is expecting 16 features as input",
         lambda: X[:, :15].copy()),
    Case("X-renamed-columns", "DataFrame whose column names differ from fit", INFER,
         ValueError, r"The feature names should match those that were passed during fit",
         _memo(lambda: _dataframe().rename(columns={"p3": "q3"})), fitted="dataframe"),
    Case("X-reordered-columns", "DataFrame whose columns are reordered", INFER, ValueError,
         r"Feature names must be in the same order as they were in fit",
         _memo(lambda: _dataframe()[COLUMNS[::-1]]), fitted="dataframe"),
    Case("not-fitted", "any method but ``fit`` on an unfitted estimator", INFER, NotFittedError,
         r"This \w+ instance is not fitted yet", fitted="unfitted"),
]

WEIGHT_CASES = [
    Case(f"sample_weight-{cid}", what, WEIGHTED, ValueError, match,
         kwargs=(lambda w=w: {"sample_weight": w()}), names=("sample_weight",))
    for cid, what, w, match in [
        ("wrong-length", "``sample_weight`` of the wrong length", lambda: np.ones(3),
         r"sample_weight\.shape == \(3,\), expected \(8,\)"),
        ("2d", "``sample_weight`` of shape (n, 1)", lambda: np.ones((8, 1)),
         r"sample_weight\.shape == \(8, 1\), expected \(8,\)"),
        ("negative", "a negative ``sample_weight``", lambda: np.r_[-1.0, np.ones(7)],
         r"sample_weight must be non-negative"),
        ("all-zero", "``sample_weight`` all zero", lambda: np.zeros(8),
         r"sample_weight must not be all zero"),
        ("nan", "``sample_weight`` contains NaN", lambda: np.r_[np.nan, np.ones(7)],
         r"sample_weight contains NaN or infinity"),
        ("inf", "``sample_weight`` contains inf", lambda: np.r_[np.inf, np.ones(7)],
         r"sample_weight contains NaN or infinity"),
        ("strings", "``sample_weight`` holds strings", lambda: np.array(["a"] * 8),
         r"sample_weight must be numeric"),
        ("complex", "``sample_weight`` is complex", lambda: np.ones(8) + 1j,
         r"sample_weight must be numeric"),
        ("sum-overflows", "``sample_weight`` summing beyond sqrt(float max)",
         lambda: np.full(8, 1e300), r"sample_weight sums to 8e\+300, outside what float64"),
        ("sum-underflows", "``sample_weight`` summing below sqrt(float tiny)",
         lambda: np.full(8, 1e-300), r"sample_weight sums to 8e-300, outside what float64"),
    ]
]


def _targets(value):
    return lambda: {"target": copy.deepcopy(value)}


EXPLAIN_CASES = [
    Case("target-too-large", "``target`` >= n_clusters", ("explain",), ValueError,
         r"target=2 is out of range: it must be in \[0, 1\] \(n_clusters=2\)",
         kwargs=_targets(2), names=("target=2",)),
    Case("target-negative", "``target`` < 0", ("explain",), ValueError,
         r"target=-1 is out of range", kwargs=_targets(np.r_[0, 1, 0, -1, 0, 1, 0, 1]),
         names=("target=-1",)),
    Case("target-wrong-length", "``target`` of the wrong length", ("explain",),
         ValueError, r"target must be None, an int or one int per row; got shape \(5,\) for "
         r"8 rows", kwargs=_targets(np.zeros(5, dtype=int)), names=("target",)),
    Case("target-2d", "``target`` of shape (n, 1)", ("explain",), ValueError,
         r"got shape \(8, 1\) for 8 rows", kwargs=_targets(np.zeros((8, 1), dtype=int)),
         names=("target",)),
    Case("target-string", "``target`` is a string", ("explain",), ValueError,
         r"target must be None, an int or one int per row; got shape \(\)",
         kwargs=_targets("a"), names=("target",)),
    Case("target-fractional", "``target`` with fractional values", ("explain",),
         TypeError, r"target must contain integers, got dtype float64",
         kwargs=_targets(np.full(8, 0.5)), names=("target",)),
    Case("target-bool", "``target`` of booleans", ("explain",), TypeError,
         r"target must contain integers, got dtype bool", kwargs=_targets(np.ones(8, bool)),
         names=("target",)),
    Case("target-bool-scalar", "``target`` is ``True`` or ``False`` (not a cluster index)",
         ("explain",), ValueError,
         r"target must be None, an int or one int per row; got shape \(\)",
         kwargs=_targets(True), names=("target",)),
    Case("explain-reference-nan", "``reference`` contains NaN or infinity", ("explain",),
         ValueError, r"reference must be None or 16 finite values \(one per feature\), got "
         r"NaN or infinity", kwargs=lambda: {"reference": np.r_[np.nan, X[0, 1:]]},
         names=("reference",)),
    Case("explain-reference-wrong-length", "``reference`` with another number of values "
         "than features", ("explain",), ValueError,
         r"reference must be None or 16 finite values \(one per feature\), got an array "
         r"of shape \(15,\)", kwargs=lambda: {"reference": X[0, 1:].copy()},
         names=("reference",)),
    Case("explain-reference-strings", "``reference`` holds strings", ("explain",), ValueError,
         r"reference must be None or 16 finite values \(one per feature\), got an array of "
         r"dtype <U1", kwargs=lambda: {
             "reference": np.full(16, "a")}, names=("reference",)),
    Case("explain-reference-other-name", "``reference`` a string other than \"mean\"",
         ("explain",), ValueError, r'reference must be "mean", None or one value per '
         r"feature, got 'median'", kwargs=lambda: {"reference": "median"},
         names=("reference", "'median'")),
    *[Case(f"explain-top_k-{label}", what, ("explain",), exc, match,
           kwargs=(lambda k=k: {"top_k": k}), estimators=("explainable",),
           names=("top_k", repr(k)))
      for label, k, what, exc, match in [
          ("zero", 0, "``top_k`` < 1", ValueError,
           r"top_k=0 is out of range: it must be in \[1, n_features=16\]"),
          ("too-large", 17, "``top_k`` > n_features", ValueError,
           r"top_k=17 is out of range: it must be in \[1, n_features=16\]"),
          ("bool", True, "``top_k`` a bool", TypeError, r"top_k must be None or an int, got True"),
          ("float", 2.5, "``top_k`` not an int", TypeError,
           r"top_k must be None or an int, got 2\.5"),
      ]],
    Case("explain-beta-negative", "``beta`` < 0", ("explain",), ValueError,
         r"beta must be >= 0", kwargs=lambda: {"beta": -1.0}, names=("beta", "-1.0")),
    Case("explain-beta-nan", "``beta`` NaN", ("explain",), ValueError,
         r"beta must be >= 0", kwargs=lambda: {"beta": np.nan}, names=("beta", "nan")),
    Case("explain-beta-string", "``beta`` not a number", ("explain",), TypeError,
         r"beta must be a non-negative number", kwargs=lambda: {"beta": "x"},
         names=("beta", "'x'")),
    Case("explain-one-cluster", "``n_clusters=1``", ("explain",), ValueError,
         r"explain needs n_clusters >= 2", fitted="k1", names=("n_clusters=1",)),
    Case("explain-rule", "``rule`` not 'epsilon'/'zplus' nor a rule object", ("explain",),
         ValueError,
         r"rule must be 'epsilon' or 'zplus'", kwargs=lambda: {"rule": "bogus"},
         estimators=("explainable",), names=("rule", "'bogus'")),
    Case("explain-epsilon-negative", "``epsilon`` < 0", ("explain",), ValueError,
         r"epsilon must be a finite number >= 0", kwargs=lambda: {"epsilon": -1.0},
         estimators=("explainable",), names=("epsilon", "-1.0")),
    Case("explain-epsilon-nan", "``epsilon`` NaN", ("explain",), ValueError,
         r"epsilon must be a finite number >= 0", kwargs=lambda: {"epsilon": np.nan},
         estimators=("explainable",), names=("epsilon", "nan")),
    Case("explain-epsilon-inf", "``epsilon`` infinite", ("explain",), ValueError,
         r"epsilon must be a finite number >= 0", kwargs=lambda: {"epsilon": np.inf},
         estimators=("explainable",), names=("epsilon", "inf")),
    Case("explain-epsilon-string", "``epsilon`` not a number", ("explain",), TypeError,
         r"epsilon must be a non-negative number", kwargs=lambda: {"epsilon": "a"},
         estimators=("explainable",), names=("epsilon", "'a'")),
    Case("explain-epsilon-numeric-string", "``epsilon`` a numeric string", ("explain",),
         TypeError, r"epsilon must be a non-negative number",
         kwargs=lambda: {"epsilon": "0.1"}, estimators=("explainable",),
         names=("epsilon", "'0.1'")),
    Case("explain-epsilon-bool", "``epsilon`` a bool", ("explain",), TypeError,
         r"epsilon must be a non-negative number", kwargs=lambda: {"epsilon": True},
         estimators=("explainable",), names=("epsilon", "True")),
    Case("explain-frame", "``frame`` not 'input'/'centroid'", ("explain",), ValueError,
         r"frame must be 'input' or 'centroid'", kwargs=lambda: {"frame": "sample"},
         estimators=("spatial",), names=("frame", "'sample'")),
]


def _param(name, value, match=None, exc=ValueError, estimators=BOTH, names=None, what=None):
    """A parameter case; by default the message must contain the name and repr(value)."""
    label = re.sub(r"[^\w.+-]+", "_", repr(value)).strip("_")[:20]
    if names is None:
        names = (name, repr(value))
    return Case(f"param-{name}-{label}", what or f"``{name}={value!r}``", ("fit",), exc,
                match or re.escape(name), params={name: value}, estimators=estimators,
                names=names)


_IPE = InvalidParameterError
_E, _S = ("explainable",), ("spatial",)
PARAM_CASES = [
    _param("n_clusters", 0, exc=_IPE), _param("n_clusters", 2.5, exc=_IPE),
    _param("n_clusters", "2", exc=_IPE),
    _param("init", "kmeans", exc=_IPE), _param("init", None, exc=_IPE),
    _param("init", "k-means+merge", exc=_IPE, estimators=_E),
    _param("init", np.zeros((3, 16)), r"init array must have shape \(n_clusters, n_features\) "
           r"= \(2, 16\), got \(3, 16\)", names=("init",), what="``init`` array of wrong shape"),
    _param("init", np.full((2, 16), np.nan), r"init array contains NaN or infinity",
           names=("init",), what="``init`` array with NaN or inf"),
    _param("init", np.full((2, 16), "a"), r"init array must contain real numbers, got an "
           r"array of dtype <U1", names=("init",), what="``init`` array of strings"),
    _param("init", X[:2] + 1j, r"init array must contain real numbers, got an array of "
           r"dtype complex128", names=("init",), what="``init`` array of complex numbers"),
    _param("init", [[0.0] * 16, [0.0] * 15], r"init array could not be read as an array",
           names=("init",), what="``init`` as a ragged nested list"),
    _param("n_init", 0, exc=_IPE), _param("n_init", "x", exc=_IPE),
    _param("max_iter", 0, exc=_IPE), _param("max_iter", 1.5, exc=_IPE),
    _param("tol", -1.0, exc=_IPE), _param("tol", np.nan, exc=_IPE),
    _param("tol", "a", exc=_IPE),
    _param("batch_size", 0, exc=_IPE), _param("batch_size", 1.0, exc=_IPE),
    _param("device", "tpu", r"device='tpu' is not a valid device"),
    _param("device", "cuda:x", r"device='cuda:x' is not a valid device"),
    _param("device", "meta", r"device='meta' is not supported"),
    _param("device", 3, exc=_IPE), _param("device", None, exc=_IPE),
    _param("random_state", "a", exc=_IPE), _param("random_state", -1, exc=_IPE),
    _param("verbose", -1, exc=_IPE), _param("verbose", "x", exc=_IPE),
    _param("beta", -0.5, exc=_IPE), _param("beta", np.nan, exc=_IPE),
    _param("beta", "stiff", exc=_IPE),
    # ExplainableKMeans only
    _param("temperature", 0.0, exc=_IPE, estimators=_E),
    _param("temperature", -1.0, exc=_IPE, estimators=_E),
    _param("temperature", np.inf, exc=_IPE, estimators=_E),
    _param("temperature", "hot", exc=_IPE, estimators=_E),
    _param("feature_extractor", "x", exc=_IPE, estimators=_E),
    _param("feature_extractor", torch.nn.LSTM(4, 4), r"LSTM is not supported for relevance "
           r"propagation", exc=TypeError, estimators=_E, names=("feature_extractor", "LSTM"),
           what="``feature_extractor`` with an unsupported layer"),
    _param("feature_extractor", torch.nn.Sequential(torch.nn.Linear(10, 4)),
           r"feature_extractor cannot be applied to X of shape \(8, 16\)", estimators=_E,
           names=("feature_extractor",), what="``feature_extractor`` that cannot take X"),
    # SpatialTransformerKMeans only
    _param("image_shape", (3, 5), r"image_shape=\(3, 5\) holds 15 pixels but X has "
           r"n_features=16", estimators=_S),
    _param("image_shape", (4, 4, 1), r"must be None, a pair \(H, W\) of positive ints, or "
           r"\(C, 1, L\)", estimators=_S),
    _param("image_shape", (0, 16), r"must be None or a pair \(H, W\)", estimators=_S),
    _param("image_shape", (4, 4.0), r"must be None or a pair \(H, W\)", estimators=_S),
    _param("image_shape", 16, exc=_IPE, estimators=_S),
    _param("warp", "similarity", exc=_IPE, estimators=_S),
    _param("warp", None, exc=_IPE, estimators=_S),
    _param("n_landmarks", 5, r"n_landmarks=5 must be a perfect square >= 4", estimators=_S),
    _param("n_landmarks", 10, r"n_landmarks=10 must be a perfect square", estimators=_S),
    _param("n_landmarks", 1, exc=_IPE, estimators=_S),
    _param("n_landmarks", 4.0, exc=_IPE, estimators=_S),
    _param("n_landmarks", "many", exc=_IPE, estimators=_S),
    _param("noise", "gaussian", exc=_IPE, estimators=_S),
    _param("learning_rate", 0.0, exc=_IPE, estimators=_S),
    _param("learning_rate", -0.1, exc=_IPE, estimators=_S),
    _param("learning_rate", np.inf, exc=_IPE, estimators=_S),
    _param("n_steps", -1, exc=_IPE, estimators=_S),
    _param("n_steps", 2.0, exc=_IPE, estimators=_S),
    _param("warp_penalty", -1.0, exc=_IPE, estimators=_S),
    _param("warp_penalty", np.inf, exc=_IPE, estimators=_S),
    _param("n_candidates", 0, exc=_IPE, estimators=_S),
    _param("n_candidates", 1.5, exc=_IPE, estimators=_S),
    _param("update_steps", -1, exc=_IPE, estimators=_S),
    _param("update_steps", 1.5, exc=_IPE, estimators=_S),
    _param("screen_ratio", 0.5, exc=_IPE, estimators=_S),
    _param("screen_ratio", "1.5", exc=_IPE, estimators=_S),
    _param("coarse_steps", -1, exc=_IPE, estimators=_S),
    _param("centroid_blur", (1.0, 2.0), estimators=_S),
    _param("centroid_blur", (-1.0,), estimators=_S),
    _param("centroid_blur", ("a",), estimators=_S),
    _param("centroid_blur", "wide", exc=_IPE, estimators=_S),
    _param("warp_dtype", "float16", exc=_IPE, estimators=_S),
    _param("subsample", 0, exc=_IPE, estimators=_S),
]

CASES = DATA_CASES + WEIGHT_CASES + EXPLAIN_CASES + PARAM_CASES


def combinations():
    for case in CASES:
        for estimator in case.estimators:
            for method in case.methods:
                if has_method(estimator, method):
                    yield case, estimator, method


# -- deep comparison -----------------------------------------------------------------------------
def assert_same(a, b, where="value"):
    """Deep equality of estimator state or call arguments (NaN equals NaN)."""
    assert type(a) is type(b), f"{where}: type {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: dtype/shape changed"
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), f"{where}: values changed"
    elif sp.issparse(a):
        assert a.shape == b.shape and (a != b).nnz == 0, f"{where}: sparse values changed"
    elif type(a).__module__.startswith("pandas"):
        assert a.equals(b), f"{where}: pandas object changed"
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), f"{where}: tensor changed"
    elif isinstance(a, torch.nn.Module):
        assert_same(a.state_dict(), b.state_dict(), where)
    elif isinstance(a, np.random.RandomState):
        assert_same(a.get_state(legacy=False), b.get_state(legacy=False), where)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), f"{where}: keys {set(a) ^ set(b)} differ"
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{where}: length changed"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), f"{where}: {a!r} != {b!r}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"
