"""Inputs that both estimators accept: converted, never modified, dtype kept.

Array-likes (lists, read-only and memory-mapped arrays, other memory layouts, object
arrays of floats, torch tensors) give the result of the float64 array; the output dtype
follows the input's; DataFrame feature names are recorded as scikit-learn does; degenerate
data (fewer distinct points than clusters) and extreme but representable scales give
finite results; ``beta=inf`` is accepted as documented. The estimators and the data are
those of ``tests/_input_validation_cases.py``.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
from _input_validation_cases import (
    BOTH,
    COLUMNS,
    ESTIMATORS,
    INFER,
    X,
    _dataframe,
    assert_same,
    fitted,
    has_method,
)
from sklearn.exceptions import ConvergenceWarning


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
    # what scikit-learn's checks and meta-estimators read of it
    assert est.__sklearn_tags__().transformer_tags.preserves_dtype == ["float64", "float32"]


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


def _fit_quietly(estimator, data, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return ESTIMATORS[estimator](**params).fit(data)


# Relative error of explain's conservation (relevance sums to the evidence), measured at
# these scales: <= 6e-16 in float64, <= 4.4e-7 in float32.
CONSERVATION_RTOL = {np.float64: 1e-12, np.float32: 1e-5}


@pytest.mark.parametrize("estimator", BOTH)
@pytest.mark.parametrize("scale, dtype", [(1e150, np.float64), (1e-150, np.float64),
                                          (1e15, np.float32), (1e-15, np.float32),
                                          (1.0, np.float64)])
def test_extreme_but_representable_scales_give_the_unscaled_labels_and_conserve(estimator,
                                                                                scale,
                                                                                dtype):
    data = (X * scale + 100 * scale).astype(dtype)  # offset ~100x the spread, as in sklearn
    est = _fit_quietly(estimator, data)
    assert np.isfinite(est.inertia_) and np.all(np.isfinite(est.cluster_centers_))
    for method in INFER:
        if has_method(estimator, method):
            assert np.all(np.isfinite(getattr(est, method)(data))), method
    unscaled = _fit_quietly(estimator, (X + 100).astype(dtype))
    np.testing.assert_array_equal(est.labels_, unscaled.labels_)
    np.testing.assert_array_equal(est.predict(data), unscaled.labels_)
    f = est.decision_function(data).max(1)
    np.testing.assert_allclose(est.explain(data).sum(1), f, rtol=CONSERVATION_RTOL[dtype],
                               atol=0)


@pytest.mark.parametrize("estimator, scale, params, rtol", [
    ("explainable", 1e150, {}, 1e-9), ("explainable", 1e-150, {}, 1e-9),
    ("spatial", 1e150, {"warp_dtype": "float64"}, 1e-9),
    ("spatial", 1e-150, {"warp_dtype": "float64"}, 1e-9),
    # the default float32 warp fits round the rescaled images differently: the centroids
    # agree to 3e-16, the final distances (inertia) to 1.2e-5 (5e-7 before the warp-only
    # merge init took another path to the same centroids)
    ("spatial", 1e150, {}, 5e-5), ("spatial", 1e-150, {}, 5e-5),
])
def test_float64_extreme_scales_give_the_scaled_unscaled_fit(estimator, scale, params, rtol):
    """Distances are homogeneous of degree 2 in the data (ST's warp penalty is scaled by the
    sample's contrast), so the fit of the scaled data is the unscaled fit, scaled."""
    unscaled = _fit_quietly(estimator, X + 100, **params)
    est = _fit_quietly(estimator, (X + 100) * scale, **params)
    np.testing.assert_array_equal(est.labels_, unscaled.labels_)
    assert est.inertia_ / scale**2 == pytest.approx(unscaled.inertia_, rel=rtol)
    np.testing.assert_allclose(est.cluster_centers_ / scale, unscaled.cluster_centers_,
                               rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("estimator", BOTH)
def test_parameter_beta_inf_is_accepted_as_documented(estimator):
    est = ESTIMATORS[estimator](beta=np.inf).fit(X)
    assert est.beta_ == np.inf
    f = est.decision_function(X).max(1)
    np.testing.assert_allclose(est.explain(X).sum(1), f, rtol=1e-6, atol=1e-9 * np.abs(f).max())


@pytest.mark.parametrize("estimator", BOTH)
def test_as_many_samples_as_clusters_is_accepted(estimator):
    # scikit-learn's KMeans takes n_samples == n_clusters: every row its own cluster
    est = ESTIMATORS[estimator]().fit(X[:2])
    assert sorted(est.labels_.tolist()) == [0, 1]
    assert est.inertia_ == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("estimator", BOTH)
@pytest.mark.parametrize("weights, as_floats", [
    (np.r_[True, False, True, True, True, False, True, True],
     np.r_[1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0]),
    (2.0, np.full(8, 2.0)),
], ids=["booleans", "scalar"])
def test_boolean_and_scalar_sample_weights_act_as_their_float_arrays(estimator, weights,
                                                                     as_floats):
    est = ESTIMATORS[estimator]().fit(X, sample_weight=weights)
    ref = ESTIMATORS[estimator]().fit(X, sample_weight=as_floats)
    np.testing.assert_array_equal(est.cluster_centers_, ref.cluster_centers_)
    assert est.inertia_ == ref.inertia_


@pytest.mark.parametrize("estimator", BOTH)
def test_explain_beta_zero_is_accepted(estimator):
    # beta=0 spreads the relevance evenly over the competitors (the documented lower end;
    # three clusters: two competitors to spread over)
    est = ESTIMATORS[estimator](n_clusters=3).fit(X)
    relevance = est.explain(X, beta=0.0)
    assert relevance.shape == X.shape and np.isfinite(relevance).all()
    assert not np.allclose(relevance, est.explain(X, beta=np.inf))


@pytest.mark.parametrize("estimator", BOTH)
@pytest.mark.parametrize("kind", ["read-only", "big-endian"])
def test_read_only_and_big_endian_arrays_give_the_float64_result_without_a_warning(
        estimator, kind):
    data = _readonly() if kind == "read-only" else X.astype(">f8")
    est = fitted(estimator)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        refit = ESTIMATORS[estimator]().fit(data)
        labels = copy.deepcopy(est).predict(data)
    np.testing.assert_array_equal(refit.cluster_centers_, est.cluster_centers_)
    np.testing.assert_array_equal(labels, est.labels_)


def test_explain_top_k_may_keep_every_feature():
    # top_k = n_features is the upper end: every feature, most relevant first
    est = fitted("explainable")
    features, values = copy.deepcopy(est).explain(X, top_k=X.shape[1])
    relevance = copy.deepcopy(est).explain(X)
    np.testing.assert_array_equal(np.sort(features, axis=1), np.tile(np.arange(16), (8, 1)))
    np.testing.assert_allclose(np.take_along_axis(relevance, features, axis=1), values)


@pytest.mark.parametrize("estimator", BOTH)
def test_integer_init_array_gives_the_float_init_result(estimator):
    init = np.array([[0] * 16, [1] * 16])
    est = ESTIMATORS[estimator](init=init, n_init=1).fit(X)
    ref = ESTIMATORS[estimator](init=init.astype(float), n_init=1).fit(X)
    np.testing.assert_array_equal(est.cluster_centers_, ref.cluster_centers_)
