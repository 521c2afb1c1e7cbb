"""GridSearchCV with n_jobs > 1: torch threads per joblib worker do not oversubscribe."""

import os

import numpy as np
import pytest
import torch
from joblib import parallel_config
from sklearn.model_selection import GridSearchCV

from skxclust import ExplainableKMeans, SpatialTransformerKMeans

N_JOBS = 2


class ThreadRecordingExplainable(ExplainableKMeans):
    """Remembers how many torch threads its fit ran with (read back by a scorer)."""

    def fit(self, X, y=None, sample_weight=None):
        super().fit(X, y, sample_weight)
        self.fit_threads_ = torch.get_num_threads()
        return self


class ThreadRecordingST(SpatialTransformerKMeans):
    """Remembers how many torch threads its fit ran with (read back by a scorer)."""

    def fit(self, X, y=None, sample_weight=None):
        super().fit(X, y, sample_weight)
        self.fit_threads_ = torch.get_num_threads()
        return self


def fit_threads(estimator, X, y=None):
    """Scorer: the torch thread count recorded in the worker that fitted ``estimator``."""
    return estimator.fit_threads_


CASES = {
    "explainable": (ThreadRecordingExplainable(n_clusters=2, random_state=0, device="cpu"),
                    {"n_clusters": [2, 3]}),
    "st": (ThreadRecordingST(n_clusters=2, n_steps=2, max_iter=2, n_landmarks=4,
                             init="k-means++", random_state=0, device="cpu"),
           {"learning_rate": [0.01, 0.05]}),
}


def per_worker_cap(n_jobs: int) -> int:
    """What joblib's loky backend allows each worker: cpu_count // n_jobs (at least 1), or
    a larger OMP_NUM_THREADS / MKL_NUM_THREADS that the parent set (passed on as is)."""
    explicit = [int(os.environ[v]) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
                if os.environ.get(v)]
    return max([max(1, (os.cpu_count() or 1) // n_jobs), *explicit])


def data(kind: str) -> np.ndarray:
    """60 rows around three centres, 16 features (a 4 x 4 image for ST K-means)."""
    rng = np.random.default_rng(0)
    centres = rng.random((3, 16)) * 4
    return (centres[rng.integers(0, 3, 60)] + 0.1 * rng.standard_normal((60, 16)))


@pytest.mark.slow  # starting two loky workers (torch imports) takes 10-30 s on 2 cores
@pytest.mark.parametrize("kind", sorted(CASES))
def test_gridsearch_loky_workers_run_torch_with_their_share_of_the_cpus(kind):
    estimator, grid = CASES[kind]
    search = GridSearchCV(estimator, grid, cv=2, n_jobs=N_JOBS,
                          scoring={"score": lambda est, X, y=None: est.score(X),
                                   "threads": fit_threads}, refit="score")
    with parallel_config(backend="loky"):
        search.fit(data(kind))
    threads = search.cv_results_["mean_test_threads"]
    assert np.all(threads <= per_worker_cap(N_JOBS)), threads
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert hasattr(search.best_estimator_, "cluster_centers_")


@pytest.mark.parametrize("kind", sorted(CASES))
def test_gridsearch_threading_backend_leaves_torch_threads_as_found(kind):
    # Threads share one process: the estimators' per-call thread holds must not leak out.
    estimator, grid = CASES[kind]
    before = torch.get_num_threads()
    with parallel_config(backend="threading"):
        GridSearchCV(estimator, grid, cv=2, n_jobs=N_JOBS).fit(data(kind))
    assert torch.get_num_threads() == before
