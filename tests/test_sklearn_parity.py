"""Same initial centroids => the same fit as sklearn.cluster.KMeans: centres, labels,
inertia and n_iter_, including runs that relocate empty clusters (float64, no exact ties)."""

import numpy as np
import pytest
from sklearn.cluster import KMeans

from skxclust import ExplainableKMeans

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _both(X, init, sample_weight=None, **params):
    kw = dict(n_clusters=len(init), init=init, n_init=1, **params)
    ours = ExplainableKMeans(device="cpu", **kw).fit(X, sample_weight=sample_weight)
    theirs = KMeans(**kw).fit(X, sample_weight=sample_weight)
    return ours, theirs


def _assert_same_fit(ours, theirs):
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_,
                               rtol=1e-13, atol=1e-13)
    assert ours.inertia_ == pytest.approx(theirs.inertia_, rel=1e-12)
    assert ours.n_iter_ == theirs.n_iter_


ONE_D = np.array([-10, -9.5, -9, -8.5, -8, -1, 1, 9, 9.5, 10.0])[:, None]


@pytest.mark.parametrize("max_iter", [1, 2, 300])
def test_relocated_sample_leaves_its_cluster_as_in_sklearn(max_iter):
    # two clusters are empty after the first assignment; the farthest samples (10, 9.5)
    # move into them and out of the first cluster's mean
    ours, theirs = _both(ONE_D, np.array([[-10.0], [-20.0], [-30.0]]), max_iter=max_iter)
    _assert_same_fit(ours, theirs)
    if max_iter == 1:
        np.testing.assert_allclose(ours.cluster_centers_.ravel(), [-4.5, 10, 9.5])
        assert ours.inertia_ == pytest.approx(146.5)


def test_n_iter_counts_the_update_that_confirms_strict_convergence():
    X = np.array([[0, 0], [0.5, 0], [0.5, 1], [1, 1]], dtype=float)
    ours, theirs = _both(X, np.array([[0.0, 0.0], [1.0, 1.0]]), sample_weight=[3, 1, 1, 3])
    _assert_same_fit(ours, theirs)
    assert ours.n_iter_ == 2


@pytest.mark.parametrize("tol", [0.0, 1e-4, 1e-1])
@pytest.mark.parametrize("seed", range(4))
def test_fit_equals_sklearn_from_far_initial_centroids(seed, tol):
    # initial centroids scattered far from the data: several clusters empty, relocated
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(300, 4))
    X[:100] += 4.0
    init = X[rng.choice(300, 7, replace=False)] + 6.0 * rng.normal(size=(7, 4))
    weights = rng.uniform(0.5, 2.0, size=300)
    ours, theirs = _both(X, init, sample_weight=weights, tol=tol)
    _assert_same_fit(ours, theirs)


def test_more_clusters_than_distinct_points_stop_after_one_iteration():
    X = np.array([[0, 0], [1, 1], [1, 1], [1, 0], [0, 1]], dtype=float)
    with pytest.warns(Warning, match="Number of distinct clusters"):
        ours, theirs = _both(X, X.copy())
    _assert_same_fit(ours, theirs)
    assert ours.n_iter_ == 1
