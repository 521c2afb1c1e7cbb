"""The bookkeeping of the Lloyd loop: tolerance, iteration counts, restarts, history."""

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans as SklearnKMeans

from skxclust import ExplainableKMeans
from skxclust._euclidean import EuclideanGeometry
from skxclust._lloyd import assign_every_row, best_restart, lloyd, restart_fit, scaled_tol

F64 = torch.float64
# four points on a line, two obvious clusters {0, 2} and {10, 12}
LINE = np.array([[0.0], [2.0], [10.0], [12.0]])


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(3)
    centres = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]])
    return torch.from_numpy(np.concatenate([c + rng.normal(size=(20, 2)) for c in centres]))


@pytest.mark.parametrize("n_samples, expected", [(1, 0.0), (2, 2.0 * 1e-3), (50, 2.0 * 1e-3)])
def test_scaled_tol_is_tol_times_the_mean_column_variance_from_two_samples_on(
        n_samples, expected):
    # a single sample has no spread: tolerance 0; from two samples on, tol * mean variance
    assert scaled_tol(1e-3, n_samples, lambda: torch.tensor([1.0, 3.0])) == pytest.approx(
        expected, rel=1e-12, abs=0.0)


@pytest.mark.parametrize("index", [0, 1])
def test_restart_fit_takes_every_field_of_its_own_restart(blobs, index):
    # restart 1 starts with two centroids in one blob: its labels differ from restart 0's
    sw = torch.ones(blobs.shape[0], dtype=F64)
    inits = torch.stack([blobs[[0, 20, 40]], blobs[[0, 1, 40]]])
    runs = lloyd(blobs, inits, EuclideanGeometry(), sw, 1, 0.0)
    assert not torch.equal(runs.labels[0], runs.labels[1])
    fit = restart_fit(runs, index)
    assert torch.equal(fit.labels, runs.labels[index])
    assert torch.equal(fit.centers, runs.centers[index])
    assert fit.inertia == float(runs.inertia[index])
    assert fit.n_iter == int(runs.n_iter[index])


def test_best_restart_keeps_the_labels_of_its_own_centroids(blobs):
    # the better restart comes second: its labels, not the first restart's, are kept
    sw = torch.ones(blobs.shape[0], dtype=F64)
    inits = torch.stack([blobs[[0, 1, 40]], blobs[[0, 20, 40]]])
    best = best_restart(lloyd(blobs, inits, EuclideanGeometry(), sw, 1, 0.0))
    expected = EuclideanGeometry().assign(blobs, best.centers).labels
    assert torch.equal(best.labels, expected)


def test_assign_every_row_reports_the_weighted_inertia(blobs):
    # the inertia of a fit on a subset, once every row is assigned, weighs every row
    sw = torch.from_numpy(np.random.default_rng(0).uniform(0.1, 5.0, blobs.shape[0]))
    on_subset = best_restart(lloyd(blobs[::2], blobs[[0, 20, 40]][None], EuclideanGeometry(),
                                   sw[::2], 10, 0.0))
    fit = assign_every_row(blobs, on_subset, EuclideanGeometry(), sw)
    distances = ((blobs[:, None, :] - fit.centers[None]) ** 2).sum(-1).min(dim=1).values
    assert fit.inertia == pytest.approx(float(distances @ sw), rel=1e-12)
    assert fit.n_iter == on_subset.n_iter


@pytest.mark.parametrize("n_restarts", [2, 3])
def test_history_is_refused_for_more_than_one_restart(blobs, n_restarts):
    # one history list cannot hold the iterations of several restarts
    sw = torch.ones(blobs.shape[0], dtype=F64)
    inits = blobs[:3][None].expand(n_restarts, 3, 2).clone()
    with pytest.raises(ValueError, match="single run"):
        lloyd(blobs, inits, EuclideanGeometry(), sw, 5, 0.0, history=[])


def test_history_numbers_the_iterations_from_one(blobs):
    # one entry per iteration, numbered 1, 2, ... as the verbose lines are
    sw = torch.ones(blobs.shape[0], dtype=F64)
    history = []
    runs = lloyd(blobs, blobs[[0, 1, 2]][None], EuclideanGeometry(), sw, 50, 0.0,
                 history=history)
    assert len(history) >= 2
    assert [h["iteration"] for h in history] == list(range(1, len(history) + 1))
    assert int(runs.n_iter[0]) in (len(history), len(history) + 1)


def test_a_centre_shift_of_exactly_tol_stops_the_fit_at_that_iteration():
    # tol=0 and initial centroids that are already the means: the shift is exactly 0 <= tol,
    # which stops the fit after one iteration (not counted as a strict convergence)
    init = np.array([[1.0], [11.0]])
    ours = ExplainableKMeans(2, init=init, n_init=1, tol=0.0).fit(LINE)
    theirs = SklearnKMeans(2, init=init, n_init=1, tol=0.0).fit(LINE)
    assert ours.n_iter_ == theirs.n_iter_ == 1


@pytest.mark.parametrize("max_iter, expected", [(2, 2), (5, 3)])
def test_strict_convergence_counts_one_more_iteration_but_never_beyond_max_iter(
        max_iter, expected):
    # labels settle at the second update: scikit-learn counts 3 iterations, capped at max_iter
    init = np.array([[0.0], [2.0]])
    ours = ExplainableKMeans(2, init=init, n_init=1, max_iter=max_iter).fit(LINE)
    theirs = SklearnKMeans(2, init=init, n_init=1, max_iter=max_iter).fit(LINE)
    assert ours.n_iter_ == theirs.n_iter_ == expected


class _CarriesPairwise(EuclideanGeometry):
    """Euclidean k-means whose assignment carries the (R, n, K) distances to every
    centroid, as a geometry that computes them anyway does (``Assignment.pairwise``)."""

    def for_rows(self, X, sample_weight):
        return self

    def assign(self, X, centers, rows=None):
        found = super().assign(X, centers, rows)
        return found._replace(pairwise=((X[:, None] - centers[..., None, :, :]) ** 2).sum(-1))


def test_pairwise_receives_each_restarts_distances_when_restarts_stop_at_different_times(
        blobs):
    # restarts 0 and 2 start at their fixed point and stop first, 1 and 3 run on: each
    # restart's entry must hold the distances to its own final centroids
    sw = torch.ones(blobs.shape[0], dtype=F64)
    settled = best_restart(lloyd(blobs, blobs[[0, 20, 40]][None], EuclideanGeometry(), sw,
                                 50, 0.0)).centers
    inits = torch.stack([settled, blobs[[0, 1, 2]], settled, blobs[[3, 4, 5]]])
    pairwise = []
    runs = lloyd(blobs, inits, _CarriesPairwise(), sw, 50, 0.0, pairwise=pairwise)
    assert int(runs.n_iter[0]) < int(runs.n_iter[1])
    for r in range(4):
        expected = ((blobs[:, None] - runs.centers[r][None]) ** 2).sum(-1)
        torch.testing.assert_close(pairwise[r], expected, rtol=1e-12, atol=1e-12)
