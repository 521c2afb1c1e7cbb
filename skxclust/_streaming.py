r"""``partial_fit``: mini-batch k-means steps with the semantics of MiniBatchKMeans.

Each call assigns a chunk of rows to the current centroids, reduces the chunk to the
geometry's sufficient statistics (``geometry.partial_sums``: weighted sums of the members
and their weight) and moves every centroid towards its members by a running average: with
``counts`` the weight a centroid has absorbed so far,

.. math::  \mu \leftarrow \frac{\text{counts}\,\mu + \text{sums}}{\text{counts} + \text{weight}},

i.e. a step of learning rate ``weight / (counts + weight)`` towards the chunk's mean (for
plain k-means exactly scikit-learn's ``MiniBatchKMeans`` update, without its random
reassignment). This is the minimiser of the chunk's distortion plus ``counts`` times the
squared distance to the old centroid. For ST K-means the statistics are per pixel,
``sums = sum_i w_i S_i^T x_i`` and ``weight = sum_i w_i S_i^T 1``, so every pixel has its
own count, and the same minimisation (the chunk's warped least-squares problem plus the
count-weighted old centroid) is solved by the geometry's conjugate gradients started from
the running adjoint-weighted average above (the average alone stays blurred). Centroids
(or pixels) that receive no weight keep their value, bit for bit (:func:`keep_unweighted`
puts back the fitted value that the step in the frame of the centroids' mean would move in
its last bits).

The functions here take tensors and a geometry and return tensors; the estimator's
``partial_fit`` validates the chunk, seeds the centroids on the first chunk with its own
initialisation, calls :func:`mini_batch_step` and writes the fitted attributes.
"""

from __future__ import annotations

import numpy as np
import torch

from ._geometry import Geometry

__all__ = ["cluster_counts", "keep_unweighted", "mini_batch_step", "running_average"]


def cluster_counts(labels: np.ndarray, sample_weight: np.ndarray,
                   n_clusters: int) -> np.ndarray:
    """The weight of each cluster (K,) float64: the counts a ``partial_fit`` after ``fit``
    continues from (for ST K-means the per-pixel counts start as the cluster weight on
    every pixel)."""
    weight = torch.zeros(n_clusters, dtype=torch.float64)
    weight.index_add_(0, torch.as_tensor(labels),
                      torch.as_tensor(sample_weight).to(torch.float64))
    return weight.numpy()


def running_average(geometry, centers, counts, sums, weight, normal=None):
    """Move the centroids towards their members' statistics (see the module docstring).

    The new centroids minimise the chunk's distortion plus ``counts``-weighted squared
    distance to the old centroids: for plain k-means (no ``normal``) the closed form
    ``(counts mu + sums) / (counts + weight)``; for ST K-means ``geometry.solve_from_sums``
    on ``(A_chunk + diag(counts)) mu = sums + counts mu``, started from that average.

    Parameters
    ----------
    geometry : Geometry
        Provides ``centers_from_sums`` (and ``solve_from_sums`` with ``normal``).
    centers : Tensor of shape (K, D)
    counts : Tensor of shape (K,) or (K, D), float64
        Weight absorbed so far, per centroid or per pixel.
    sums, weight : Tensors
        ``geometry.partial_sums`` of the chunk: (K, D) and (K,) or (K, D).
    normal : callable, optional
        The chunk's normal operator ``v -> sum_i w_i S_i^T S_i v`` (ST K-means).

    Returns
    -------
    centers : Tensor of shape (K, D), dtype of ``centers``
    counts : Tensor of the shape of ``weight`` (or of ``counts`` if larger), float64
    """
    per_centroid = counts[:, None] if counts.dim() == 1 else counts
    total = (per_centroid if weight.dim() == 2 else counts) + weight.to(torch.float64)
    c64 = centers.to(torch.float64)
    rhs = per_centroid * c64 + sums.to(torch.float64)
    if normal is None:
        return geometry.centers_from_sums(rhs, total, c64).to(centers.dtype), total
    prior = per_centroid.expand_as(centers).to(centers.dtype)
    new = geometry.solve_from_sums(rhs.to(centers.dtype), total.to(centers.dtype), centers,
                                   lambda v: normal(v) + prior * v)
    return new, total


def mini_batch_step(geometry: Geometry, X: torch.Tensor, centers: torch.Tensor,
                    counts: torch.Tensor, sample_weight: torch.Tensor):
    """Assign the chunk X (n, D), reduce it to the geometry's partial sums and move the
    centroids (K, D) (:func:`running_average`; with the chunk's normal operator when the
    geometry has one, i.e. solves least-squares updates). Returns ``(centers, counts)``."""
    assignment = geometry.assign(X, centers)
    sums, weight = geometry.partial_sums(X, centers, assignment, sample_weight)
    normal = geometry.normal_operator(assignment.labels, assignment.state, sample_weight)
    return running_average(geometry, centers, counts, sums, weight, normal)


def keep_unweighted(new: torch.Tensor, old: torch.Tensor, counts: torch.Tensor,
                    new_counts: torch.Tensor) -> torch.Tensor:
    """The centroids ``new`` (K, D) of a step, with the value ``old`` (K, D) wherever the
    step added no weight (``new_counts`` equal to ``counts``, per centroid (K,) or per
    pixel (K, D)): computed in a shifted frame, their value would come back moved in the
    last bits."""
    n_clusters = counts.shape[0]  # (K,) counts compared as (K, 1): one per centroid
    unweighted = new_counts.reshape(n_clusters, -1) == counts.reshape(n_clusters, -1)
    return torch.where(unweighted, old, new)
