"""The steps of ``init="k-means+merge"``: Euclidean over-segmentation, Ward merge, merge."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from skxclust import SpatialTransformerKMeans, _merge_init
from skxclust._merge_init import euclidean_kmeans, merge_init, ward_merge

F64 = torch.float64


def _inertia(X, weight, centers, labels):
    return float(((X - centers[labels]) ** 2).sum(1) @ weight)


def _geometry(n_clusters):
    return SpatialTransformerKMeans(n_clusters, appearance="none", n_steps=3,
                                    n_landmarks=4)._make_geometry(64)


@pytest.fixture(scope="module")
def uniform():
    # no cluster structure: the k-means runs end in different local minima
    return torch.from_numpy(np.random.default_rng(0).uniform(size=(60, 2)))


@pytest.mark.parametrize("weights, expected", [
    ([100.0, 1.0, 1.0], [0, 1, 1]),  # the two light clusters merge first
    ([1.0, 1.0, 100.0], [0, 0, 1]),
])
def test_ward_merge_weighs_the_distance_by_the_harmonic_weight_of_the_pair(weights, expected):
    # equal distances: the cost w_a w_b / (w_a + w_b) alone decides
    d = np.ones((3, 3)) - np.eye(3)
    np.testing.assert_array_equal(ward_merge(d, np.array(weights), 2), expected)


def test_ward_merge_puts_an_empty_cluster_with_its_nearest_cluster():
    # cluster 0 has no weight: it joins cluster 2, its nearest, not simply the first group
    d = np.array([[0.0, 9.0, 1.0], [9.0, 0.0, 9.0], [1.0, 9.0, 0.0]])
    np.testing.assert_array_equal(ward_merge(d, np.array([0.0, 1.0, 1.0]), 2), [0, 1, 0])


@pytest.mark.parametrize("n_runs", [None, 10])
def test_euclidean_kmeans_keeps_the_best_of_several_runs(uniform, n_runs):
    # seed 1: the first run alone ends in a worse local minimum than the best of the runs
    sw = torch.ones(uniform.shape[0], dtype=F64)
    kwargs = {} if n_runs is None else {"n_runs": n_runs}
    best = euclidean_kmeans(uniform, 6, sw, torch.Generator().manual_seed(1), **kwargs)
    one = euclidean_kmeans(uniform, 6, sw, torch.Generator().manual_seed(1), n_runs=1)
    assert _inertia(uniform, sw, *best) < 0.95 * _inertia(uniform, sw, *one)


def test_euclidean_kmeans_ends_at_a_weighted_lloyd_fixed_point(uniform):
    # the runs go on to convergence: each centroid is the weighted mean of its rows, and
    # each row is labelled with its nearest centroid
    sw = torch.from_numpy(np.random.default_rng(1).uniform(0.5, 2.0, uniform.shape[0]))
    centers, labels = euclidean_kmeans(uniform, 6, sw, torch.Generator().manual_seed(1))
    nearest = ((uniform[:, None] - centers[None]) ** 2).sum(-1).argmin(1)
    assert torch.equal(labels, nearest)
    for k in range(6):
        rows = labels == k
        mean = (sw[rows] @ uniform[rows]) / sw[rows].sum()
        torch.testing.assert_close(centers[k], mean, rtol=1e-6, atol=1e-6)


def test_merge_init_weighs_rows_as_repeated_rows(monkeypatch):
    # for one over-segmentation, the warped step, the Ward weights and the merged means
    # weigh each row as that many copies of it
    X = torch.as_tensor(load_digits().data[:40])
    repeats = torch.tensor([1, 4] * 20)
    over = X[:6].clone()
    monkeypatch.setattr(_merge_init, "euclidean_kmeans", lambda *args, **kw: (over.clone(), None))
    weighted = merge_init(X, repeats.to(F64), torch.Generator().manual_seed(0), 3, _geometry(3))
    copies = merge_init(X.repeat_interleave(repeats, 0), torch.ones(int(repeats.sum()), dtype=F64),
                        torch.Generator().manual_seed(0), 3, _geometry(3))
    torch.testing.assert_close(weighted, copies, rtol=1e-9, atol=1e-9)
