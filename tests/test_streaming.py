"""partial_fit: MiniBatchKMeans semantics, fitted attributes, streaming quality, bad input."""

import copy
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.cluster import MiniBatchKMeans
from sklearn.datasets import load_digits, make_blobs

from skxclust import ExplainableKMeans, SpatialTransformerKMeans

ST_FAST = dict(n_steps=3, max_iter=4, n_landmarks=4, update_steps=3)
CHUNKS = 6


# tiny problems run faster on one thread (see conftest.one_torch_thread)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def blobs(n=240, n_features=16, seed=0):
    X, _ = make_blobs(n, n_features, centers=4, cluster_std=1.5, random_state=seed)
    return X


def digits(n=None):
    X = load_digits().data
    return X if n is None else X[:n]


def make(name, **params):
    if name == "explainable":
        return ExplainableKMeans(4, random_state=0, **params)
    return SpatialTransformerKMeans(4, random_state=0, **ST_FAST, **params)


def chunked(X, n_chunks=CHUNKS):
    return [X[rows] for rows in np.array_split(np.arange(X.shape[0]), n_chunks)]


@pytest.mark.parametrize("n_chunks", [1, 3])
def test_partial_fit_equals_minibatch_kmeans_without_reassignment(n_chunks):
    X = blobs()
    init = X[:4].copy()
    ours = ExplainableKMeans(4, init=init)
    peer = MiniBatchKMeans(4, init=init, n_init=1, reassignment_ratio=0.0)
    for _ in range(2):
        for chunk in chunked(X, n_chunks):
            ours.partial_fit(chunk)
            peer.partial_fit(chunk)
    np.testing.assert_allclose(ours.cluster_centers_, peer.cluster_centers_, atol=1e-10)
    np.testing.assert_array_equal(ours.labels_, peer.labels_)
    np.testing.assert_allclose(ours.inertia_, peer.inertia_, rtol=1e-10)
    assert ours.n_steps_ == peer.n_steps_ == 2 * n_chunks


def test_integer_sample_weights_equal_repeated_rows():
    X = blobs(60)
    init = X[:4].copy()
    w = np.random.default_rng(0).integers(0, 3, 60)
    weighted = ExplainableKMeans(4, init=init).partial_fit(X, sample_weight=w)
    repeated = ExplainableKMeans(4, init=init).partial_fit(np.repeat(X, w, axis=0))
    np.testing.assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_,
                               atol=1e-10)


def test_st_kmeans_integer_sample_weights_equal_repeated_rows_in_partial_fit():
    # the weights enter both the sums and the normal operator of the least-squares step
    X = digits(24)
    w = np.tile([1, 2, 0], 8)
    params = dict(ST_FAST, random_state=0, init=X[[0, 1, 3]].copy())
    weighted = SpatialTransformerKMeans(3, **params).partial_fit(X, sample_weight=w)
    repeated = SpatialTransformerKMeans(3, **params).partial_fit(np.repeat(X, w, axis=0))
    np.testing.assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_,
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["explainable", "spatial"])
def test_partial_fit_makes_every_inference_method_work(name):
    X = digits(90)
    est = make(name)
    for chunk in chunked(X, 3):
        est.partial_fit(chunk)
    assert est.n_steps_ == 3
    assert est.cluster_centers_.shape == (4, 64)
    assert est.labels_.shape == (30,) and np.isfinite(est.inertia_)
    assert np.isfinite(est.beta_)
    if name == "spatial":
        assert est.image_shape_ == (8, 8)
        # like beta_, the explanation's reference describes the last chunk
        np.testing.assert_allclose(est.reference_, chunk.mean(0), rtol=1e-12)
        assert est.align(X[:5]).shape == (5, 64)
    labels = est.predict(X)
    np.testing.assert_array_equal(est.decision_function(X).argmax(axis=1), labels)
    assert est.transform(X).shape == (90, 4)
    relevance = est.explain(X[:5])
    np.testing.assert_allclose(relevance.sum(axis=1),
                               est.decision_function(X[:5]).max(axis=1), rtol=1e-6)


def distortion(est, X):
    """Sum of the squared distances to the nearest centroid (ST K-means' ``score`` is a
    log-evidence, not minus this)."""
    return float((est.transform(X).min(axis=1).astype(np.float64) ** 2).sum())


@pytest.mark.parametrize("name", ["explainable", "spatial"])
def test_labels_and_inertia_describe_the_last_chunk_after_its_step(name):
    X = digits(60)
    est = make(name)
    est.partial_fit(X[:30])
    est.partial_fit(X[30:])
    np.testing.assert_array_equal(est.labels_, est.predict(X[30:]))
    np.testing.assert_allclose(est.inertia_, distortion(est, X[30:]), rtol=1e-5)


@pytest.mark.parametrize("name", ["explainable", "spatial"])
def test_partial_fit_is_reproducible_with_a_random_state(name):
    X = digits(60)
    a, b = make(name), make(name)
    for chunk in chunked(X, 2):
        a.partial_fit(chunk)
        b.partial_fit(chunk)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)


def test_fit_resets_the_step_count_and_partial_fit_continues_from_it():
    X = blobs()
    est = ExplainableKMeans(4, random_state=0).fit(X)
    assert est.n_steps_ == 0
    centers = est.cluster_centers_.copy()
    est.partial_fit(X)  # the converged centroids are the means of their members
    np.testing.assert_allclose(est.cluster_centers_, centers, atol=1e-10)
    assert est.n_steps_ == 1
    est.fit(X)
    assert est.n_steps_ == 0


@pytest.mark.parametrize("name", ["explainable", "spatial"])
def test_later_chunks_take_the_dtype_of_the_first(name):
    X = digits(60)
    est = make(name).partial_fit(X[:30].astype(np.float32))
    est.partial_fit(X[30:])
    assert est.cluster_centers_.dtype == np.float32
    assert est.transform(X.astype(np.float32)).dtype == np.float32


def test_streamed_explainable_kmeans_is_close_to_a_full_fit_on_digits():
    X = digits()
    full = ExplainableKMeans(10, random_state=0).fit(X)
    est = ExplainableKMeans(10, random_state=0)
    for _ in range(3):
        for chunk in chunked(X):
            est.partial_fit(chunk)
    assert -est.score(X) <= 1.10 * -full.score(X)


def test_streamed_st_kmeans_is_close_to_a_full_fit():
    X = digits(240)
    params = dict(n_steps=8, max_iter=4, n_landmarks=4, update_steps=5)
    full = SpatialTransformerKMeans(5, random_state=0, **params).fit(X)
    est = SpatialTransformerKMeans(5, random_state=0, **params)
    for _ in range(2):
        for chunk in chunked(X, 4):
            est.partial_fit(chunk)
    assert distortion(est, X) <= 1.25 * distortion(full, X)


@pytest.mark.parametrize("name", ["explainable", "spatial"])
def test_pickled_streaming_model_continues_like_the_original(name):
    X = digits(90)
    est = make(name).partial_fit(X[:45])
    clone = pickle.loads(pickle.dumps(est))
    est.partial_fit(X[45:])
    clone.partial_fit(X[45:])
    np.testing.assert_allclose(est.cluster_centers_, clone.cluster_centers_, atol=1e-12)


BAD_LATER_CHUNKS = {
    "wrong feature count": (lambda X: X[:10, :10], {}, ValueError, "features"),
    "NaN": (lambda X: np.where(X[:10] > 5, np.nan, X[:10]), {}, ValueError, "NaN"),
    "negative weight": (lambda X: X[:10], {"sample_weight": -np.ones(10)}, ValueError,
                        "non-negative"),
    "sparse": (lambda X: sp.csr_matrix(X[:10]), {}, TypeError, "(?i)sparse"),
}


@pytest.mark.parametrize(
    "name, case",
    [(name, case) for name in ("explainable", "spatial") for case in sorted(BAD_LATER_CHUNKS)
     if (name, case) != ("explainable", "sparse")],  # ExplainableKMeans takes sparse chunks
)
def test_refused_chunk_changes_nothing(name, case):
    X = digits(40)
    est = make(name).partial_fit(X[:20])
    before = copy.deepcopy(est.__dict__)
    data, kwargs, exc, match = BAD_LATER_CHUNKS[case]
    with pytest.raises(exc, match=match):
        est.partial_fit(data(X), **kwargs)
    assert before.keys() == est.__dict__.keys()
    for key, value in before.items():
        np.testing.assert_equal(est.__dict__[key], value)


@pytest.mark.parametrize("name", ["explainable", "spatial"])
def test_first_chunk_smaller_than_n_clusters_is_refused_and_leaves_no_attribute(name):
    est = make(name)
    before = copy.deepcopy(est.__dict__)
    with pytest.raises(ValueError, match="n_clusters=4"):
        est.partial_fit(digits(3))
    assert est.__dict__.keys() == before.keys()


def test_dask_ml_incremental_drives_partial_fit():
    pytest.importorskip("dask")
    wrappers = pytest.importorskip("dask_ml.wrappers")
    import dask.array as da

    X = blobs()
    inc = wrappers.Incremental(ExplainableKMeans(4, random_state=0), shuffle_blocks=False)
    inc.fit(da.from_array(X, chunks=60))
    direct = ExplainableKMeans(4, random_state=0)
    for chunk in chunked(X, 4):
        direct.partial_fit(chunk)
    np.testing.assert_allclose(inc.estimator_.cluster_centers_, direct.cluster_centers_)
