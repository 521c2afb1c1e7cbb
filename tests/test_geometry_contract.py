"""The defaults of the geometry contract (``skxclust._geometry``) that ST K-means relies on:
restarts as a leading axis through a one-restart view, their blockwise sums, row chunks,
and the restart selection of an assignment."""

import pytest
import torch

from skxclust import SpatialTransformerKMeans
from skxclust._geometry import Assignment, Geometry

pytestmark = pytest.mark.usefixtures("one_torch_thread")

N_ROWS, K = 12, 3


def st_geometry(appearance="intensity"):
    # ST K-means' geometry takes one set of centroids at a time: the contract's defaults
    return SpatialTransformerKMeans(K, image_shape=(4, 4), n_landmarks=4, n_steps=2,
                                    affine_penalty=0.5,
                                    appearance=appearance)._make_geometry(16)


@pytest.fixture(scope="module")
def warp_geometry():
    return st_geometry()


@pytest.fixture(scope="module")
def rows_and_restarts():
    generator = torch.Generator().manual_seed(0)
    X = torch.rand(N_ROWS, 16, generator=generator, dtype=torch.float64)
    centers = torch.rand(2, K, 16, generator=generator, dtype=torch.float64)
    return X, torch.ones(N_ROWS, dtype=torch.float64), centers


def test_assignment_select_keeps_the_chosen_restarts_of_every_field():
    labels, distances = torch.arange(6).reshape(3, 2), torch.arange(6.0).reshape(3, 2)
    pairwise = torch.arange(18.0).reshape(3, 2, 3)
    keep = torch.tensor([True, False, True])
    chosen = Assignment(labels, distances, "state", pairwise).select(keep)
    assert torch.equal(chosen.labels, labels[keep])
    assert torch.equal(chosen.distances, distances[keep])
    assert torch.equal(chosen.pairwise, pairwise[keep]) and chosen.state == "state"


@pytest.mark.parametrize("n", [1, 4, 5, 9, 10])
def test_chunks_cover_every_row_once(n):
    geometry = Geometry()
    geometry.batch_size = 4
    covered = torch.cat([torch.arange(n)[sl] for sl in geometry.chunks(n)])
    assert torch.equal(covered, torch.arange(n))
    assert all(sl.stop - sl.start <= 4 for sl in geometry.chunks(n))


def test_default_restart_runs_run_every_restart(warp_geometry, rows_and_restarts):
    _, _, centers = rows_and_restarts
    runs = warp_geometry.restart_runs(centers)
    assert len(runs) == 2
    for (_, run_centers), expected in zip(runs, centers):
        assert torch.equal(run_centers, expected[None])


def test_one_restart_view_keeps_the_pairwise_distances(warp_geometry, rows_and_restarts):
    # the (n, K) distances a warp assignment carries reach the Lloyd loop (split-merge
    # moves reuse them instead of warping every pair again)
    X, _, centers = rows_and_restarts
    (view, _), _ = warp_geometry.restart_runs(centers)
    batched = view.assign(X, centers[:1])
    alone = warp_geometry.assign(X, centers[0])
    assert batched.pairwise is not None
    assert torch.equal(batched.pairwise, alone.pairwise[None])
    assert torch.equal(batched.labels, alone.labels[None])


def test_default_restart_sums_use_each_restarts_centroids(rows_and_restarts):
    # with a thickness channel the members' rows depend on the centroids being updated
    warp_geometry = st_geometry("intensity+thickness")
    X, weight, centers = rows_and_restarts
    labels, _, _, sums, weights = warp_geometry.restart_sums(X, weight, centers)
    for r in range(2):
        assignment = warp_geometry.assign(X, centers[r])
        expected_sums, expected_weight = warp_geometry.partial_sums(X, centers[r], assignment,
                                                                    weight)
        assert torch.equal(labels[r], assignment.labels)
        torch.testing.assert_close(sums[r], expected_sums, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(weights[r], expected_weight, rtol=1e-12, atol=1e-12)
