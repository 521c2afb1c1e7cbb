"""The fit's statistics (skxclust._plan): evidence sums, the rows they read, beta_."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from skxclust._euclidean import EuclideanGeometry
from skxclust._plan import FitPlan, FitStatistics, evidence_sums, neon_statistics


class NoPass:
    """A geometry that refuses another pass over the rows."""

    def pairwise(self, X, centers):
        raise AssertionError("the distances were given")


def rows_and_centers(seed=0):
    rng = np.random.default_rng(seed)
    X, centers = torch.from_numpy(rng.normal(size=(40, 5))), torch.from_numpy(
        rng.normal(size=(3, 5)))
    return X, centers, EuclideanGeometry().pairwise(X, centers)


def test_evidence_sums_use_the_given_distances_without_another_pass():
    # with the fit's (n, K) distances the statistics read no row again, and agree
    X, centers, distances = rows_and_centers()
    labels = distances.argmin(1)
    given = evidence_sums(X, labels, centers, NoPass(), distances=distances)
    computed = evidence_sums(X, labels, centers, EuclideanGeometry())
    assert given["count"] == computed["count"] == 40
    assert given["evidence"] == pytest.approx(computed["evidence"], rel=1e-12)


def test_evidence_sums_accumulate_float32_evidence_in_float64():
    # f = 2**25 and f = 1: their float32 sum rounds the 1 away, the float64 sum keeps it
    distances = torch.tensor([[0.0, 2.0**25], [0.0, 1.0]], dtype=torch.float32)
    sums = evidence_sums(None, torch.tensor([0, 0]), None, NoPass(), distances=distances)
    assert sums == {"evidence": 2.0**25 + 1.0, "count": 2}


@pytest.mark.parametrize("screened", [False, True])
def test_the_in_memory_fit_runs_with_the_fit_geometry_where_the_plan_has_one(screened):
    # e.g. ExplainableKMeans: a screened Lloyd for fit, the plain geometry elsewhere
    geometry, screen = EuclideanGeometry(), EuclideanGeometry(screen=True)
    plan = FitPlan(geometry, embed=lambda X: X, fit_geometry=screen if screened else None)
    assert plan.lloyd_geometry is (screen if screened else geometry)


def test_statistics_on_a_subset_of_rows_take_their_rows_and_labels_not_the_distances():
    # the rows the statistics name are read with their own labels; the fit's (n, K)
    # distances are for every row, so the subset's are not passed on
    X, centers, distances = rows_and_centers()
    fit = SimpleNamespace(labels=distances.argmin(1), distances=distances, centers=centers)
    seen = FitStatistics(lambda X, labels, centers, geometry, distances=None: {
        "X": X, "labels": labels, "distances": distances}, rows=lambda n: np.array([1, 4, 7]))
    plan = FitPlan(EuclideanGeometry(), embed=lambda X: X, statistics=seen)
    stats = plan.statistics_of(X, fit, plan.geometry)
    torch.testing.assert_close(stats["X"], X[[1, 4, 7]])
    torch.testing.assert_close(stats["labels"], fit.labels[[1, 4, 7]])
    assert stats["distances"] is None
    every_row = FitPlan(EuclideanGeometry(), embed=lambda X: X, statistics=FitStatistics(
        seen.sums)).statistics_of(X, fit, plan.geometry)
    assert every_row["distances"] is distances


def test_a_given_beta_needs_no_evidence_pass():
    # only beta="auto" sums the assigned evidence; a number is the fitted beta_ as it is
    X, centers, distances = rows_and_centers()
    statistics = neon_statistics(0.5, rows=False)
    assert statistics.sums(X, distances.argmin(1), centers, NoPass()) == {}
    assert statistics.attributes({"origin": np.zeros(5)}) == {"beta_": 0.5}
