"""Shared k-means plumbing: seeding, the one Lloyd loop, and the sklearn base estimator.

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

import contextlib
import copy
import math
import time
import warnings
from numbers import Integral, Real
from typing import Any, NamedTuple

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ._threads import serial_threads, torch_threads
from ._validation import (
    check_magnitude,
    check_sample_weight,
    make_generators,
    resolve_device,
    to_tensor,
)
from .nn.neuralized import squared_distances

__all__ = ["Assignment", "EuclideanGeometry", "kmeans_plusplus", "lloyd", "BaseTorchKMeans"]


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


def inference_threads(X: torch.Tensor, n_clusters: int):
    """Thread setting for one inference pass of X against the centroids (see _threads)."""
    return torch_threads(serial_threads(X, n_clusters))


@contextlib.contextmanager
def restore_on_error(estimator):
    """Put ``estimator.__dict__`` back as it was if the body raises."""
    saved = copy.copy(estimator.__dict__)
    try:
        yield
    except BaseException:
        estimator.__dict__.clear()
        estimator.__dict__.update(saved)
        raise


class BaseTorchKMeans(TransformerMixin, ClusterMixin, BaseEstimator):
    """Common parameters, ``fit`` and inference of the torch k-means estimators.

    Subclasses provide ``_make_geometry(n_features, X)`` and may extend ``_after_fit``.
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"k-means++", "random"}), "array-like"],
        "n_init": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # -- hooks -----------------------------------------------------------------------
    def _make_geometry(self, n_features: int):  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_input_geometry(self, n_features: int) -> None:
        """Raise if the data shape does not suit the estimator (e.g. image_shape)."""

    def _after_fit(self, X: torch.Tensor, labels: torch.Tensor, centers: torch.Tensor) -> None:
        """Compute extra fitted attributes; X and centers are in the fit's frame."""

    def _embed(self, X: torch.Tensor) -> torch.Tensor:
        """Map validated input rows to the space that is clustered (identity here)."""
        return X

    # -- fit -------------------------------------------------------------------------
    def _resolved_n_init(self) -> int:
        if self.n_init == "auto":
            return 1 if (isinstance(self.init, str) and self.init == "k-means++") else 10
        return int(self.n_init)

    def _validate_init_array(self, n_features: int, dtype) -> np.ndarray | None:
        if isinstance(self.init, str):
            return None
        init = np.array(self.init, dtype=dtype, copy=True)
        if init.shape != (self.n_clusters, n_features):
            raise ValueError(
                f"init array must have shape (n_clusters, n_features) = "
                f"({self.n_clusters}, {n_features}), got {init.shape}."
            )
        if not np.all(np.isfinite(init)):
            raise ValueError("init array contains NaN or infinity.")
        return init

    def _init_centroids(self, X, sample_weight, generator, init_array, shift):
        if init_array is not None:
            return torch.as_tensor(init_array, dtype=X.dtype, device=X.device) - shift
        if self.init == "k-means++":
            return kmeans_plusplus(X, self.n_clusters, sample_weight, generator)
        sw = sample_weight.detach().to("cpu", torch.float64)
        idx = torch.multinomial(
            sw / sw.sum(), self.n_clusters, replacement=False, generator=generator
        )
        return X[idx.to(X.device)].clone()

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Compute the clustering.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data. Sparse input is refused; int data are converted to float64.
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights (not all zero).

        Returns
        -------
        self : object
            Fitted estimator.
        """
        with restore_on_error(self):
            X = validate_data(self, X, dtype=[np.float64, np.float32], order="C")
            n_samples, n_features = X.shape
            if n_samples < self.n_clusters:
                raise ValueError(
                    f"n_samples={n_samples} should be >= n_clusters={self.n_clusters}."
                )
            self._check_input_geometry(n_features)
            device = resolve_device(self.device)
            sw_np = check_sample_weight(sample_weight, n_samples, X.dtype)
            Xt = self._embed(to_tensor(X, device))
            init_array = self._validate_init_array(Xt.shape[1], X.dtype)
            n_init = self._resolved_n_init()
            if init_array is not None and n_init != 1:
                if self.n_init != "auto":
                    warnings.warn(
                        f"Explicit initial centroids passed: running 1 init instead of "
                        f"n_init={self.n_init}.", RuntimeWarning, stacklevel=2,
                    )
                n_init = 1

            sw = torch.from_numpy(sw_np).to(device)
            geometry = self._make_geometry(n_features)
            if geometry.translation_invariant:
                shift = (sw @ Xt) / sw.sum()
            else:
                shift = torch.zeros(Xt.shape[1], dtype=Xt.dtype, device=device)
            Xt = Xt - shift
            check_magnitude(Xt)
            tol = float(Xt.var(dim=0, unbiased=False).mean()) * self.tol if n_samples > 1 else 0.0

            best = None
            for i, gen in enumerate(make_generators(self.random_state, n_init)):
                centers = self._init_centroids(Xt, sw, gen, init_array, shift)
                if self.verbose:
                    print(f"Initialization {i + 1}/{n_init} complete")
                labels, inertia, centers, n_iter = lloyd(
                    Xt, centers, geometry, sw, self.max_iter, tol, self.verbose
                )
                if best is None or inertia < best[1]:
                    best = (labels, inertia, centers, n_iter)
            labels, inertia, centers, n_iter = best

            n_distinct = int(torch.unique(labels).numel())
            if n_distinct < self.n_clusters:
                warnings.warn(
                    f"Number of distinct clusters ({n_distinct}) found smaller than "
                    f"n_clusters ({self.n_clusters}). Possibly due to duplicate points in X.",
                    ConvergenceWarning, stacklevel=2,
                )
            self.cluster_centers_ = (centers + shift).cpu().numpy()
            self.labels_ = labels.cpu().numpy()
            self.inertia_ = float(inertia)
            self.n_iter_ = int(n_iter)
            self._after_fit(Xt, labels, centers)
        return self

    # -- inference -------------------------------------------------------------------
    def _validated_tensor(self, X) -> torch.Tensor:
        """Check fitted, validate X for inference and copy it to the device."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], order="C", reset=False)
        return to_tensor(X, resolve_device(self.device))

    def _frame(self, raw: torch.Tensor):
        """Embed validated rows; return (X, centers, geometry), shifted together into a
        frame where the geometry is numerically accurate when it is shift invariant."""
        Xt = self._embed(raw)
        centers = torch.as_tensor(self.cluster_centers_, device=raw.device).to(Xt.dtype)
        geometry = self._make_geometry(raw.shape[1])
        if geometry.translation_invariant:
            shift = centers.mean(dim=0)
            Xt, centers = Xt - shift, centers - shift
        check_magnitude(Xt)
        return Xt, centers, geometry

    def _prepare(self, X):
        """Validate X for inference; return (X tensor, centers tensor, geometry)."""
        return self._frame(self._validated_tensor(X))

    def predict(self, X):
        """Index of the closest cluster for each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        raw = self._validated_tensor(X)
        with inference_threads(raw, self.n_clusters):
            Xt, centers, geometry = self._frame(raw)
            return geometry.assign(Xt, centers).labels.cpu().numpy()

    def fit_predict(self, X, y=None, sample_weight=None):
        """Fit and return ``labels_``. See :meth:`fit`."""
        return self.fit(X, sample_weight=sample_weight).labels_

    def transform(self, X):
        """Distances to every centroid (not squared, like :class:`sklearn.cluster.KMeans`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_clusters), same float dtype as X.
        """
        raw = self._validated_tensor(X)
        with inference_threads(raw, self.n_clusters):
            Xt, centers, geometry = self._frame(raw)
            return geometry.pairwise(Xt, centers).sqrt().cpu().numpy()

    def fit_transform(self, X, y=None, sample_weight=None):
        """Fit, then return :meth:`transform` of X."""
        return self.fit(X, sample_weight=sample_weight).transform(X)

    def score(self, X, y=None, sample_weight=None):
        """Opposite of the distortion (inertia) of X: higher is better.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        float
        """
        Xt, centers, geometry = self._prepare(X)
        sw = torch.from_numpy(check_sample_weight(sample_weight, Xt.shape[0], np.float64))
        d = geometry.assign(Xt, centers).distances.cpu().to(torch.float64)
        return -float(d @ sw)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
