"""The default initialisation of ST K-means, ``init="k-means+merge"``.

Euclidean k-means over-segments the rows into ``2 K`` clusters (:func:`euclidean_kmeans`);
on a random subset of the rows, one warped Lloyd step sharpens the over-segmentation and
its clusters are merged by warped distances between their centroids (:func:`ward_merge`,
:func:`merge_init`). Variants of one shape (slanted and upright digits) so start in one
cluster.

The warped step and the merge use the warp alone, without the model's appearance
transformation (a curriculum: the geometry first, the appearance from the first Lloyd pass
on). With a gain and an offset per pair, the centroid of one over-segment also fits the rows
of a similar class at little cost, and the Ward merge then joins two classes that no later
move separates: on MNIST-5k (5 splits x 3 seeds) one fit of 15 started that way and ended at
0.831 held-out ACC; from the warp-only merge it ends at 0.945, with a lower distortion, and
the other fits move by at most 0.005.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from ._euclidean import EuclideanGeometry
from ._geometry import Assignment
from ._lloyd import best_restart, lloyd, scaled_tol, weighted_mean
from ._seeding import kmeans_plusplus_restarts

__all__ = ["euclidean_kmeans", "merge_init", "ward_merge"]

# Rows the warped steps of the initialisation run on (a random subset when X has more, and
# at least 2 * n_clusters): they only place 2 * n_clusters centroids and merge them. On
# MNIST-5k (4,000 training rows, 5 splits x 3 seeds) 1000 rows instead of 2000 left the
# held-out ACC unchanged and took about a fifth off the fit. The Euclidean
# over-segmentation stays on every row: on the 1000 rows, one of the first 6 of those
# fits started with two classes merged and ended at 0.82 (0.94 from every row).
_INIT_ROWS = 1000


def euclidean_kmeans(X, n_clusters, sample_weight, generator, n_runs=10, max_iter=300,
                     tol=1e-4):
    """Best (lowest inertia) of ``n_runs`` Euclidean k-means runs: (centers, labels).

    k-means++ seeding and the project's Lloyd loop on centred data, the runs batched as
    restarts (``generator`` is consumed run after run); cheap next to one warped assignment.
    ``tol`` is relative, as the estimators' (see :func:`skxclust._lloyd.scaled_tol`).
    """
    mean = weighted_mean(X, sample_weight)
    Xc = X - mean
    tol = scaled_tol(tol, X.shape[0], lambda: Xc.var(dim=0, unbiased=False))
    seeds = kmeans_plusplus_restarts(Xc, n_clusters, sample_weight, [generator] * n_runs)
    best = best_restart(
        lloyd(Xc, seeds, EuclideanGeometry(screen=True), sample_weight, max_iter, tol)
    )
    return best.centers + mean, best.labels


def ward_merge(distances: np.ndarray, weights: np.ndarray, n_clusters: int) -> np.ndarray:
    """Greedily merge clusters down to ``n_clusters`` with a Ward-type criterion.

    The cost of merging groups ``a`` and ``b`` is ``w_a w_b / (w_a + w_b)`` times the
    weight-averaged distance between their members (for squared Euclidean distances between
    single clusters this is the exact increase of the k-means distortion).

    Parameters
    ----------
    distances : ndarray of shape (m, m)
        Symmetric distances between the ``m`` clusters.
    weights : ndarray of shape (m,)
        Total sample weight of each cluster.
    n_clusters : int

    Returns
    -------
    ndarray of shape (m,)
        Index in ``[0, n_clusters)`` of the merged group of each cluster.
    """
    m = distances.shape[0]
    # member[g, i]: weight of cluster i in group g; a tiny floor keeps empty clusters tracked.
    member = np.diag(np.maximum(weights, 1e-12))
    alive = list(range(m))
    while len(alive) > n_clusters:
        w = member[alive].sum(1)
        mix = member[alive] @ distances @ member[alive].T
        mean_d = mix / np.maximum(np.outer(w, w), 1e-300)
        cost = np.outer(w, w) / np.maximum(w[:, None] + w[None, :], 1e-300) * mean_d
        np.fill_diagonal(cost, np.inf)
        a, b = np.unravel_index(np.argmin(cost), cost.shape)
        # the survivor is the lower index, whichever triangle the (symmetric up to
        # rounding) minimum was found in: groups stay numbered by their first cluster
        ga, gb = sorted((alive[a], alive[b]))
        member[ga] += member[gb]
        alive.remove(gb)
    return np.argmax(member[alive] > 0, axis=0)


def merge_init(X: torch.Tensor, sample_weight: torch.Tensor, generator: torch.Generator,
               n_clusters: int, geometry) -> torch.Tensor:
    """The ``"k-means+merge"`` initial centroids (K, D) of one restart.

    Parameters
    ----------
    X : Tensor of shape (n, D)
    sample_weight : Tensor of shape (n,)
    generator : torch.Generator
        Draws the row subset and seeds the Euclidean runs.
    n_clusters : int
    geometry : WarpGeometry
        The estimator's geometry (a fresh one: its runs are made here); its appearance
        transformation is left out here (see the module).

    Returns
    -------
    Tensor of shape (n_clusters, D)
    """
    n_over = min(2 * n_clusters, X.shape[0])
    if n_over == n_clusters:
        return euclidean_kmeans(X, n_clusters, sample_weight, generator)[0]
    centers, _ = euclidean_kmeans(X, n_over, sample_weight, generator)
    geometry = copy.copy(geometry)
    geometry.appearance = None  # the warp alone (see the module)
    # the warped steps run on a random subset of the rows (at least 2K)
    n_rows = max(_INIT_ROWS, n_over)
    if X.shape[0] > n_rows:
        rows = torch.randperm(X.shape[0], generator=generator)[:n_rows].to(X.device)
        X, sample_weight = X[rows], sample_weight[rows]
    # one warped Lloyd step: an assignment, the update, and the assignment to the updated
    # centroids, continued from the first one's warps (see WarpGeometry.for_rows)
    run = geometry.for_rows(X, sample_weight)
    centers, _ = run.update(X, centers, run.assign(X, centers), sample_weight)
    second = run.assign(X, centers)
    weight = torch.zeros(n_over, dtype=X.dtype, device=X.device)
    weight.index_add_(0, second.labels, sample_weight)
    d = geometry.pairwise(centers, centers)
    between = (0.5 * (d + d.T)).cpu().to(torch.float64).numpy()
    group = torch.as_tensor(ward_merge(between, weight.cpu().to(torch.float64).numpy(),
                                       n_clusters), device=X.device)
    # Merged centroid = weighted mean of the merged members (Euclidean update step: it
    # reads no distances: None); a weightless group is relocated as an empty cluster (the
    # row farthest from its first over-segment's centroid, which serves only to measure).
    first = {int(g): i for i, g in reversed(list(enumerate(group.tolist())))}
    fallback = centers[[first[k] for k in range(n_clusters)]]
    merged, _ = EuclideanGeometry(geometry.batch_size).update(
        X, fallback, Assignment(group[second.labels], None), sample_weight  # type: ignore[arg-type]
    )
    return merged
