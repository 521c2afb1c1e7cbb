"""Empty clusters: scikit-learn's relocation for k-means, and the plain one for ST K-means.

scikit-learn's Lloyd step (``_relocate_empty_clusters_dense`` / ``_sparse`` and
``_average_centers`` in ``sklearn/cluster/_k_means_common.pyx``, 1.9) relocates in the
*sums* of the update, before they are averaged:

1. the empty clusters are those with zero weight; the candidates are the samples farthest
   from the centroid they were just assigned to (``np.argpartition(d, -m)[:-m-1:-1]``,
   taken in that order); nothing moves when every distance is zero;
2. moving sample ``i`` (weight ``w``, label ``old``) into empty cluster ``j`` takes it out
   of ``old``: ``sums[old] -= w x_i``, ``sums[j] = w x_i``, ``weight[j] = w``,
   ``weight[old] -= w``;
3. the centroids are ``sums / weight``; a cluster left without weight takes the centroid
   of the heaviest cluster.

:func:`relocate_in_sums` and :func:`average_sums` do steps 2 and 3,
:func:`farthest_for_empty` the choice of step 1 (the in-memory fit computes the exact
distances only when a cluster is empty). scikit-learn 1.9.1 copies the heaviest cluster's
*sum* instead of its centroid in step 3 when that cluster comes later in the order (its
sum is not averaged yet); here the centroid is copied (only runs where no sample can be
moved, e.g. more clusters than distinct points, are concerned).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["average_sums", "farthest_for_empty", "relocate_empty", "relocate_in_groups",
           "relocate_in_sums"]


def farthest_for_empty(distances: torch.Tensor, n_empty: int) -> torch.Tensor | None:
    """The ``n_empty`` samples farthest from their centroid, in scikit-learn's order.

    Parameters
    ----------
    distances : Tensor of shape (n,)
        Squared distance of every sample to its assigned centroid.
    n_empty : int

    Returns
    -------
    LongTensor of shape (n_empty,) on the CPU, or None when every distance is 0
    (relocating is pointless: more clusters than distinct samples).
    """
    d = distances.detach().cpu().numpy()
    if not d.size or d.max() == 0:
        return None
    n_empty = min(n_empty, d.size)
    far = np.argpartition(d, -n_empty)[: -n_empty - 1 : -1]  # scikit-learn's exact choice
    return torch.from_numpy(far.astype(np.int64))


def relocate_in_sums(sums: torch.Tensor, weight: torch.Tensor, farthest) -> None:
    """Move samples into the empty clusters of every restart, in the sums (in place).

    Parameters
    ----------
    sums : Tensor of shape (R, K, D)
        Weighted sums of the members of each cluster.
    weight : Tensor of shape (R, K)
        Their weights; 0 marks an empty cluster.
    farthest : callable ``farthest(r, m) -> (x (m', D), w (m',), labels (m',)) or None``
        The samples to move in restart ``r`` (their rows, weights and current labels,
        farthest first in scikit-learn's order), None when none can be moved.
    """
    for r in torch.nonzero((weight == 0).any(dim=1)).flatten().tolist():
        empty = torch.nonzero(weight[r] == 0).flatten().tolist()
        moved = farthest(r, len(empty))
        if moved is None:
            continue
        rows, w, labels = moved
        rows = rows.to(sums.device, sums.dtype)
        w = w.to(sums.device, sums.dtype)
        for j, x, wi, old in zip(empty, rows, w, labels.tolist()):
            sums[r, old] -= x * wi
            sums[r, j] = x * wi
            weight[r, j] = wi
            weight[r, old] -= wi


def average_sums(sums: torch.Tensor, weight: torch.Tensor,
                 some_empty: bool = True) -> torch.Tensor:
    """``sums * (1 / weight)`` per cluster (as scikit-learn computes it); a cluster without
    weight takes the centroid of the heaviest cluster of its restart (scikit-learn's rule).

    Parameters
    ----------
    sums : Tensor of shape (R, K, D)
    weight : Tensor of shape (R, K)
    some_empty : bool, default=True
        False when every weight is known to be positive (skips the check).

    Returns
    -------
    Tensor of shape (R, K, D)
    """
    centers = sums * weight.reciprocal()[..., None]
    if not some_empty:
        return centers
    empty = ~(weight > 0)
    if bool(empty.any()):
        heaviest = weight.argmax(dim=1)
        fill = centers[torch.arange(centers.shape[0], device=centers.device), heaviest]
        centers = torch.where(empty[..., None], fill[:, None, :], centers)
    return centers


def relocate_empty(centers, weight, farthest_rows) -> None:
    """Move the centroids without members to the samples farthest from their centroid.

    The plain rule of geometries whose update is not a mean of sums (ST K-means): the
    sample also stays in its own cluster.

    Parameters
    ----------
    centers : Tensor of shape (R, K, D)
        Updated in place.
    weight : Tensor of shape (R, K)
        Weight of each cluster; 0 marks an empty one.
    farthest_rows : callable ``farthest_rows(r, m) -> Tensor (m, D)``
        The ``m`` samples farthest from their centroid in restart ``r``, farthest first.
    """
    for r in torch.nonzero((weight == 0).any(dim=1)).flatten().tolist():
        empty = torch.nonzero(weight[r] == 0).flatten()
        centers[r, empty] = farthest_rows(r, empty.numel()).to(centers.dtype)


def relocate_in_groups(X, centers, weight, distances, row_groups, center_groups) -> None:
    """:func:`relocate_empty` within groups: each empty centroid moves to the rows of its
    own group farthest from their centroid (in a grouped run, see
    :meth:`skxclust._warp_geometry.WarpGeometry.grouped`).

    Parameters
    ----------
    X : Tensor of shape (n, D)
    centers : Tensor of shape (R, K, D)
        Updated in place.
    weight : Tensor of shape (R, K)
        Weight of each cluster; 0 marks an empty one.
    distances : Tensor of shape (R, n)
        Distance of every row to its centroid.
    row_groups : LongTensor of shape (n,)
    center_groups : LongTensor of shape (K,)
    """
    for r, k in torch.nonzero(weight == 0).tolist():
        group = center_groups[k]
        empty = torch.nonzero((weight[r] == 0) & (center_groups == group))[:, 0]
        if int(empty[0]) != k:  # the group's empty centroids are moved at its first
            continue
        own = torch.nonzero(row_groups == group)[:, 0]
        farthest = own[torch.argsort(distances[r, own], descending=True)[:empty.numel()]]
        centers[r, empty[:farthest.numel()]] = X[farthest].to(centers.dtype)
