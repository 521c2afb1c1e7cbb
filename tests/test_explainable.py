"""Behaviour of ExplainableKMeans: clustering, evidence, NEON relevance, soft assignments."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits, make_blobs
from sklearn.utils import check_array

from skxclust import ExplainableKMeans


def neon_reference(x, mu, c, beta):
    """Plain-numpy NEON for one sample, written from the formulas (slow on purpose)."""
    competitors = [k for k in range(len(mu)) if k != c]
    w = {k: 2.0 * (mu[c] - mu[k]) for k in competitors}
    b = {k: mu[k] @ mu[k] - mu[c] @ mu[c] for k in competitors}
    h = np.array([w[k] @ x + b[k] for k in competitors])
    f = h.min()
    if np.isinf(beta):
        p = (h == h.min()).astype(float)
    else:
        p = np.exp(-beta * (h - h.min()))
    p /= p.sum()
    relevance = np.zeros_like(x)
    for j, k in enumerate(competitors):
        m = 0.5 * (mu[c] + mu[k])
        relevance += p[j] * f * (x - m) * w[k] / h[j]
    return relevance, f


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(n_samples=300, n_features=6, centers=5, cluster_std=1.5, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:600], y[:600]


@pytest.fixture(scope="module")
def fitted_blobs(blobs):
    return ExplainableKMeans(n_clusters=5, n_init=3, random_state=0, device="cpu").fit(blobs[0])


@pytest.fixture(scope="module")
def fitted_digits(digits):
    return ExplainableKMeans(n_clusters=10, random_state=0, device="cpu").fit(digits[0])


# --- clustering ---------------------------------------------------------------------------


def test_fit_matches_sklearn_kmeans_inertia_from_the_same_init(blobs):
    X, _ = blobs
    init = X[[0, 50, 100, 150, 200]]
    ours = ExplainableKMeans(n_clusters=5, init=init, device="cpu").fit(X)
    ref = KMeans(n_clusters=5, init=init, n_init=1).fit(X)
    np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=1e-10)
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    assert ours.inertia_ == pytest.approx(ref.inertia_, rel=1e-10)


def test_kmeans_plusplus_restarts_reach_sklearn_inertia_on_digits(digits):
    X, _ = digits
    ours = ExplainableKMeans(n_clusters=10, n_init=5, random_state=0, device="cpu").fit(X)
    ref = KMeans(n_clusters=10, n_init=5, random_state=0).fit(X)
    assert ours.inertia_ <= ref.inertia_ * 1.02
    assert ours.n_iter_ >= 1


def test_labels_are_the_nearest_centroid(fitted_blobs, blobs):
    X, _ = blobs
    d = ((X[:, None, :] - fitted_blobs.cluster_centers_[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(fitted_blobs.labels_, d.argmin(1))
    np.testing.assert_array_equal(fitted_blobs.predict(X), fitted_blobs.labels_)
    assert fitted_blobs.inertia_ == pytest.approx(d.min(1).sum(), rel=1e-10)
    assert fitted_blobs.score(X) == pytest.approx(-fitted_blobs.inertia_, rel=1e-10)


def test_transform_returns_euclidean_distances(fitted_blobs, blobs):
    X, _ = blobs
    d = np.sqrt(((X[:, None, :] - fitted_blobs.cluster_centers_[None]) ** 2).sum(-1))
    np.testing.assert_allclose(fitted_blobs.transform(X), d, rtol=1e-9, atol=1e-9)


def test_same_random_state_gives_identical_model(blobs):
    X, _ = blobs
    a = ExplainableKMeans(n_clusters=5, n_init=3, random_state=42, device="cpu").fit(X)
    b = ExplainableKMeans(n_clusters=5, n_init=3, random_state=42, device="cpu").fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.labels_, b.labels_)


def test_integer_sample_weight_equals_repeating_rows_from_a_fixed_init(blobs):
    X, _ = blobs
    X = X[:60]
    weights = np.arange(60) % 3 + 1
    init = X[[0, 20, 40]]
    km = ExplainableKMeans(n_clusters=3, init=init, device="cpu")
    weighted = clone(km).fit(X, sample_weight=weights)
    repeated = clone(km).fit(np.repeat(X, weights, 0))
    np.testing.assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_, rtol=1e-10)
    assert weighted.inertia_ == pytest.approx(repeated.inertia_, rel=1e-10)


def test_empty_cluster_is_relocated_not_left_empty():
    X = np.r_[np.zeros((10, 2)), np.ones((10, 2)), np.full((10, 2), 5.0)]
    X = X + np.random.default_rng(0).normal(scale=0.01, size=X.shape)
    init = np.array([[0.0, 0.0], [1.0, 1.0], [100.0, 100.0]])  # third centroid gets nothing
    km = ExplainableKMeans(n_clusters=3, init=init, device="cpu").fit(X)
    assert len(np.unique(km.labels_)) == 3
    assert np.all(np.abs(km.cluster_centers_) < 10)


def test_float32_input_gives_float32_outputs(blobs):
    X = blobs[0].astype(np.float32)
    km = ExplainableKMeans(n_clusters=5, random_state=0, device="cpu").fit(X)
    assert km.cluster_centers_.dtype == np.float32
    for out in (km.transform(X), km.decision_function(X), km.predict_proba(X), km.explain(X)):
        assert out.dtype == np.float32
    R = km.explain(X)
    f = km.decision_function(X).max(1)
    np.testing.assert_allclose(R.sum(1), f, rtol=1e-3, atol=1e-3 * np.abs(f).max())


def test_pickle_round_trip_keeps_predictions(fitted_digits, digits):
    X, _ = digits
    clone = pickle.loads(pickle.dumps(fitted_digits))
    assert isinstance(clone.cluster_centers_, np.ndarray)
    np.testing.assert_array_equal(clone.predict(X), fitted_digits.predict(X))
    np.testing.assert_array_equal(clone.explain(X[:20]), fitted_digits.explain(X[:20]))


def test_verbose_prints_progress(blobs, capsys):
    ExplainableKMeans(n_clusters=3, random_state=0, verbose=1, device="cpu").fit(blobs[0])
    out = capsys.readouterr().out
    assert "Iteration 1" in out and "inertia" in out


# --- evidence (decision_function) ----------------------------------------------------------


@pytest.mark.parametrize("name", ["fitted_blobs", "fitted_digits"])
def test_decision_function_argmax_is_predict_and_assigned_evidence_positive(name, request):
    km = request.getfixturevalue(name)
    X = request.getfixturevalue(name.split("_")[1])[0]
    f = km.decision_function(X)
    labels = km.predict(X)
    np.testing.assert_array_equal(f.argmax(1), labels)
    assert np.all(f[np.arange(len(X)), labels] > 0)
    others = np.ones_like(f, dtype=bool)
    others[np.arange(len(X)), labels] = False
    assert np.all(f[others] < 0)


def test_decision_function_equals_min_over_competitors(fitted_blobs, blobs):
    X, _ = blobs
    mu = fitted_blobs.cluster_centers_
    d = ((X[:, None, :] - mu[None]) ** 2).sum(-1)
    expected = np.stack(
        [np.delete(d, c, axis=1).min(1) - d[:, c] for c in range(len(mu))], axis=1
    )
    np.testing.assert_allclose(fitted_blobs.decision_function(X), expected, rtol=1e-9, atol=1e-9)


def test_beta_auto_is_inverse_mean_assigned_evidence(fitted_blobs, blobs):
    X, _ = blobs
    f = fitted_blobs.decision_function(X).max(1)
    assert fitted_blobs.beta_ == pytest.approx(1.0 / f.mean(), rel=1e-8)
    assert ExplainableKMeans(n_clusters=5, beta=0.5).fit(X).beta_ == 0.5


# --- explain -------------------------------------------------------------------------------


@pytest.mark.parametrize("beta", [0.0, None, 0.01, 5.0, np.inf])
@pytest.mark.parametrize("name", ["fitted_blobs", "fitted_digits"])
def test_explain_relevance_sums_to_the_explained_evidence(name, beta, request):
    km = request.getfixturevalue(name)
    X = request.getfixturevalue(name.split("_")[1])[0]
    R = km.explain(X, beta=beta)
    f = km.decision_function(X).max(1)
    assert R.shape == X.shape
    np.testing.assert_allclose(R.sum(1), f, rtol=1e-6, atol=0)


@pytest.mark.parametrize("target", [0, 3, "per_row"])
def test_explain_conserves_for_any_target(fitted_blobs, blobs, target):
    X, _ = blobs
    if target == "per_row":
        target = np.arange(len(X)) % 5
    R = fitted_blobs.explain(X, target=target)
    f = fitted_blobs.decision_function(X)
    f_t = f[np.arange(len(X)), np.broadcast_to(target, (len(X),))]
    np.testing.assert_allclose(R.sum(1), f_t, rtol=1e-6, atol=1e-9 * np.abs(f).max())


@pytest.mark.parametrize("beta", [0.0, 0.3, np.inf])
def test_explain_matches_plain_numpy_neon(fitted_digits, digits, beta):
    X, _ = digits
    X = X[:25]
    targets = np.arange(25) % 10
    R = fitted_digits.explain(X, target=targets, beta=beta)
    mu = fitted_digits.cluster_centers_
    for i in range(len(X)):
        ref, _ = neon_reference(X[i], mu, targets[i], beta)
        np.testing.assert_allclose(R[i], ref, rtol=1e-8, atol=1e-8 * np.abs(ref).max())


def test_explain_default_beta_is_fitted_beta(fitted_digits, digits):
    X, _ = digits
    np.testing.assert_array_equal(
        fitted_digits.explain(X[:30]), fitted_digits.explain(X[:30], beta=fitted_digits.beta_)
    )


def test_explain_is_independent_of_batch_size(digits):
    X, _ = digits
    big = ExplainableKMeans(n_clusters=6, random_state=0, device="cpu").fit(X)
    small = ExplainableKMeans(n_clusters=6, random_state=0, batch_size=7, device="cpu").fit(X)
    np.testing.assert_allclose(small.explain(X), big.explain(X), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("method", ["predict", "transform", "decision_function",
                                    "predict_proba", "score"])
def test_inference_is_independent_of_batch_size(digits, method):
    # 7-row blocks: many shifted blocks through one reused buffer, and a short last one
    X, _ = digits
    big = ExplainableKMeans(n_clusters=6, random_state=0, device="cpu").fit(X)
    small = clone(big).set_params(batch_size=7).fit(X)
    np.testing.assert_allclose(getattr(small, method)(X[:300]), getattr(big, method)(X[:300]),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_inference_refuses_non_finite_x_with_scikit_learns_exact_message(fitted_digits,
                                                                         digits, bad):
    X = digits[0][:20].copy()
    X[3, 5] = bad
    with pytest.raises(ValueError) as expected:
        check_array(X, estimator=fitted_digits, input_name="X")
    for method in ("predict", "transform", "explain", "score"):
        with pytest.raises(ValueError) as got:
            getattr(fitted_digits, method)(X)
        assert str(got.value) == str(expected.value), method


def test_stiff_beta_gives_relevance_of_the_nearest_competitor_only(fitted_blobs, blobs):
    X, _ = blobs
    mu = fitted_blobs.cluster_centers_
    c = fitted_blobs.predict(X[:1])[0]
    d = ((X[0] - mu) ** 2).sum(1)
    d[c] = np.inf
    k = d.argmin()
    w = 2 * (mu[c] - mu[k])
    m = 0.5 * (mu[c] + mu[k])
    expected = (X[0] - m) * w  # f_c = h_ck, so R_i = (x_i - m_i) w_i
    np.testing.assert_allclose(fitted_blobs.explain(X[:1], beta=np.inf)[0], expected, rtol=1e-9)


def test_explain_does_not_modify_input_or_estimator(fitted_blobs, blobs):
    X = blobs[0].copy()
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v)
              for k, v in fitted_blobs.__dict__.items()}
    fitted_blobs.explain(X)
    fitted_blobs.predict_proba(X)
    np.testing.assert_array_equal(X, blobs[0])
    assert before.keys() == fitted_blobs.__dict__.keys()
    for key, value in before.items():
        np.testing.assert_array_equal(fitted_blobs.__dict__[key], value)


# --- soft assignments -------------------------------------------------------------------


def test_predict_proba_rows_sum_to_one_and_follow_softmax(fitted_blobs, blobs):
    X, _ = blobs
    P = fitted_blobs.predict_proba(X)
    np.testing.assert_allclose(P.sum(1), 1.0, rtol=1e-12)
    d = fitted_blobs.transform(X) ** 2
    logits = -d / 2.0
    expected = np.exp(logits - logits.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    np.testing.assert_allclose(P, expected, rtol=1e-8, atol=1e-12)


def test_temperature_limits_hard_labels_and_uniform(fitted_blobs, blobs):
    X, _ = blobs
    cold = fitted_blobs.set_params(temperature=1e-6).predict_proba(X)
    np.testing.assert_array_equal(cold.argmax(1), fitted_blobs.predict(X))
    np.testing.assert_allclose(cold.max(1), 1.0, atol=1e-6)
    hot = fitted_blobs.set_params(temperature=1e9).predict_proba(X)
    np.testing.assert_allclose(hot, 1 / 5, atol=1e-5)
    fitted_blobs.set_params(temperature=1.0)


# --- as_module ------------------------------------------------------------------------


def test_as_module_outputs_equal_estimator_methods(fitted_digits, digits):
    X, _ = digits
    x = torch.from_numpy(X)
    with torch.no_grad():
        f = fitted_digits.as_module("neuralized")(x).numpy()
        p = fitted_digits.as_module("soft")(x).numpy()
        d = fitted_digits.as_module("distance")(x).numpy()
    scale = np.abs(f).max()
    np.testing.assert_allclose(f, fitted_digits.decision_function(X), atol=1e-9 * scale)
    np.testing.assert_allclose(p, fitted_digits.predict_proba(X), atol=1e-9)
    np.testing.assert_allclose(d, fitted_digits.transform(X) ** 2, rtol=1e-9, atol=1e-6)


def test_as_module_smooth_pool_approaches_min_for_large_beta(fitted_blobs, blobs):
    x = torch.from_numpy(blobs[0])
    hard = fitted_blobs.as_module("neuralized")(x)
    soft = fitted_blobs.as_module("neuralized", beta=1e3)(x)
    assert torch.all(soft >= hard - 1e-9)  # log-mean-exp lies above the min
    assert float((soft - hard).abs().max()) < np.log(4) / 1e3 + 1e-9


def test_as_module_rejects_unknown_kind(fitted_blobs):
    with pytest.raises(ValueError, match="kind"):
        fitted_blobs.as_module("linear")


def test_explain_default_target_is_the_predicted_cluster(fitted_digits, digits):
    # equal up to rounding: the default target takes a shorter path to the same numbers
    X, _ = digits
    np.testing.assert_allclose(
        fitted_digits.explain(X), fitted_digits.explain(X, target=fitted_digits.predict(X)),
        rtol=1e-12, atol=1e-12)
