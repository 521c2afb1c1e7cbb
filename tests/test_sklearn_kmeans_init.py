"""scikit-learn 1.9.1's KMeans tests (``sklearn/cluster/tests/test_k_means.py``), adapted to
ExplainableKMeans: initialisation (every ``init``, ``n_init`` and ``"auto"``, the
k-means++ seeding, sample weights in the seeding) and the errors of wrong parameters.

One of three files of the port (with ``tests/test_sklearn_kmeans_lloyd.py`` and
``tests/test_sklearn_kmeans_inputs.py``); how the port was written, the changes common to
all its tests and the scikit-learn tests removed, with their reasons, are in the docstring
of ``tests/_sklearn_kmeans_helpers.py``. What changed in the tests here:

- Checks of scikit-learn private helpers are pointed at our counterparts:
  ``_init_centroids`` and ``kmeans_plusplus`` at our seeding; the private ``_n_init`` is
  read from the ``verbose`` output.
"""


import numpy as np
import pytest
import scipy.sparse as sp
import torch
from _sklearn_kmeans_helpers import (
    KMeans,
    X,
    X_as_any_csr,
    _tensor,
    centers,
    data_containers_ids,
    n_clusters,
    n_features,
    n_samples,
    true_labels,
)
from sklearn.datasets import make_blobs
from sklearn.metrics.cluster import v_measure_score
from sklearn.metrics.pairwise import euclidean_distances
from sklearn.utils._testing import assert_allclose

from skxclust._seeding import kmeans_plusplus
from skxclust._validation import make_generators

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _check_fitted_model(km):
    # check that the number of clusters centers and distinct labels match
    # the expectation
    centers = km.cluster_centers_
    assert centers.shape == (n_clusters, n_features)

    labels = km.labels_
    assert np.unique(labels).shape[0] == n_clusters

    # check that the labels assignment are perfect (up to a permutation)
    assert_allclose(v_measure_score(true_labels, labels), 1.0)
    assert km.inertia_ > 0.0


@pytest.mark.parametrize("input_data", [X] + X_as_any_csr, ids=data_containers_ids)
@pytest.mark.parametrize(
    "init", ["random", "k-means++", centers.copy()], ids=["random", "k-means++", "ndarray"]
)
def test_all_init(input_data, init):
    # Check KMeans with all possible init.
    n_init = 10 if isinstance(init, str) else 1
    km = KMeans(init=init, n_clusters=n_clusters, random_state=42, n_init=n_init).fit(
        input_data
    )
    _check_fitted_model(km)


@pytest.mark.parametrize(
    "init", ["random", "k-means++", centers], ids=["random", "k-means++", "ndarray"]
)
def test_minibatch_kmeans_partial_fit_init(init):
    if hasattr(init, "copy"):
        # Avoid mutating a shared array in place to avoid side effects in other tests.
        init = init.copy()

    # Check init with partial_fit
    n_init = 10 if isinstance(init, str) else 1
    km = KMeans(init=init, n_clusters=n_clusters, random_state=0, n_init=n_init)
    for _ in range(100):
        # "random" init requires many batches to recover the true labels.
        km.partial_fit(X)
    _check_fitted_model(km)


@pytest.mark.parametrize(
    "init, expected_n_init",
    [("k-means++", 1), ("random", "default"), ("array-like", 1)],
)
def test_kmeans_init_auto_with_initial_centroids(init, expected_n_init, capsys):
    """Check that `n_init="auto"` chooses the right number of initializations.
    Non-regression test for #26657:
    https://github.com/scikit-learn/scikit-learn/pull/26657
    """
    n_sample, n_features, n_clusters = 100, 10, 5
    X = np.random.randn(n_sample, n_features)
    if init == "array-like":
        init = np.random.randn(n_clusters, n_features)
    if expected_n_init == "default":
        expected_n_init = 10

    KMeans(n_clusters=n_clusters, init=init, n_init="auto", verbose=1).fit(X)
    assert f"Initialization complete: {expected_n_init} restart" in capsys.readouterr().out


def test_warning_n_init_precomputed_centers():
    # Check that a warning is raised when n_init > 1 and an array is passed for
    # the init parameter.
    with pytest.warns(
        RuntimeWarning,
        match="Explicit initial center position passed: performing only one init",
    ):
        KMeans(init=centers, n_clusters=n_clusters, n_init=10).fit(X)


def test_n_init(global_random_seed):
    # Check that increasing the number of init increases the quality
    previous_inertia = np.inf
    for n_init in [1, 5, 10]:
        # set max_iter=1 to avoid finding the global minimum and get the same
        # inertia each time
        km = KMeans(
            n_clusters=n_clusters,
            init="random",
            n_init=n_init,
            random_state=global_random_seed,
            max_iter=1,
        ).fit(X)
        assert km.inertia_ <= previous_inertia


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_centers_not_mutated(dtype):
    # Check that KMeans won't mutate the user provided init centers silently even if
    # input data and init centers have the same type.
    X_new_type = X.astype(dtype, copy=False)
    centers_new_type = centers.astype(dtype, copy=False)

    km = KMeans(init=centers_new_type, n_clusters=n_clusters, n_init=1)
    km.fit(X_new_type)

    assert not np.may_share_memory(km.cluster_centers_, centers_new_type)


def test_n_init_auto(capsys):
    est = KMeans(n_init="auto", init="k-means++", verbose=1)
    est.fit(X)
    assert "Initialization complete: 1 restart" in capsys.readouterr().out

    est = KMeans(n_init="auto", init="random", verbose=1)
    est.fit(X)
    assert "Initialization complete: 10 restart" in capsys.readouterr().out


@pytest.mark.parametrize(
    "param, match",
    [
        ({"n_clusters": n_samples + 1}, r"n_samples.* should be >= n_clusters"),
        (
            {"init": X[:2]},
            r"The shape of the initial centers .* does not match "
            r"the number of clusters",
        ),
        (
            {"init": X[:8, :2]},
            r"The shape of the initial centers .* does not match "
            r"the number of features of the data",
        ),
    ],
)
def test_wrong_params(param, match):
    # Check that error are raised with clear error message when wrong values
    # are passed for the parameters
    # Set n_init=1 by default to avoid warning with precomputed init
    km = KMeans(n_init=1)
    with pytest.raises(ValueError, match=match):
        km.set_params(**param).fit(X)


@pytest.mark.parametrize("input_data", [X] + X_as_any_csr)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kmeans_plusplus_output(input_data, dtype, global_random_seed):
    # Check for the correct number of seeds and all positive values
    # (scikit-learn: the public kmeans_plusplus; here our seeding, which returns the
    # seeds only, so every seed is checked to be a row of X)
    data = input_data.astype(dtype)
    sw = torch.ones(data.shape[0], dtype=torch.float64)
    generator = make_generators(global_random_seed, 1)[0]
    seeds = kmeans_plusplus(_tensor(data), n_clusters, sw, generator).numpy()

    # Check for the correct number of seeds and that they are bound by the data
    dense = data.toarray() if sp.issparse(data) else data
    assert seeds.shape == (n_clusters, n_features)
    assert (seeds.max(axis=0) <= dense.max(axis=0)).all()
    assert (seeds.min(axis=0) >= dense.min(axis=0)).all()

    # Check that every seed is a row of X (distinct rows)
    indices = [int(np.flatnonzero((dense == s).all(axis=1))[0]) for s in seeds]
    assert len(set(indices)) == n_clusters
    assert_allclose(X[indices].astype(dtype), seeds)


@pytest.mark.parametrize(
    "kwargs", ({"init": np.str_("k-means++")}, {"init": [[0, 0], [1, 1]], "n_init": 1})
)
def test_kmeans_with_array_like_or_np_scalar_init(kwargs):
    """Check that init works with numpy scalar strings.

    Non-regression test for #21964.
    """
    X = np.asarray([[0, 0], [0.5, 0], [0.5, 1], [1, 1]], dtype=np.float64)

    clustering = KMeans(n_clusters=2, **kwargs)
    # Does not raise
    clustering.fit(X)


def _init_centroids(init, X, sample_weight, n_centroids, seed):
    """Seeds of ``init`` (scikit-learn: the private KMeans._init_centroids)."""
    km = KMeans(n_clusters=n_centroids, init=init)
    Xt = _tensor(X)
    shift = torch.zeros(X.shape[1], dtype=Xt.dtype)
    return km._init_centroids(Xt, torch.from_numpy(sample_weight), make_generators(seed, 1),
                              None, shift)[0].numpy()


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_sample_weight_init(init, global_random_seed):
    """Check that sample weight is used during init."""
    rng = np.random.RandomState(global_random_seed)
    X, _ = make_blobs(
        n_samples=200, n_features=10, centers=10, random_state=global_random_seed
    )

    clusters_weighted = _init_centroids(init, X, rng.uniform(size=X.shape[0]), 5,
                                        global_random_seed)
    clusters = _init_centroids(init, X, np.ones(X.shape[0]), 5, global_random_seed)
    with pytest.raises(AssertionError):
        assert_allclose(clusters_weighted, clusters)


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_sample_weight_zero(init, global_random_seed):
    """Check that if sample weight is 0, this sample won't be chosen."""
    rng = np.random.RandomState(global_random_seed)
    X, _ = make_blobs(
        n_samples=100, n_features=5, centers=5, random_state=global_random_seed
    )
    sample_weight = rng.uniform(size=X.shape[0])
    sample_weight[::2] = 0

    clusters_weighted = _init_centroids(init, X, sample_weight, 10, global_random_seed)
    # No center should be one of the 0 sample weight point
    # (i.e. be at a distance=0 from it)
    d = euclidean_distances(X[::2], clusters_weighted)
    assert not np.any(np.isclose(d, 0))
