"""k-means math shared by both estimators: seeding, the one Lloyd loop, geometries.

Both estimators drive :func:`lloyd` with a *geometry* object that knows how to measure
(sample, centroid) distances and how to re-estimate centroids for fixed assignments:

``geometry.assign(X, centers) -> Assignment``
    labels, distance to the assigned centroid, and any per-sample state the update needs.
``geometry.update(X, centers, assignment, sample_weight) -> (new_centers, cluster_weight)``
``geometry.pairwise(X, centers) -> (n, K)`` squared distances.
``geometry.translation_invariant``
    True when distances do not change if X and the centroids are shifted together
    (then the data are centred for numerical accuracy).
``geometry.lloyd_threads(X, centers) -> int | None`` (optional)
    torch intra-op threads for the loop; None (or no such method) keeps torch's setting.

:class:`EuclideanGeometry` is plain k-means; ST K-means plugs in a warping geometry.
"""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple

import torch

from ._threads import serial_threads, torch_threads
from .nn.neuralized import squared_distances

__all__ = ["Assignment", "EuclideanGeometry", "kmeans_plusplus", "lloyd", "row_norms"]


class Assignment(NamedTuple):
    """Result of an assignment (E) step."""

    labels: torch.Tensor  # (n,) long
    distances: torch.Tensor  # (n,) squared distance to the assigned centroid
    state: Any = None  # geometry-specific per-sample data for the update step


def row_norms(X: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean norm of every row, shape (n,), without an (n, D) temporary."""
    return torch.einsum("nd,nd->n", X, X)


class EuclideanGeometry:
    """Squared Euclidean distance; centroids are weighted means (plain k-means).

    The squared row norms of X and whether the sample weights are all one are computed
    once per data tensor and reused by every Lloyd iteration and restart (the cache is
    keyed on the tensor object and its version counter, so in-place changes invalidate it).

    Parameters
    ----------
    batch_size : int
        Rows processed at once; memory is O(batch_size * K).
    """

    translation_invariant = True

    def __init__(self, batch_size: int = 4096):
        self.batch_size = batch_size
        self._cache: dict[str, tuple] = {}

    def lloyd_threads(self, X: torch.Tensor, centers: torch.Tensor) -> int | None:
        """Intra-op threads :func:`lloyd` should use (None: torch's setting)."""
        return serial_threads(X, centers.shape[0])

    def _cached(self, name: str, tensor: torch.Tensor, compute):
        hit = self._cache.get(name)
        if hit is not None and hit[0] is tensor and hit[1] == tensor._version:
            return hit[2]
        value = compute(tensor)
        self._cache[name] = (tensor, tensor._version, value)
        return value

    def pairwise(self, X: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
        """Squared distances, shape (n, K), computed in ``batch_size`` row chunks."""
        return torch.cat(
            [squared_distances(X[i : i + self.batch_size], centers)
             for i in range(0, X.shape[0], self.batch_size)]
        )

    def assign(self, X: torch.Tensor, centers: torch.Tensor) -> Assignment:
        # argmin_k ||x - mu_k||^2 = argmin_k (||mu_k||^2 - 2 x.mu_k): one addmm per chunk,
        # ||x||^2 (cached) is added to the minimum only.
        x_sq = self._cached("row_norms", X, row_norms)
        c_sq = (centers * centers).sum(dim=1)  # tiny: elementwise, no BLAS call
        n = X.shape[0]
        if n <= self.batch_size:  # one chunk: no copies into preallocated outputs
            val, idx = torch.addmm(c_sq, X, centers.T, alpha=-2.0).min(dim=1)
            return Assignment(idx, (val + x_sq).clamp_min_(0.0))
        labels = torch.empty(n, dtype=torch.long, device=X.device)
        dists = torch.empty(n, dtype=X.dtype, device=X.device)
        for i in range(0, n, self.batch_size):
            sl = slice(i, i + self.batch_size)
            partial = torch.addmm(c_sq, X[sl], centers.T, alpha=-2.0)
            val, idx = partial.min(dim=1)
            labels[sl] = idx
            dists[sl] = (val + x_sq[sl]).clamp_min_(0.0)
        return Assignment(labels, dists)

    def update(self, X, centers, assignment, sample_weight):
        n_clusters = centers.shape[0]
        labels = assignment.labels
        weight = torch.zeros(n_clusters, dtype=X.dtype, device=X.device)
        weight.index_add_(0, labels, sample_weight)
        sums = torch.zeros_like(centers)
        if self._cached("unit_weights", sample_weight, lambda w: bool((w == 1).all())):
            sums.index_add_(0, labels, X)
        else:
            for i in range(0, X.shape[0], self.batch_size):
                sl = slice(i, i + self.batch_size)
                sums.index_add_(0, labels[sl], X[sl] * sample_weight[sl, None])
        new = torch.where(weight[:, None] > 0, sums / weight.clamp_min(1e-300)[:, None], centers)
        return new, weight


def kmeans_plusplus(
    X: torch.Tensor,
    n_clusters: int,
    sample_weight: torch.Tensor,
    generator: torch.Generator,
    n_local_trials: int | None = None,
) -> torch.Tensor:
    """Greedy k-means++ seeding (Arthur & Vassilvitskii; sklearn's greedy variant).

    Parameters
    ----------
    X : Tensor of shape (n, D)
    n_clusters : int
    sample_weight : Tensor of shape (n,)
    generator : torch.Generator
        CPU generator; all random draws use it.
    n_local_trials : int, optional
        Candidates tried per centroid; default ``2 + log(n_clusters)``.

    Returns
    -------
    Tensor of shape (n_clusters, D)
    """
    if n_local_trials is None:
        n_local_trials = 2 + int(math.log(n_clusters))
    with torch_threads(serial_threads(X, n_local_trials)):
        return _kmeans_plusplus(X, n_clusters, sample_weight, generator, n_local_trials)


def _kmeans_plusplus(X, n_clusters, sample_weight, generator, n_local_trials):
    """Body of :func:`kmeans_plusplus`, run under its thread setting."""
    n = X.shape[0]
    sw = sample_weight.detach().to("cpu", torch.float64)
    x_sq = row_norms(X)  # once, not per candidate batch

    def dist_to(idx) -> torch.Tensor:
        """Squared distances (len(idx), n) from the rows ``idx`` of X to every row."""
        c = X[idx]
        d = torch.addmm(row_norms(c)[:, None], c, X.T, alpha=-2.0).add_(x_sq)
        return d.clamp_min_(0.0).to("cpu", torch.float64)

    first = int(torch.multinomial(sw / sw.sum(), 1, generator=generator))
    centers = [X[first]]
    closest = dist_to([first])[0]
    potential = float(closest @ sw)
    for _ in range(1, n_clusters):
        cum = torch.cumsum(sw * closest, 0)
        r = torch.rand(n_local_trials, generator=generator, dtype=torch.float64) * potential
        cand = torch.searchsorted(cum, r).clamp_max(n - 1)
        d_cand = torch.minimum(closest[None, :], dist_to(cand.to(X.device)))
        pots = d_cand @ sw
        best = int(pots.argmin())
        closest, potential = d_cand[best], float(pots[best])
        centers.append(X[int(cand[best])])
    return torch.stack(centers)


def lloyd(
    X: torch.Tensor,
    centers: torch.Tensor,
    geometry,
    sample_weight: torch.Tensor,
    max_iter: int,
    tol: float,
    verbose: int = 0,
    history: list | None = None,
) -> tuple[torch.Tensor, float, torch.Tensor, int]:
    """Lloyd iterations with a pluggable geometry (the project's only Lloyd loop).

    Convergence follows scikit-learn: stop when labels do not change (strict) or when the
    total squared centroid shift is ``<= tol`` (``tol`` already scaled by the data variance).
    Empty clusters are relocated to the samples farthest from their centroid.

    Returns
    -------
    labels : LongTensor (n,)
    inertia : float
        Weighted sum of the distances for the returned labels and centroids.
    centers : Tensor (K, D)
    n_iter : int
        Number of iterations run (>= 1).
    """
    hint = getattr(geometry, "lloyd_threads", None)
    with torch_threads(None if hint is None else hint(X, centers)):
        return _lloyd(X, centers, geometry, sample_weight, max_iter, tol, verbose, history)


def _lloyd(X, centers, geometry, sample_weight, max_iter, tol, verbose, history):
    """Body of :func:`lloyd`, run under the geometry's thread setting."""
    t0 = time.perf_counter()
    assignment = geometry.assign(X, centers)
    n_iter = 0
    for it in range(max_iter):
        n_iter = it + 1
        new_centers, weight = geometry.update(X, centers, assignment, sample_weight)
        empty = torch.nonzero(weight == 0).flatten()
        if empty.numel():
            far = torch.argsort(assignment.distances, descending=True)[: empty.numel()]
            new_centers[empty] = X[far]
        shift = float(((new_centers - centers) ** 2).sum())
        centers = new_centers
        labels_old = assignment.labels
        assignment = geometry.assign(X, centers)
        if history is not None or verbose:  # only then: it costs a reduction and a sync
            inertia = float(assignment.distances @ sample_weight)
        if history is not None:
            history.append({"iteration": n_iter, "inertia": inertia, "labels": assignment.labels})
        if verbose:
            print(
                f"Iteration {n_iter}: inertia {inertia:.6g}, centre shift {shift:.3g}, "
                f"{time.perf_counter() - t0:.1f}s"
            )
        if torch.equal(labels_old, assignment.labels):
            if verbose:
                print(f"Converged at iteration {n_iter}: strict convergence.")
            break
        if shift <= tol:
            if verbose:
                print(f"Converged at iteration {n_iter}: shift {shift:.3g} <= tol {tol:.3g}.")
            break
    inertia = float(assignment.distances @ sample_weight)
    return assignment.labels, inertia, centers, max(n_iter, 1)
