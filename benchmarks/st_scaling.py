"""Sections of ``bench_st_speed`` about where a fit's time goes and how it grows with N.

- :func:`per_pair_costs`: the cost of one (sample, centroid) warp fit as the estimator
  runs it (``WarpGeometry.pair_warps`` on a chunk of float64 MNIST rows), beside its
  floor on this machine (one ``grid_sample`` forward and backward plus the
  normal-equation GEMM of one full-resolution step, float32), split into the coarse
  level and the full-resolution steps, and with the float64 solve for the ratio.
- :func:`fit_against_kmeans`: the default fit on the 4,000 training rows of a stratified
  4,000 / 1,000 split of MNIST-5k (float64, as users load it), beside scikit-learn's
  ``KMeans(n_init=10)`` on the same rows in the same process; held-out ACC.
- :func:`fit_elastic_20k`: the same 4,000 rows plus 4 elastic copies of each
  (``make_elastic(alpha=1.5, sigma=3.0)``), 20,000 rows: fit time over the 4,000-row
  fit's and ACC on the 1,000 untouched held-out rows.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
from sklearn.cluster import KMeans
from sklearn.model_selection import train_test_split

from skxclust import SpatialTransformerKMeans
from skxclust.datasets import make_elastic
from skxclust.metrics import clustering_accuracy

__all__ = ["described", "fit_against_kmeans", "fit_elastic_20k", "mnist_split",
           "per_pair_costs", "screening_effect"]

N_CLUSTERS = 10
ELASTIC = {"copies": 4, "alpha": 1.5, "sigma": 3.0}


def mnist_split(X, y, n_test: int = 1000, seed: int = 0):
    """Stratified training / held-out rows of MNIST-5k as float64 (``X / 255`` as users
    load images): ``(X_train, X_test, y_train, y_test)``."""
    X = np.asarray(X, dtype=np.float64)
    return train_test_split(X, y, test_size=n_test, stratify=y, random_state=seed)


def described(params: dict | None) -> str:
    """How a benchmark's estimator departs from the defaults, for the JSON."""
    return ", ".join(["defaults, n_clusters=10", *(f"{k}={v}" for k, v in (params or {}).items())])


def _best_of(call, repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls (after one untimed warm-up)."""
    call()
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
    return best


def per_pair_costs(X_train, batch_size: int = 64, repeats: int = 3) -> dict:
    """Seconds per (sample, centroid) pair of the default warp fit, and its floor.

    One torch thread (inside the estimator a chunk's fit runs single-threaded and the
    chunks run in parallel). Centroids: 10 k-means centroids of the first 1000 rows.
    """
    X = torch.as_tensor(X_train[:batch_size])
    km = KMeans(N_CLUSTERS, n_init=1, random_state=0).fit(X_train[:1000])
    centers = torch.as_tensor(km.cluster_centers_)
    n_pairs = batch_size * N_CLUSTERS
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        def cost(**params):
            geometry = SpatialTransformerKMeans(N_CLUSTERS, **params)._make_geometry(784)
            return _best_of(lambda: geometry.pair_warps(X, centers), repeats) / n_pairs

        defaults = SpatialTransformerKMeans().get_params()
        out = {
            "default": cost(),
            "float64_solve": cost(warp_dtype="float64"),
            # the coarse phase alone: affine and coarse steps of every pair, no screening
            "coarse_phase": cost(n_steps=defaults["coarse_steps"], screen_ratio=None),
            "no_coarse_level": cost(coarse_steps=None),
            "no_screening": cost(screen_ratio=None),
        }
        out["floor_one_step"] = _step_floor(X, centers, repeats) / n_pairs
    finally:
        torch.set_num_threads(before)
    out["full_resolution_phase"] = out["default"] - out["coarse_phase"]
    return {
        "seconds_per_pair": out,
        "float64_over_float32": out["float64_solve"] / out["default"],
        "coarse_share": out["coarse_phase"] / out["default"],
        "default_in_floor_steps": out["default"] / out["floor_one_step"],
        "config": {"image": [28, 28], "n_clusters": N_CLUSTERS, "batch_size": batch_size,
                   "input": "float64 MNIST rows, k-means centroids", "torch_threads": 1,
                   "floor": "one full-resolution float32 step: grid_sample forward + "
                            "backward and the normal-equation GEMM (3 slope products "
                            "against the 136 basis products per pixel)"},
    }


def _step_floor(X, centers, repeats: int) -> float:
    """Wall time of the unavoidable work of one full-resolution LM step of every pair of a
    chunk in float32: the warp (grid_sample), its slopes (grid_sample backward) and the
    normal-equation GEMM."""
    n_samples, n_clusters = X.shape[0], centers.shape[0]
    images = centers.float().reshape(n_clusters, 1, 28, 28)
    gen = torch.Generator().manual_seed(0)
    grid = (torch.rand(n_clusters, n_samples * 28, 28, 2, generator=gen) * 2 - 1)
    ones = torch.ones(n_clusters, 1, n_samples * 28, 28)
    slopes = torch.rand(n_clusters * n_samples * 3, 784, generator=gen)
    products = torch.rand(784, 136, generator=gen)

    def step():
        torch.grid_sampler_2d(images, grid, 0, 0, True)
        torch.ops.aten.grid_sampler_2d_backward(ones, images, grid, 0, 0, True,
                                                [False, True])
        slopes @ products

    return _best_of(step, repeats)


def fit_against_kmeans(X_train, y_train, X_test, y_test, seed: int = 0,
                       params: dict | None = None) -> dict:
    """The default ST fit and scikit-learn's KMeans(n_init=10) on the same rows, timed in
    the same process (KMeans before and after ST; the faster of its two runs)."""
    kmeans = []

    def time_kmeans():
        t0 = time.perf_counter()
        KMeans(N_CLUSTERS, n_init=10, random_state=seed).fit(X_train)
        return time.perf_counter() - t0

    kmeans.append(time_kmeans())
    st = SpatialTransformerKMeans(N_CLUSTERS, random_state=seed, **(params or {}))
    t0 = time.perf_counter()
    st.fit(X_train)
    seconds = time.perf_counter() - t0
    kmeans.append(time_kmeans())
    agreement = float(np.mean(st.predict(X_train) == st.labels_))
    screening = screening_effect(st, X_test)
    return {"n_samples": int(X_train.shape[0]), "dtype": str(X_train.dtype),
            "params": described(params), "seconds": seconds,
            "kmeans_seconds": kmeans, "ratio_to_kmeans": seconds / min(kmeans),
            "n_iter": int(st.n_iter_), "heldout_acc": float(
                clustering_accuracy(y_test, st.predict(X_test))),
            "train_acc": float(clustering_accuracy(y_train, st.labels_)),
            "agreement_predict_labels": agreement, "screening": screening}


def screening_effect(st, X) -> dict:
    """How often screening changes ``predict``: the fitted model's labels of X with the
    default screening and without any (``screen_ratio=None``), with float32 warp fits and
    with float64 ones."""
    out = {"n_rows": int(X.shape[0])}
    for dtype in ("float32", "float64"):
        model = copy.deepcopy(st).set_params(warp_dtype=dtype)
        screened = model.predict(X)
        unscreened = model.set_params(screen_ratio=None, n_candidates=None).predict(X)
        out[f"changed_fraction_{dtype}"] = float(np.mean(screened != unscreened))
    return out


def fit_elastic_20k(X_train, X_test, y_test, seconds_4000: float, seed: int = 0,
                    params: dict | None = None) -> dict:
    """The default fit on the training rows plus elastic copies of each; held-out ACC on
    the untouched rows and the fit time over the plain training rows' fit."""
    copies = [make_elastic(X_train, (28, 28), alpha=ELASTIC["alpha"], sigma=ELASTIC["sigma"],
                           random_state=seed + i) for i in range(ELASTIC["copies"])]
    X = np.concatenate([X_train, *copies])
    st = SpatialTransformerKMeans(N_CLUSTERS, random_state=seed, **(params or {}))
    t0 = time.perf_counter()
    st.fit(X)
    seconds = time.perf_counter() - t0
    rows = np.arange(0, X.shape[0], 10)  # predict == labels_ on every tenth row
    return {"n_samples": int(X.shape[0]), "elastic": ELASTIC, "params": described(params),
            "seconds": seconds,
            "ratio_to_4000_row_fit": seconds / seconds_4000, "n_iter": int(st.n_iter_),
            "subsample": st.subsample,
            "heldout_acc": float(clustering_accuracy(y_test, st.predict(X_test))),
            "agreement_predict_labels_every_tenth_row": float(
                np.mean(st.predict(X[rows]) == st.labels_[rows]))}
