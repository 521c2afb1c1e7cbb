"""The estimate that picks a split–merge move (skxclust._split_merge)."""

import pytest
import torch
from sklearn.datasets import load_digits

from skxclust import SpatialTransformerKMeans
from skxclust._split_merge import _HALF_ROWS_NEAREST, _to_halves

F64 = torch.float64


@pytest.fixture(scope="module")
def digits():
    X = torch.as_tensor(load_digits().data[:150], dtype=F64)
    geometry = SpatialTransformerKMeans(5, n_landmarks=9, random_state=0)._make_geometry(64)
    centers = X[[0, 30, 60, 90, 120]]
    return X, centers, geometry, geometry.pairwise(X, centers)


@pytest.mark.parametrize("split", [0, 3])
def test_the_halves_are_aligned_to_the_rows_with_the_split_centroid_among_their_3_nearest(
        digits, split):
    X, centers, geometry, distances = digits
    halves = torch.stack([centers[split] * 0.9, 0.5 * (centers[split] + X[split * 30 + 1])])
    out = _to_halves(X, distances, split, halves, geometry)
    rank = distances.argsort(dim=1).argsort(dim=1)[:, split]
    near = rank < _HALF_ROWS_NEAREST
    assert _HALF_ROWS_NEAREST == 3
    assert bool((rank == 2).any()) and bool((~near).any())  # both kinds of rows present
    # the others keep the centroids they have: not counted as moving to a half
    assert bool(torch.isinf(out[~near]).all())
    torch.testing.assert_close(out[near], geometry.pairwise(X[near], halves), rtol=0, atol=0)
