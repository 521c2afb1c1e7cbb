"""Sparse input for ExplainableKMeans: every method equals the dense result, without ever
densifying the whole matrix; explain(top_k=...) for wide vocabularies."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import requires_cuda

from skxclust import ExplainableKMeans

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FORMATS = {
    "csr_matrix": sp.csr_matrix,
    "csc_matrix": sp.csc_matrix,
    "coo_matrix": sp.coo_matrix,
    "csr_array": sp.csr_array,
}


def _sparse_topics(n=240, d=120, seed=0):
    """A quarter of the entries stored, two topics over disjoint feature ranges.

    Dense enough that every row shares features with every centroid: with rows of
    disjoint supports (e.g. TF-IDF rows seeded at data rows), distances tie exactly and
    the tie break depends on rounding, in scikit-learn's dense and sparse paths alike.
    """
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.25, random_state=rng, format="lil")
    X[: n // 2, :20] = rng.uniform(0, 2, size=(n // 2, 20)) * (rng.random((n // 2, 20)) < 0.5)
    return X.tocsr()


@pytest.fixture(scope="module")
def data():
    X = _sparse_topics()
    return X, X.toarray()


def _model(**params):
    return ExplainableKMeans(**{"n_clusters": 4, "n_init": 1, "random_state": 0,
                                "device": "cpu", **params})


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_sparse_fit_equals_dense_fit(data, fmt, init):
    Xs, Xd = data
    dense = _model(init=init).fit(Xd)
    sparse = _model(init=init).fit(FORMATS[fmt](Xs))
    np.testing.assert_array_equal(sparse.labels_, dense.labels_)
    np.testing.assert_allclose(sparse.cluster_centers_, dense.cluster_centers_, atol=1e-12)
    assert sparse.inertia_ == pytest.approx(dense.inertia_, rel=1e-10)
    assert sparse.n_iter_ == dense.n_iter_
    assert sparse.beta_ == pytest.approx(dense.beta_, rel=1e-10)


@pytest.mark.parametrize("method", ["predict", "transform", "score", "decision_function",
                                    "predict_proba", "explain"])
@pytest.mark.parametrize("fmt", ["csr_matrix", "csc_matrix"])
def test_sparse_inference_equals_dense_inference(data, method, fmt):
    Xs, Xd = data
    model = _model(batch_size=50).fit(Xd)  # several row blocks
    expected = getattr(model, method)(Xd)
    got = getattr(model, method)(FORMATS[fmt](Xs))
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_sparse_float32_stays_float32(data):
    Xs, Xd = data
    model = _model().fit(Xs.astype(np.float32))
    assert model.cluster_centers_.dtype == np.float32
    assert model.explain(Xs.astype(np.float32)).dtype == np.float32
    np.testing.assert_array_equal(model.labels_, _model().fit(Xd.astype(np.float32)).labels_)


def test_sparse_partial_fit_equals_dense_partial_fit(data):
    Xs, Xd = data
    dense, sparse = _model(n_init=1), _model(n_init=1)
    for start in range(0, Xd.shape[0], 60):
        dense.partial_fit(Xd[start:start + 60])
        sparse.partial_fit(Xs[start:start + 60])
    np.testing.assert_allclose(sparse.cluster_centers_, dense.cluster_centers_, atol=1e-12)
    np.testing.assert_array_equal(sparse.labels_, dense.labels_)


def test_sparse_fit_with_weights_equals_dense(data):
    Xs, Xd = data
    w = np.random.default_rng(1).uniform(0.1, 3.0, Xd.shape[0])
    dense = _model().fit(Xd, sample_weight=w)
    sparse = _model().fit(Xs, sample_weight=w)
    np.testing.assert_allclose(sparse.cluster_centers_, dense.cluster_centers_, atol=1e-12)
    np.testing.assert_array_equal(sparse.labels_, dense.labels_)


def test_unsorted_and_duplicate_entries_are_summed_and_the_input_is_unchanged():
    # row 0 stores column 1 twice, row 2 stores its columns out of order
    data, indices = np.array([0.5, 0.5, 1.0, 2.0, 1.0, 3.0]), np.array([1, 1, 0, 2, 0, 2])
    X = sp.csr_matrix((data, indices, np.array([0, 2, 3, 5, 6])), shape=(4, 3))
    assert not X.has_canonical_format
    before = (X.data.copy(), X.indices.copy(), X.indptr.copy())
    expected = np.array([[0, 1.0, 0], [1, 0, 0], [1, 0, 2], [0, 0, 3]])
    sparse = _model(n_clusters=2, n_init=1).fit(X)
    dense = _model(n_clusters=2, n_init=1).fit(expected)
    np.testing.assert_allclose(sparse.cluster_centers_, dense.cluster_centers_)
    np.testing.assert_allclose(sparse.transform(X), dense.transform(expected))
    for a, b in zip(before, (X.data, X.indices, X.indptr)):
        np.testing.assert_array_equal(a, b)


def test_explain_top_k_gives_the_largest_relevances_in_order(data):
    Xs, Xd = data
    model = _model().fit(Xs)
    full = model.explain(Xd)
    features, values = model.explain(Xs, top_k=5)
    assert features.shape == values.shape == (Xd.shape[0], 5)
    np.testing.assert_allclose(values, np.take_along_axis(full, features, axis=1), atol=1e-12)
    np.testing.assert_allclose(values, -np.sort(-full, axis=1)[:, :5], atol=1e-12)
    assert np.all(np.diff(values, axis=1) <= 0)


@pytest.mark.parametrize("top_k, exc", [(0, ValueError), (121, ValueError), (2.5, TypeError),
                                        (True, TypeError)])
def test_explain_refuses_a_bad_top_k_naming_it(data, top_k, exc):
    model = _model().fit(data[1])
    with pytest.raises(exc, match="top_k"):
        model.explain(data[1], top_k=top_k)


def test_a_matrix_too_wide_to_densify_is_fitted_and_explained():
    # 4000 x 2_000_000: dense it would take 64 GB; sparse it holds 8000 values
    n, d = 4000, 2_000_000
    rng = np.random.default_rng(0)
    cols = np.where(np.arange(n)[:, None] < n // 2, rng.integers(0, 10, (n, 2)),
                    rng.integers(d - 10, d, (n, 2)))
    X = sp.csr_matrix((np.ones(2 * n), (np.repeat(np.arange(n), 2), cols.ravel())),
                      shape=(n, d))
    model = ExplainableKMeans(2, n_init=1, random_state=0, device="cpu").fit(X)
    assert model.cluster_centers_.shape == (2, d) and model.labels_.shape == (n,)
    features, values = model.explain(X[[0, n - 1]], top_k=2)
    # features stored nowhere have zero centroids and zero relevance: never in the top
    used = set(range(10)) | set(range(d - 10, d))
    assert set(features.ravel()) <= used and np.all(values > 0)


def test_sparse_input_with_a_feature_extractor_is_refused_and_changes_nothing(data):
    net = torch.nn.Sequential(torch.nn.Linear(120, 3)).double()
    model = _model(feature_extractor=net)
    with pytest.raises(TypeError, match="does not accept sparse input"):
        model.fit(data[0])
    assert not hasattr(model, "cluster_centers_")


def test_dask_array_of_sparse_blocks_streams_and_infers_but_fit_says_compute_it(data):
    da = pytest.importorskip("dask.array")
    Xs, Xd = data
    blocks = da.from_array(Xs, chunks=(60, Xs.shape[1]), asarray=False)
    model = _model().fit(Xd)
    for method in ("predict", "transform", "explain"):
        np.testing.assert_allclose(getattr(model, method)(blocks).compute(),
                                   getattr(model, method)(Xd), atol=1e-10)
    streamed, dense = _model(), _model()
    streamed.partial_fit(blocks)
    for start in range(0, Xd.shape[0], 60):
        dense.partial_fit(Xd[start:start + 60])
    np.testing.assert_allclose(streamed.cluster_centers_, dense.cluster_centers_, atol=1e-12)
    with pytest.raises(TypeError, match="dask array of sparse blocks.*X.compute"):
        _model().fit(blocks)


@requires_cuda
@pytest.mark.cuda
def test_sparse_on_cuda_equals_dense_on_cpu(data):
    Xs, Xd = data
    cpu = _model().fit(Xd)
    gpu = _model(device="cuda").fit(Xs)
    np.testing.assert_array_equal(gpu.labels_, cpu.labels_)
    np.testing.assert_allclose(gpu.cluster_centers_, cpu.cluster_centers_, atol=1e-10)
    for method in ("predict", "transform", "explain"):
        np.testing.assert_allclose(getattr(gpu, method)(Xs), getattr(cpu, method)(Xd),
                                   atol=1e-10)
    np.testing.assert_allclose(gpu.explain(Xs, top_k=3)[1], cpu.explain(Xs, top_k=3)[1],
                               atol=1e-10)
