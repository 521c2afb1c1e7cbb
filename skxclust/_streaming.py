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
(or pixels) that receive no weight keep their value. The first call seeds the centroids on
its chunk with the estimator's own initialisation, then takes the first step on the same
chunk.
"""

from __future__ import annotations

import numpy as np
import torch

from ._threads import torch_threads
from ._validation import (
    check_magnitude,
    check_sample_weight,
    make_generators,
    resolve_device,
    to_tensor,
)
from .nn.sparse import is_sparse

__all__ = ["init_stream_state", "mini_batch_step", "partial_fit", "running_average"]


def init_stream_state(estimator, labels: torch.Tensor, sample_weight: torch.Tensor) -> None:
    """After ``fit``: counts = the weight of each cluster, ``n_steps_ = 0``.

    A later ``partial_fit`` then continues from the fitted centroids with these counts
    (for ST K-means the per-pixel counts start as the cluster weight on every pixel).
    """
    weight = torch.zeros(estimator.n_clusters, dtype=torch.float64, device=labels.device)
    weight.index_add_(0, labels, sample_weight.to(torch.float64))
    estimator._counts = weight.cpu().numpy()
    estimator.n_steps_ = 0


def running_average(geometry, centers, counts, sums, weight, normal=None):
    """Move the centroids towards their members' statistics (see the module docstring).

    The new centroids minimise the chunk's distortion plus ``counts``-weighted squared
    distance to the old centroids: for plain k-means (no ``normal``) the closed form
    ``(counts mu + sums) / (counts + weight)``; for ST K-means ``geometry.solve_from_sums``
    on ``(A_chunk + diag(counts)) mu = sums + counts mu``, started from that average.

    Parameters
    ----------
    geometry : geometry object
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


def mini_batch_step(geometry, X, centers, counts, sample_weight):
    """Assign the chunk X, reduce it to the geometry's partial sums and move the centroids
    (:func:`running_average`; with the chunk's normal operator when the geometry solves
    least-squares updates). Returns ``(centers, counts)``."""
    assignment = geometry.assign(X, centers)
    sums, weight = geometry.partial_sums(X, centers, assignment, sample_weight)
    normal = None
    if getattr(geometry, "solve_from_sums", None) is not None:
        def normal(v):
            return geometry.normal_sums(v, assignment.labels, assignment.state, sample_weight)
    return running_average(geometry, centers, counts, sums, weight, normal)


def _validated_chunk(estimator, X, sample_weight, first: bool):
    """Validate the chunk (reset the feature checks on the first call): (X, weights)."""
    X = estimator._check_X(X, reset=first)
    if first:
        if X.shape[0] < estimator.n_clusters:
            raise ValueError(
                f"n_samples={X.shape[0]} should be >= n_clusters={estimator.n_clusters} in "
                "the first call of partial_fit (it seeds the centroids)."
            )
        estimator._check_input_geometry(X.shape[1])
    dtype = X.dtype if first else estimator.cluster_centers_.dtype
    return X.astype(dtype, copy=False), check_sample_weight(sample_weight, X.shape[0], dtype)


def _start(estimator, Xt, sample_weight, geometry, first: bool):
    """Centroids and counts for this call, in a frame shifted for accuracy (the chunk's
    weighted mean on the first call, which seeds the centroids on the chunk; the mean
    centroid later). Returns ``(Xt, centers, counts, shift)``, Xt moved into the frame."""
    device = Xt.device
    if not first:
        centers = torch.as_tensor(np.array(estimator.cluster_centers_), device=device)
        if centers.shape[1] != Xt.shape[1]:
            raise ValueError(
                f"X maps to {Xt.shape[1]} features but the centroids have {centers.shape[1]}."
            )
    if geometry.translation_invariant and not is_sparse(Xt):
        shift = (sample_weight @ Xt) / sample_weight.sum() if first else centers.mean(dim=0)
        Xt = Xt - shift
    else:  # no zero-shift copy: Xt may share the caller's memory, nothing writes into it;
        # sparse rows stay uncentred (centring would densify them)
        shift = torch.zeros(Xt.shape[1], dtype=Xt.dtype, device=device)
    check_magnitude(Xt)
    if not first:
        counts = torch.as_tensor(np.array(estimator._counts), device=device)
        return Xt, centers - shift, counts, shift
    dtype = np.float32 if Xt.dtype == torch.float32 else np.float64
    init_array = estimator._validate_init_array(Xt.shape[1], dtype)
    generators = make_generators(estimator.random_state, 1)
    centers = estimator._init_centroids(Xt, sample_weight, generators, init_array, shift)[0]
    counts = torch.zeros(estimator.n_clusters, dtype=torch.float64, device=device)
    return Xt, centers, counts, shift


def partial_fit(estimator, X, sample_weight=None):
    """One mini-batch step of ``estimator`` on the chunk ``X`` (see the module docstring).

    Sets ``cluster_centers_``, ``labels_`` and ``inertia_`` (of the chunk, for the updated
    centroids), ``n_steps_``, the private running counts and whatever the estimator's
    ``_after_partial_fit`` sets (``beta_``, ...). Returns the estimator.
    """
    first = not hasattr(estimator, "cluster_centers_")
    X, sw_np = _validated_chunk(estimator, X, sample_weight, first)
    device = resolve_device(estimator.device)
    sw = torch.from_numpy(sw_np).to(device)
    Xt = estimator._embed(to_tensor(X, device))
    geometry = estimator._make_geometry(X.shape[1])
    Xt, centers, counts, shift = _start(estimator, Xt, sw, geometry, first)
    hint = getattr(geometry, "lloyd_threads", None)
    with torch_threads(None if hint is None else hint(Xt, centers)):
        centers, counts = mini_batch_step(geometry, Xt, centers, counts, sw)
        after = estimator._after_partial_fit(Xt, centers, geometry)
    estimator.cluster_centers_ = (centers + shift).cpu().numpy()
    estimator.labels_ = after.labels.cpu().numpy()
    estimator.inertia_ = float(after.distances.to(torch.float64) @ sw.to(torch.float64))
    estimator._counts = counts.cpu().numpy()
    estimator.n_steps_ = getattr(estimator, "n_steps_", 0) + 1
    return estimator
