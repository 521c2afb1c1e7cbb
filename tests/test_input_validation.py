"""Every malformed input is refused clearly by both estimators, and nothing is changed.

One case list (``CASES``) drives the tests and the table of refused inputs in
``doc/user_guide/refused_inputs.rst``. For every (case, estimator, method) the tests assert
the exception type, that the message names the problem (and, for parameters, the parameter
and its value), that ``__dict__`` is deep-equal before and after the failed call, and that
the arguments (X, sample_weight, target) were not modified.

After changing a message or a case, rewrite the table with::

    python tests/test_input_validation.py

``partial_fit`` is run with the fitting methods, on a fitted estimator (a continuation
step), except for chunks smaller than ``n_clusters``, which it accepts once seeded.
"""

from __future__ import annotations

import copy
import functools
import re
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils._param_validation import InvalidParameterError

from skxclust import ExplainableKMeans, SpatialTransformerKMeans

RNG = np.random.default_rng(0)
X = RNG.random((8, 16))  # 8 samples, 4 x 4 images (or 16 features)
COLUMNS = [f"p{i}" for i in range(16)]
TABLE = Path(__file__).resolve().parents[1] / "doc" / "user_guide" / "refused_inputs.rst"
BEGIN, END = ".. BEGIN GENERATED TABLE", ".. END GENERATED TABLE"

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
    Case("explain-epsilon-negative", "``epsilon`` < 0 or NaN", ("explain",), ValueError,
         r"epsilon must be a finite number >= 0", kwargs=lambda: {"epsilon": -1.0},
         estimators=("explainable",), names=("epsilon", "-1.0")),
    Case("explain-epsilon-string", "``epsilon`` not a number", ("explain",), TypeError,
         r"epsilon must be a non-negative number", kwargs=lambda: {"epsilon": "a"},
         estimators=("explainable",), names=("epsilon", "'a'")),
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
    _param("image_shape", (4, 4, 1), r"must be None or a pair \(H, W\) of positive ints",
           estimators=_S),
    _param("image_shape", (0, 16), r"must be None or a pair \(H, W\)", estimators=_S),
    _param("image_shape", (4, 4.0), r"must be None or a pair \(H, W\)", estimators=_S),
    _param("image_shape", 16, exc=_IPE, estimators=_S),
    _param("warp", "similarity", exc=_IPE, estimators=_S),
    _param("warp", None, exc=_IPE, estimators=_S),
    _param("n_landmarks", 5, r"n_landmarks=5 must be a perfect square >= 4", estimators=_S),
    _param("n_landmarks", 10, r"n_landmarks=10 must be a perfect square", estimators=_S),
    _param("n_landmarks", 1, exc=_IPE, estimators=_S),
    _param("n_landmarks", 4.0, exc=_IPE, estimators=_S),
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


def call(est, method, data, kwargs):
    return getattr(est, method)(data, **kwargs)


def run_case(case: Case, estimator: str, method: str):
    """Call ``method`` with the bad input on a copy of a fitted estimator; return
    (estimator, state before, X, kwargs, copies of X and kwargs, raised exception info)."""
    est = copy.deepcopy(fitted(estimator, case.fitted))
    if case.params:
        est.set_params(**case.params)
    before = copy.deepcopy(est.__dict__)
    data, kwargs = case.data(), case.kwargs()
    data_copy, kwargs_copy = copy.deepcopy(data), copy.deepcopy(kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(case.exc, match=case.match) as info:
            call(est, method, data, kwargs)
    return est, before, data, kwargs, data_copy, kwargs_copy, info


def check_refusal(case: Case, estimator: str, method: str) -> None:
    """The refusal of one (case, estimator, method): exception, message, nothing changed."""
    est, before, data, kwargs, data_copy, kwargs_copy, info = run_case(case, estimator, method)
    message = str(info.value)
    for name in case.names:
        assert name in message, f"{name!r} not named in: {message}"
    assert_same(before, est.__dict__, "estimator.__dict__")
    assert_same(data_copy, data, "X")
    assert_same(kwargs_copy, kwargs, "arguments")


PAIRS = [(case, estimator) for case in CASES for estimator in case.estimators]


@pytest.mark.parametrize("case, estimator", [pytest.param(c, e, id=f"{c.id}-{e}")
                                             for c, e in PAIRS])
def test_bad_input_is_refused_clearly_and_changes_nothing(case, estimator):
    # One test item per (case, estimator), every method inside it: pytest's per-item
    # overhead would otherwise dominate. Failures of all methods are reported together.
    failures = []
    for method in case.methods:
        if has_method(estimator, method):
            try:
                check_refusal(case, estimator, method)
            except (AssertionError, pytest.fail.Exception) as exc:
                failures.append(f"{method}: {exc}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("estimator", BOTH)
@pytest.mark.parametrize("method", ["fit_predict", "fit_transform"])
def test_fit_predict_and_fit_transform_refuse_bad_parameters_like_fit(method, estimator):
    for case in PARAM_CASES:
        if estimator in case.estimators:
            est, before, *_ = run_case(case, estimator, method)
            assert_same(before, est.__dict__, f"{case.id}: estimator.__dict__")


FIT_DATA_CASES = [c for c in DATA_CASES + WEIGHT_CASES if "fit" in c.methods]


@pytest.mark.parametrize(
    "case, estimator",
    [(c, e) for c in FIT_DATA_CASES for e in BOTH if e in c.estimators],
    ids=[f"{c.id}-{e}" for c in FIT_DATA_CASES for e in BOTH if e in c.estimators],
)
def test_failed_fit_of_an_unfitted_estimator_leaves_no_attribute(case, estimator):
    est = ESTIMATORS[estimator]()
    before = copy.deepcopy(est.__dict__)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(case.exc, match=case.match):
            est.fit(case.data(), **case.kwargs())
    assert_same(before, est.__dict__, "estimator.__dict__")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("estimator", BOTH)
def test_cuda_requested_without_cuda_is_refused_naming_the_device(estimator):
    est = copy.deepcopy(fitted(estimator)).set_params(device="cuda")
    before = copy.deepcopy(est.__dict__)
    with pytest.raises(ValueError, match=r"device='cuda' was requested but CUDA is not"):
        est.fit(X)
    assert_same(before, est.__dict__, "estimator.__dict__")


# -- accepted inputs: converted, never modified, dtype kept --------------------------------------
def _memmap(tmp_path_factory):
    path = tmp_path_factory.mktemp("memmap") / "x.npy"
    np.save(path, X)
    return np.load(path, mmap_mode="r")


def _readonly():
    out = X.copy()
    out.setflags(write=False)
    return out


SAME_VALUES = {
    "list": lambda tmp: X.tolist(),
    "read-only": lambda tmp: _readonly(),
    "memmap": _memmap,
    "fortran-order": lambda tmp: np.asfortranarray(X),
    "strided-view": lambda tmp: np.repeat(X, 2, axis=0)[::2],
    "object-of-floats": lambda tmp: X.astype(object),
    "torch-tensor": lambda tmp: torch.from_numpy(X.copy()),
}


def _outputs(est, method, data) -> tuple:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if method == "fit":
            refit = copy.deepcopy(est).fit(data)
            return refit.cluster_centers_, refit.labels_, refit.inertia_
        return (getattr(copy.deepcopy(est), method)(data),)


@pytest.mark.parametrize("estimator", BOTH)
@pytest.mark.parametrize("kind", list(SAME_VALUES))
def test_array_likes_give_the_same_result_as_the_float64_array(estimator, kind,
                                                               tmp_path_factory):
    est = fitted(estimator)
    data = SAME_VALUES[kind](tmp_path_factory)
    snapshot = copy.deepcopy(data)
    for method in ("fit",) + INFER:
        if has_method(estimator, method):
            for got, want in zip(_outputs(est, method, data), _outputs(est, method, X)):
                np.testing.assert_array_equal(got, want, err_msg=f"{kind} {method}")
    assert_same(snapshot, data, "X")


@pytest.mark.parametrize("estimator", BOTH)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
def test_output_dtype_is_float32_for_float32_input_and_float64_otherwise(estimator, dtype):
    data = (X * 10).astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = ESTIMATORS[estimator]().fit(data)
    want = np.float32 if dtype == np.float32 else np.float64
    assert est.cluster_centers_.dtype == want
    for method in ("transform", "decision_function", "predict_proba", "explain", "align"):
        if has_method(estimator, method):
            assert getattr(est, method)(data).dtype == want, method
    assert est.predict(data).dtype == np.int64
    assert isinstance(est.score(data), float)


@pytest.mark.parametrize("estimator", BOTH)
def test_dataframe_feature_names_are_recorded_and_plain_arrays_warn_like_sklearn(estimator):
    est = fitted(estimator, "dataframe")
    np.testing.assert_array_equal(est.feature_names_in_, COLUMNS)
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        labels = copy.deepcopy(est).predict(X)
    np.testing.assert_array_equal(labels, copy.deepcopy(est).predict(_dataframe()))
    with pytest.warns(UserWarning, match="X has feature names, but"):
        copy.deepcopy(fitted(estimator)).predict(_dataframe())


DEGENERATE = {
    "constant": lambda: np.ones((8, 16)),
    "zeros": lambda: np.zeros((8, 16)),
    "two-distinct-rows-three-clusters": lambda: np.repeat(X[:2], 4, axis=0),
}


@pytest.mark.parametrize("estimator", BOTH)
@pytest.mark.parametrize("kind", list(DEGENERATE))
def test_fewer_distinct_points_than_clusters_warns_like_kmeans_and_stays_finite(estimator,
                                                                                 kind):
    data = DEGENERATE[kind]()
    n_clusters = 3 if kind.startswith("two") else 2
    with pytest.warns(ConvergenceWarning, match=r"Number of distinct clusters \(\d\) found "
                      rf"smaller than n_clusters \({n_clusters}\)"):
        est = ESTIMATORS[estimator](n_clusters=n_clusters).fit(data)
    assert np.isfinite(est.inertia_) and np.all(np.isfinite(est.cluster_centers_))
    for method in INFER:
        if has_method(estimator, method):
            assert np.all(np.isfinite(getattr(est, method)(data))), method


@pytest.mark.parametrize("estimator", BOTH)
@pytest.mark.parametrize("scale, dtype", [(1e150, np.float64), (1e-150, np.float64),
                                          (1e15, np.float32), (1e-15, np.float32),
                                          (1.0, np.float64)])
def test_extreme_but_representable_scales_give_finite_results(estimator, scale, dtype):
    data = (X * scale + 100 * scale).astype(dtype)  # offset ~100x the spread, as in sklearn
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = ESTIMATORS[estimator]().fit(data)
    assert np.isfinite(est.inertia_) and np.all(np.isfinite(est.cluster_centers_))
    for method in INFER:
        if has_method(estimator, method):
            assert np.all(np.isfinite(getattr(est, method)(data))), method


@pytest.mark.parametrize("estimator", BOTH)
def test_parameter_beta_inf_is_accepted_as_documented(estimator):
    est = ESTIMATORS[estimator](beta=np.inf).fit(X)
    assert est.beta_ == np.inf
    f = est.decision_function(X).max(1)
    np.testing.assert_allclose(est.explain(X).sum(1), f, rtol=1e-6, atol=1e-9 * np.abs(f).max())


# -- the documentation table ---------------------------------------------------------------------
def _message(case: Case) -> tuple[str, str, str]:
    """(estimator, method, first line of the message) of the first combination of a case."""
    estimator, method = next((e, m) for c, e, m in combinations() if c is case)
    *_, info = run_case(case, estimator, method)
    first = str(info.value).splitlines()[0].strip()
    for name in CLASS_NAMES.values():
        first = first.replace(name, "<Estimator>")
    # scikit-learn prints sets of options in hash order: sort them for a stable table
    first = re.sub(r"\{([^{}]*)\}", lambda m: "{" + ", ".join(sorted(m[1].split(", "))) + "}",
                   first)
    return estimator, method, first


def _methods(case: Case) -> str:
    if case.methods == ALL:
        return "all"
    if case.methods == INFER:
        return "all inference"
    if case.methods == FULL_FIT + INFER:
        return "all but partial_fit"
    if case.params:  # also run through fit_predict, fit_transform and partial_fit
        return ", ".join(FIT)
    return ", ".join(case.methods)


def _estimators(case: Case) -> str:
    return "both" if case.estimators == BOTH else CLASS_NAMES[case.estimators[0]]


def _literal(text: str) -> str:
    return "``" + text.replace("``", "` `") + "``" if text else ""


def render_table() -> str:
    """The RST list-table of every case, messages as actually raised."""
    lines = [BEGIN, "", ".. list-table::", "   :header-rows: 1", "   :widths: 28 12 14 14 32",
             "", "   * - Input", "     - Estimators", "     - Methods", "     - Exception",
             "     - Message (first line)"]
    for case in CASES:
        _, _, message = _message(case)
        exc = case.exc.__name__
        if case.exc is InvalidParameterError:
            exc += " (ValueError, TypeError)"
        lines += [f"   * - {case.what}", f"     - {_estimators(case)}",
                  f"     - {_methods(case)}", f"     - {exc}", f"     - {_literal(message)}"]
    lines += ["", END]
    return "\n".join(lines)


def _table_in_doc() -> str:
    text = TABLE.read_text()
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    return text[start:stop]


def test_documentation_table_lists_every_case_with_the_message_raised():
    rendered = render_table()
    assert _table_in_doc() == rendered, (
        "doc/user_guide/refused_inputs.rst is out of date: run "
        "`python tests/test_input_validation.py` to rewrite its table"
    )


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


if __name__ == "__main__":  # rewrite the table in the documentation
    text = TABLE.read_text()
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    TABLE.write_text(text[:start] + render_table() + text[stop:])
    n_combos = sum(1 for _ in combinations())
    print(f"{len(CASES)} refused inputs, {n_combos} (input, estimator, method) combinations",
          file=sys.stderr)
