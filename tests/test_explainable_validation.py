"""Bad input to ExplainableKMeans is refused clearly and nothing is changed."""

import copy
import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from skxclust import ExplainableKMeans

X = np.random.default_rng(0).normal(size=(40, 4))


@pytest.fixture(scope="module")
def fitted():
    return ExplainableKMeans(n_clusters=3, random_state=0, device="cpu").fit(X)


def _state(est):
    return {k: (v.copy() if isinstance(v, np.ndarray) else copy.copy(v))
            for k, v in est.__dict__.items()}


def _assert_same_state(before, est):
    assert before.keys() == est.__dict__.keys()
    for k, v in before.items():
        np.testing.assert_array_equal(est.__dict__[k], v)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_clusters": 0}, "n_clusters"),
        ({"n_clusters": 2.5}, "n_clusters"),
        ({"max_iter": 0}, "max_iter"),
        ({"tol": -1.0}, "tol"),
        ({"n_init": 0}, "n_init"),
        ({"init": "kmeans"}, "init"),
        ({"beta": -0.5}, "beta"),
        ({"beta": "stiff"}, "beta"),
        ({"temperature": 0.0}, "temperature"),
        ({"temperature": -1.0}, "temperature"),
        ({"batch_size": 0}, "batch_size"),
        ({"device": "tpu"}, "device"),
        ({"device": 3}, "device"),
    ],
)
def test_bad_parameter_is_refused_naming_it(params, match):
    est = ExplainableKMeans(n_clusters=3, **{k: v for k, v in params.items() if k != "n_clusters"})
    if "n_clusters" in params:
        est.set_params(n_clusters=params["n_clusters"])
    with pytest.raises((ValueError, TypeError), match=match):
        est.fit(X)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_device_without_cuda_is_refused_clearly():
    with pytest.raises(ValueError, match="CUDA is not available"):
        ExplainableKMeans(n_clusters=2, device="cuda").fit(X)


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.where(np.eye(40, 4) > 0, np.nan, X), "NaN"),
        (np.where(np.eye(40, 4) > 0, np.inf, X), "infinity"),
        (X[:, 0], "2D array"),
        (X[None], "3"),
        (np.empty((0, 4)), "0 sample"),
        (np.array([["a", "b"], ["c", "d"]]), "could not convert|dtype"),
        (X + 1j, "[Cc]omplex"),
    ],
)
def test_malformed_training_data_is_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        ExplainableKMeans(n_clusters=2).fit(bad)


def test_sparse_input_with_a_feature_extractor_is_refused_clearly():
    net = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 3)).double()
    with pytest.raises(TypeError, match="ExplainableKMeans does not accept sparse input "
                                        r"\(a feature_extractor takes dense rows\)"):
        ExplainableKMeans(n_clusters=2, feature_extractor=net).fit(sp.csr_matrix(X))


def test_fewer_samples_than_clusters_is_refused():
    with pytest.raises(ValueError, match="n_samples=2 should be >= n_clusters=3"):
        ExplainableKMeans(n_clusters=3).fit(X[:2])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sample_weights_summing_exactly_to_either_bound_are_accepted(dtype):
    # the documented range [sqrt(tiny), sqrt(max)] is closed (both ends are powers of 2 or
    # exactly representable in float64)
    from skxclust._validation import check_sample_weight

    finfo = np.finfo(dtype)
    for total in (float(np.sqrt(finfo.tiny)), float(np.sqrt(finfo.max))):
        weights = check_sample_weight(np.array([total]), 1, dtype)
        assert weights.dtype == dtype and weights[0] > 0
        with pytest.raises(ValueError, match="sample_weight sums to"):
            check_sample_weight(np.array([total * (0.5 if total < 1 else 2.0)]), 1, dtype)


def test_init_array_of_wrong_shape_is_refused():
    with pytest.raises(ValueError, match="init array"):
        ExplainableKMeans(n_clusters=3, init=X[:2]).fit(X)


@pytest.mark.parametrize(
    "weights, match",
    [(np.ones(3), "sample_weight.shape"), (-np.ones(40), "non-negative"),
     (np.zeros(40), "all zero"), (np.full(40, np.nan), "NaN")],
)
def test_bad_sample_weight_is_refused(weights, match):
    with pytest.raises(ValueError, match=match):
        ExplainableKMeans(n_clusters=2).fit(X, sample_weight=weights)


@pytest.mark.parametrize("method", ["predict", "transform", "decision_function",
                                    "predict_proba", "explain", "score"])
def test_wrong_number_of_features_is_refused_by_every_method(fitted, method):
    with pytest.raises(ValueError, match="features"):
        getattr(fitted, method)(X[:, :3])


@pytest.mark.parametrize("method", ["predict", "explain", "decision_function"])
def test_unfitted_estimator_raises_not_fitted(method):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        getattr(ExplainableKMeans(), method)(X)


@pytest.mark.parametrize(
    "target, exc, match",
    [(3, ValueError, "out of range"), (-1, ValueError, "out of range"),
     (np.zeros(5, dtype=int), ValueError, "one int per row"),
     (np.full(40, 0.5), TypeError, "integers")],
)
def test_bad_explain_target_is_refused(fitted, target, exc, match):
    with pytest.raises(exc, match=match):
        fitted.explain(X, target=target)


@pytest.mark.parametrize("beta, exc", [(-1.0, ValueError), (np.nan, ValueError), ("x", TypeError)])
def test_bad_explain_beta_is_refused(fitted, beta, exc):
    with pytest.raises(exc, match="beta"):
        fitted.explain(X, beta=beta)


def test_explain_with_a_single_cluster_is_refused():
    km = ExplainableKMeans(n_clusters=1).fit(X)
    with pytest.raises(ValueError, match="n_clusters >= 2"):
        km.explain(X)


def test_failed_fit_leaves_a_fitted_estimator_unchanged(fitted):
    before = _state(fitted)
    with pytest.raises(ValueError):
        fitted.fit(np.ones((2, 7)))
    _assert_same_state(before, fitted)
    np.testing.assert_array_equal(fitted.predict(X), fitted.labels_)


def test_failed_calls_do_not_mutate_input_or_estimator(fitted):
    X_copy = X.copy()
    before = _state(fitted)
    for call in (lambda: fitted.explain(X, target=9), lambda: fitted.predict(X[:, :2])):
        with pytest.raises(ValueError):
            call()
    np.testing.assert_array_equal(X, X_copy)
    _assert_same_state(before, fitted)


def test_readonly_and_memmap_inputs_are_accepted(tmp_path):
    ro = X.copy()
    ro.setflags(write=False)
    mm_path = tmp_path / "x.npy"
    np.save(mm_path, X)
    mm = np.load(mm_path, mmap_mode="r")
    a = ExplainableKMeans(n_clusters=3, random_state=0).fit(ro)
    b = ExplainableKMeans(n_clusters=3, random_state=0).fit(mm)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.explain(mm), a.explain(ro))


@pytest.mark.parametrize("kind, shared", [
    ("writable", True), ("read-only", False), ("big-endian", False), ("strided", False)])
def test_host_tensor_shares_what_torch_can_share_and_copies_the_rest(kind, shared):
    # no "array is not writable" warning, no byte-order error, no copy where none is needed
    from skxclust._validation import host_tensor

    arr = np.arange(12.0).reshape(3, 4)
    if kind == "read-only":
        arr.setflags(write=False)
    elif kind == "big-endian":
        arr = arr.astype(">f8")
    elif kind == "strided":
        arr = arr[:, ::2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensor = host_tensor(arr)
    np.testing.assert_array_equal(tensor.numpy(), arr)
    assert (tensor.data_ptr() == arr.ctypes.data) is shared


def test_pandas_feature_names_are_recorded_and_checked():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X, columns=list("abcd"))
    km = ExplainableKMeans(n_clusters=2, random_state=0).fit(df)
    np.testing.assert_array_equal(km.feature_names_in_, list("abcd"))
    with pytest.raises(ValueError, match="feature names"):
        km.predict(df.rename(columns={"a": "z"}))


def test_values_whose_squares_overflow_are_refused_not_turned_into_nan(fitted):
    with pytest.raises(ValueError, match="too large"):
        ExplainableKMeans(n_clusters=2).fit(X * 1e200)
    with pytest.raises(ValueError, match="too large"):
        fitted.explain(X * 1e200)
    km = ExplainableKMeans(n_clusters=2, random_state=0).fit(X * 1e150)
    assert np.isfinite(km.inertia_) and np.all(np.isfinite(km.explain(X * 1e150)))
    unscaled = ExplainableKMeans(n_clusters=2, random_state=0).fit(X)
    np.testing.assert_array_equal(km.labels_, unscaled.labels_)
    f = km.decision_function(X * 1e150).max(1)  # measured relative error: 1.4e-15
    np.testing.assert_allclose(km.explain(X * 1e150).sum(1), f, rtol=1e-12, atol=0)


# the largest |x - mean| accepted in 2 features: squared distances, at most
# 2 * (2 * peak)^2, stay below a sixteenth of the float64 range
PEAK_2D = np.sqrt(np.finfo(np.float64).max / 16 / (4 * 2))


@pytest.mark.parametrize("factor, refused", [(0.99, False), (1.01, True)])
def test_magnitude_bound_keeps_squared_distances_below_a_sixteenth_of_the_range(factor,
                                                                               refused):
    corners = np.array([[-1.0, -1.0], [1.0, 1.0], [-1.0, 1.0], [1.0, -1.0]])  # mean 0
    if refused:
        with pytest.raises(ValueError, match="too large"):
            ExplainableKMeans(n_clusters=2).fit(corners * factor * PEAK_2D)
    else:
        km = ExplainableKMeans(n_clusters=2, random_state=0).fit(corners * factor * PEAK_2D)
        assert np.isfinite(km.inertia_) and np.isfinite(km.transform(corners)).all()


def test_magnitude_bound_with_a_shift_bounds_each_value_by_the_farthest_shift():
    # |x_j - s_j| <= max(max x - min s, max s - min x): values at -c and +c with a shift
    # at +c and -c are 2c apart (comparing min with min and max with max would say 0)
    from skxclust._validation import check_magnitude

    c = 0.6 * PEAK_2D
    X, shift = torch.tensor([[-c, c]]), torch.tensor([c, -c])
    with pytest.raises(ValueError, match=re.escape(f"after centring <= {2 * c:.3g}")):
        check_magnitude(X, shift=shift)


def test_constant_data_warns_like_kmeans_and_stays_finite():
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match="distinct clusters"):
        km = ExplainableKMeans(n_clusters=3, random_state=0).fit(np.ones((10, 2)))
    assert km.inertia_ == 0.0
    assert np.all(np.isfinite(km.explain(np.ones((10, 2)))))
    assert np.all(np.isfinite(km.decision_function(np.ones((10, 2)))))
