"""partial_fit steps checked against their closed form: counts, weights, learning rate."""

import copy

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs

from skxclust import ExplainableKMeans
from skxclust._streaming import keep_unweighted, running_average
from skxclust.nn.centroid_update import solve_normal_equations

# tiny problems run faster on one thread (see conftest.one_torch_thread)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def blobs(n, seed):
    X, _ = make_blobs(n, 5, centers=3, cluster_std=2.0, random_state=seed)
    return X


def expected_step(centers, counts, chunk, labels, weight):
    """``(counts mu + sums) / (counts + weight)`` per cluster (the MiniBatchKMeans step)."""
    new = centers.copy()
    for k in range(centers.shape[0]):
        members = labels == k
        total = counts[k] + weight[members].sum()
        if total > 0:
            new[k] = (counts[k] * centers[k] + weight[members] @ chunk[members]) / total
    return new


@pytest.mark.parametrize("weighted", [False, True])
def test_partial_fit_after_fit_continues_from_the_fitted_cluster_weights(weighted):
    # the counts a partial_fit continues from are the (weighted) cluster sizes of fit
    X, chunk = blobs(90, 0), blobs(30, 1) + 1.0
    rng = np.random.default_rng(0)
    w = rng.uniform(0.2, 3.0, 90) if weighted else np.ones(90)
    est = ExplainableKMeans(3, random_state=0, n_init=1).fit(X, sample_weight=w)
    centers = est.cluster_centers_.copy()
    counts = np.bincount(est.labels_, weights=w, minlength=3)
    labels = est.predict(chunk)
    est.partial_fit(chunk)
    np.testing.assert_allclose(
        est.cluster_centers_, expected_step(centers, counts, chunk, labels, np.ones(30)),
        rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n_chunks", [1, 2, 3])
def test_centroid_without_members_keeps_its_value_in_partial_fit(n_chunks):
    # a centroid no row of any chunk is assigned to (zero count, zero weight) stays put,
    # bit for bit: each chunk steps in the frame of its own mean (3 chunks of 20 rows
    # moved it in the last bits before the step put the fitted value back)
    X = blobs(60, 2)
    init = np.vstack([X[:2], X.mean(0) + 100.0])
    est = ExplainableKMeans(3, init=init)
    for rows in np.array_split(np.arange(60), n_chunks):
        est.partial_fit(X[rows])
    assert not np.any(est.predict(X) == 2)
    np.testing.assert_array_equal(est.cluster_centers_[2], init[2])


class ConjugateGradients:
    """The solve of a least-squares geometry (as ``WarpGeometry.solve_from_sums``): a few
    preconditioned CG steps on the normal equations, from the better of the given start
    and the average ``sums / weight``."""

    def solve_from_sums(self, sums, weight, centers, normal):
        return solve_normal_equations(sums, weight, centers, normal, n_iter=2)


@pytest.mark.parametrize("per_pixel", [False, True])
def test_least_squares_running_average_solves_the_count_weighted_system(per_pixel):
    # (A + diag(counts)) mu = sums + counts mu_old with A = diag(a) (identity warps, so the
    # cover is a): exact; pixels without counts or cover keep their value; counts add up
    rng = np.random.default_rng(0)
    K, D = 3, 12
    a = rng.uniform(0.5, 3.0, (K, D))
    a[0, :4] = 0.0
    counts = rng.uniform(0.5, 5.0, (K, D)) if per_pixel else np.array([0.0, 2.5, 4.0])
    if per_pixel:
        counts[0, :4] = 0.0
    centers, targets = rng.normal(size=(K, D)), rng.normal(size=(K, D))
    sums = a * targets
    c = counts if per_pixel else counts[:, None]
    total = c + a
    expected = np.where(total > 0, (c * centers + sums) / np.where(total > 0, total, 1.0),
                        centers)
    weight = torch.from_numpy(a)
    new, new_counts = running_average(
        ConjugateGradients(), torch.from_numpy(centers), torch.from_numpy(counts),
        torch.from_numpy(sums), weight, lambda v: weight * v)
    np.testing.assert_allclose(new.numpy(), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(new.numpy()[0, :4], centers[0, :4])
    np.testing.assert_allclose(new_counts.numpy(), total, rtol=1e-14)


@pytest.mark.parametrize("per_pixel", [False, True])
def test_step_puts_back_the_old_value_where_it_added_no_weight(per_pixel):
    old, new = torch.zeros(3, 4), torch.ones(3, 4)
    counts = torch.tensor([1.0, 0.0, 2.0])
    if per_pixel:  # counts per pixel: only the pixels whose count moved take the new value
        counts = counts[:, None].repeat(1, 4)
        new_counts = counts.clone()
        new_counts[0, 1] += 0.5
        expected = torch.zeros(3, 4)
        expected[0, 1] = 1.0
    else:  # counts per centroid (K,) against per-pixel counts after a ST step
        new_counts = torch.tensor([1.0, 0.5, 2.0])[:, None].expand(3, 4)
        expected = torch.zeros(3, 4)
        expected[1] = 1.0
    assert torch.equal(keep_unweighted(new, old, counts, new_counts), expected)


def test_partial_fit_inertia_weighs_the_chunk_rows():
    # inertia_ of a step is the weighted distortion of its chunk after the step
    X = blobs(40, 3)
    est = ExplainableKMeans(3, random_state=0).fit(X)
    weights = np.r_[np.full(10, 3.0), np.ones(10)]
    stepped = copy.deepcopy(est).partial_fit(X[:20], sample_weight=weights)
    distances = stepped.transform(X[:20]).min(1) ** 2
    assert stepped.inertia_ == pytest.approx(weights @ distances, rel=1e-12)
