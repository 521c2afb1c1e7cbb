"""The centroid update for fixed warps (skxclust.nn.centroid_update): its sums over
samples, the coverage mask, and the preconditioned CG of solve_normal_equations."""

import pytest
import torch

from skxclust.nn.centroid_update import (
    adjoint_sums,
    covered,
    normal_sums,
    solve_centroids,
    solve_normal_equations,
)
from skxclust.nn.warps import make_warp_model

F64 = torch.float64


@pytest.fixture(scope="module")
def members():
    """Five 6 x 6 images in two clusters, their random warps and integer weights."""
    g = torch.Generator().manual_seed(3)
    model = make_warp_model((6, 6), 4, "tps", F64)
    X = torch.rand(5, 36, dtype=F64, generator=g)
    params = 0.2 * torch.randn(5, 4, 2, dtype=F64, generator=g)
    labels = torch.tensor([0, 1, 0, 1, 0])
    weights = torch.tensor([1.0, 2.0, 3.0, 1.0, 2.0], dtype=F64)
    start = torch.rand(2, 36, dtype=F64, generator=g)
    return model, X, params, labels, weights, start


def spd_system(n, seed):
    """A random symmetric positive definite (n, n) matrix and two right-hand sides."""
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(n, n, dtype=F64, generator=g))
    A = q @ torch.diag(torch.logspace(0, 2, n, dtype=F64)) @ q.T
    return A, torch.randn(2, n, dtype=F64, generator=g)


@pytest.mark.parametrize("batch_size", [1, 2, 4])
def test_the_sums_do_not_depend_on_the_batch_size(members, batch_size):
    # every row is summed whatever the chunking, the last one included
    model, X, params, labels, weights, start = members
    for chunked, whole in [
        (adjoint_sums(X, model, params, labels, 2, weights, batch_size=batch_size),
         adjoint_sums(X, model, params, labels, 2, weights)),
        (normal_sums(start, model, params, labels, weights, batch_size=batch_size),
         normal_sums(start, model, params, labels, weights)),
    ]:
        torch.testing.assert_close(chunked, whole, rtol=1e-12, atol=1e-12)


def test_integer_weights_count_as_repeated_rows(members):
    # a weight w on a row acts as w copies of it, in each sum and in the solve
    model, X, params, labels, weights, start = members
    count = weights.long()
    X_r, params_r, labels_r = (t.repeat_interleave(count, dim=0) for t in (X, params, labels))
    torch.testing.assert_close(adjoint_sums(X, model, params, labels, 2, weights),
                               adjoint_sums(X_r, model, params_r, labels_r, 2))
    torch.testing.assert_close(normal_sums(start, model, params, labels, weights),
                               normal_sums(start, model, params_r, labels_r))
    torch.testing.assert_close(
        solve_centroids(X, model, params, labels, start, weights, n_iter=5),
        solve_centroids(X_r, model, params_r, labels_r, start, n_iter=5))


@pytest.mark.parametrize("value, expected", [(1e-6, False), (2e-6, True), (1e-5, True)])
@pytest.mark.parametrize("top", [1.0, 2.0])
def test_covered_means_strictly_above_a_millionth_of_the_clusters_maximum(value, expected,
                                                                            top):
    # the threshold is relative to each cluster's largest cover, and strict
    cover = torch.tensor([[top, value * top, 0.0], [1e-3, 0.0, 0.0]], dtype=F64)
    assert covered(cover).tolist() == [[True, expected, False], [True, False, False]]


def test_an_empty_cluster_keeps_its_start(members):
    # a centroid without members (here the last one) is returned unchanged
    model, X, params, labels, weights, _ = members
    start = torch.rand(3, 36, dtype=F64, generator=torch.Generator().manual_seed(1))
    mu = solve_centroids(X, model, params, labels, start, weights)
    torch.testing.assert_close(mu[2], start[2], rtol=0, atol=0)
    assert not torch.equal(mu[:2], start[:2])


def test_pixels_below_the_coverage_threshold_keep_their_start():
    # an uncovered pixel is neither averaged nor moved by CG, even with a residual there
    d = torch.tensor([1.0, 3.0, 10.0, 1e-9], dtype=F64)
    rhs = torch.tensor([[1.0, -2.0, 3.0, 5.0]], dtype=F64)
    start = torch.full((1, 4), 0.25, dtype=F64)
    mu = solve_normal_equations(rhs, d[None], start, lambda v: d * v, n_iter=3)
    assert float(mu[0, 3]) == 0.25
    torch.testing.assert_close(mu[0, :3], rhs[0, :3] / d[:3])


@pytest.mark.parametrize("scale", [0.0, 0.5, 1.5])
def test_no_iterations_return_the_better_of_start_and_the_average(scale):
    # with identity warps the average (the mean) is optimal, so it wins over any start
    model = make_warp_model((1, 6), n_landmarks=4, transform="affine", dtype=F64)
    X = torch.rand(4, 6, dtype=F64, generator=torch.Generator().manual_seed(2)) + 0.5
    params, labels = torch.zeros(4, 2, 1, dtype=F64), torch.zeros(4, dtype=torch.long)
    mean = X.mean(0, keepdim=True)
    mu = solve_centroids(X, model, params, labels, scale * mean, n_iter=0)
    torch.testing.assert_close(mu, mean)


def test_a_diagonal_system_is_solved_by_one_preconditioned_step():
    # the preconditioner is 1 / cover: a diagonal operator proportional to cover is
    # solved exactly by the first CG step from the average
    d = torch.tensor([1.0, 3.0, 10.0, 30.0, 100.0, 0.5], dtype=F64)
    rhs = torch.tensor([[1.0, -2.0, 3.0, 0.5, 4.0, -1.0], [2.0, 1.0, -1.0, 3.0, 0.2, 1.0]],
                       dtype=F64)
    cover = 2.0 * d.expand(2, -1)
    mu = solve_normal_equations(rhs, cover, torch.zeros(2, 6, dtype=F64), lambda v: d * v,
                                n_iter=1)
    torch.testing.assert_close(mu, rhs / d, rtol=1e-12, atol=1e-12)


def test_conjugate_gradients_solve_a_p_pixel_system_in_p_iterations():
    # conjugate (not steepest-descent) directions: exact after P steps in exact arithmetic
    A, rhs = spd_system(6, seed=4)
    cover = A.diagonal().expand(2, -1)
    mu = solve_normal_equations(rhs, cover, torch.zeros(2, 6, dtype=F64), lambda v: v @ A,
                                n_iter=6)
    torch.testing.assert_close(mu @ A, rhs, rtol=0, atol=1e-8)


def test_the_default_number_of_cg_iterations_is_ten(members):
    # n_iter defaults to 10 in both solve_normal_equations and solve_centroids
    A, rhs = spd_system(16, seed=5)
    cover, zeros = A.diagonal().expand(2, -1), torch.zeros(2, 16, dtype=F64)
    solved = [solve_normal_equations(rhs, cover, zeros, lambda v: v @ A, **n_iter)
              for n_iter in ({}, {"n_iter": 10}, {"n_iter": 1})]
    torch.testing.assert_close(solved[0], solved[1], rtol=0, atol=0)
    assert not torch.allclose(solved[0], solved[2])
    model, X, params, labels, weights, start = members
    solved = [solve_centroids(X, model, params, labels, start, weights, **n_iter)
              for n_iter in ({}, {"n_iter": 10}, {"n_iter": 1})]
    torch.testing.assert_close(solved[0], solved[1], rtol=0, atol=0)
    assert not torch.allclose(solved[0], solved[2])
