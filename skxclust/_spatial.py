"""SpatialTransformerKMeans: deformation-invariant k-means with thin-plate-spline warps."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils._param_validation import Interval, StrOptions

from ._base import BaseTorchKMeans, empty_output
from ._dask import blockwise
from ._lloyd import Assignment, EuclideanGeometry, lloyd
from ._spatial_explain import WarpExplanationMixin
from ._warp_geometry import WarpGeometry, euclidean_kmeans, resolve_image_shape, ward_merge
from .nn.tps import grid_size_from_landmarks
from .nn.warps import TRANSFORMS

__all__ = ["SpatialTransformerKMeans"]


class SpatialTransformerKMeans(WarpExplanationMixin, BaseTorchKMeans):
    r"""K-means whose distance is measured after warping each centroid onto each sample.

    ST K-means (Cosentino et al., "Spatial Transformer K-Means", 2022) replaces the
    Euclidean distance by

    .. math::  d(x, \mu_k) = \min_\nu\; \lVert x - T(\mu_k, \nu)\rVert^2
               + \lambda(x)\, \lVert \delta(\nu)\rVert^2,

    where :math:`T(\mu, \nu)` warps the centroid image by a thin-plate spline (TPS) with
    ``n_landmarks`` control points on a uniform grid (or an affine map), resampled
    bilinearly, and :math:`\delta(\nu)` is the displacement of the landmarks (in
    normalised coordinates, the image spanning ``[-1, 1]``). The penalty weight
    :math:`\lambda(x) = ` ``warp_penalty`` :math:`\cdot\lVert x - \bar x\rVert^2` scales with
    the contrast of the sample, so the model is invariant to the scale and offset of the data.

    Warps are found by Adam for all (sample, centroid) pairs of a chunk of ``batch_size``
    samples at once; the TPS system is inverted once, so a warp costs one matrix product
    with the landmark offsets. Lloyd iterations assign each sample to the centroid with the
    smallest warped distance, then set each centroid to the image minimising its members'
    distortion for the fixed warps: the least-squares solution of
    :math:`(\sum_i S_i^\top S_i)\,\mu = \sum_i S_i^\top x_i` (:math:`S_i` the resampling
    operator of member :math:`i`'s warp), by ``update_steps`` conjugate-gradient steps
    started from the adjoint-weighted average :math:`\sum_i S_i^\top x_i / \sum_i
    S_i^\top 1` (the members splatted back into the centroid frame). Centroids stay sharp,
    and the distortion does not rise from one iteration to the next.

    The default initialisation over-segments with Euclidean k-means (``2 * n_clusters``
    clusters, best inertia of 10 k-means++ runs), sharpens the over-segmentation by one
    warped Lloyd step, and merges the clusters whose union raises the warped distortion
    least (Ward criterion on warped distances between centroids), so variants of one shape
    (e.g. slanted and upright digits) start in one cluster.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters.
    image_shape : (H, W) or None, default=None
        Shape each row of X is reshaped to (row-major). None: a square image when
        ``n_features`` is a perfect square, otherwise a ``1 x n_features`` signal warped
        along its single axis.
    warp : {"tps", "affine", "affine+tps"}, default="tps"
        Warp family (named ``warp``, not ``transform``, which is the method returning
        distances). ``"affine"`` is the affine-invariant k-means baseline;
        ``"affine+tps"`` optimises the affine part alone for the first half of the steps,
        then affine and TPS together (coarse to fine).
    n_landmarks : int, default=16
        Number of TPS control points, a perfect square ``g * g >= 4`` (a ``g x g`` grid;
        ``g`` knots along a 1-D signal).
    learning_rate : float, default=0.01
        Adam step size for the warp parameters, in normalised coordinates (a 28-pixel
        image spans 2, so one pixel is about 0.074).
    n_steps : int, default=40
        Adam steps per (sample, centroid) pair and assignment. 0 means no warping: plain
        k-means from the same initialisation.
    warp_penalty : float, default=1e-3
        Weight of the squared landmark displacement, relative to the sample's contrast
        energy ``||x - mean(x)||^2``. Larger values allow smaller deformations.
    n_candidates : int or None, default=3
        Screening of assignments: after a quarter of ``n_steps``, only the
        ``n_candidates`` centroids with the lowest loss so far keep being optimised for a
        sample (their trajectories are unchanged); None optimises every pair fully.
        :meth:`transform` always optimises every pair.
    update_steps : int, default=10
        Conjugate-gradient steps of the centroid update; 0 keeps the better of the previous
        centroid and the adjoint-weighted average.
    init : {"k-means+merge", "k-means", "k-means++", "random"} or array-like of shape \
            (n_clusters, n_features), default="k-means+merge"
        "k-means+merge": Euclidean k-means with ``2 * n_clusters`` clusters, one warped
        Lloyd step, then merged by warped distances (see above). "k-means": the best of
        10 Euclidean k-means runs.
        "k-means++" / "random": single samples as seeds. An array: the initial centroids
        (then a single init is run).
    n_init : "auto" or int, default="auto"
        Number of initialisations; the run with the lowest distortion is kept (no labels
        are used). "auto" is 10 for "random" and 1 otherwise.
    max_iter : int, default=20
        Maximum number of Lloyd iterations per init.
    tol : float, default=1e-4
        Relative tolerance on the centroid shift (scaled by the mean feature variance).
    batch_size : int, default=64
        Samples aligned at once with all centroids; memory is
        O(batch_size * n_clusters * n_features).
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="auto"
        Where the computation runs; "auto" uses CUDA when available.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation (through a local ``torch.Generator``).
    verbose : int, default=0
        1: one line per Lloyd iteration (distortion, time). 2: also per alignment pass.
    beta : "auto" or float, default="auto"
        Soft-min stiffness of :meth:`explain` (as in :class:`ExplainableKMeans`). "auto"
        uses ``1 / mean f_c(x)`` over up to 512 evenly spaced training rows (the evidence of
        every row needs a full alignment pass, so the mean is estimated on a subset).

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        Centroid images, flattened.
    labels_ : ndarray of shape (n_samples,)
    inertia_ : float
        Distortion: weighted sum of the (penalised) warped squared distances of the samples
        to their centroid.
    beta_ : float
        The resolved soft-min stiffness used by :meth:`explain`.
    n_iter_ : int
        Lloyd iterations of the kept run.
    image_shape_ : tuple of int
        The resolved (H, W).
    n_steps_ : int
        :meth:`partial_fit` steps since the last :meth:`fit` (0 after ``fit``).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when X has string feature names.

    See Also
    --------
    ExplainableKMeans : k-means with exact explanations (Euclidean distance).
    sklearn.cluster.KMeans : the Euclidean objective.

    Notes
    -----
    Computation runs in the dtype of X: pass float32 images for speed. :meth:`transform`
    returns ``sqrt`` of the penalised warped distances, :meth:`score` minus the distortion,
    so ``GridSearchCV`` over ``n_landmarks`` or ``learning_rate`` works by default. Memory
    is bounded by ``batch_size * n_clusters * n_features``, never ``n_samples * n_clusters
    * n_features``.

    :meth:`partial_fit` streams chunks (the first is seeded by the ``init`` method): each
    step solves the chunk's least-squares centroid problem plus the old centroid weighted
    by per-pixel counts (the accumulated coverage ``sum_i w_i S_i^T 1``), by
    ``update_steps`` conjugate-gradient steps from the running adjoint-weighted average.
    A dask array passed to :meth:`fit` is fitted blockwise, the normal operator of each CG
    step being one more blockwise pass; inference methods return dask arrays for dask
    input. See the user guide, "Scaling out".

    Examples
    --------
    Three rings and three bars at different positions: k-means groups them by position,
    ST K-means by shape.

    >>> import numpy as np
    >>> from skxclust import SpatialTransformerKMeans
    >>> yy, xx = np.mgrid[-1:1:12j, -1:1:12j]
    >>> def ring(dx): return np.exp(-(np.hypot(xx - dx, yy) - 0.5) ** 2 / 0.05).ravel()
    >>> def bar(dx): return (np.exp(-(xx - dx) ** 2 / 0.05) * (abs(yy) < 0.7)).ravel()
    >>> X = np.stack([ring(d) for d in (-0.25, 0, 0.25)] + [bar(d) for d in (-0.25, 0, 0.25)])
    >>> st = SpatialTransformerKMeans(n_clusters=2, n_landmarks=9, random_state=0).fit(X)
    >>> st.labels_
    array([1, 1, 1, 0, 0, 0])
    >>> st.align(X).shape  # every sample in the frame of its centroid
    (6, 144)
    """

    _parameter_constraints: dict = {
        **BaseTorchKMeans._parameter_constraints,
        "image_shape": [None, "array-like"],
        "warp": [StrOptions(set(TRANSFORMS))],
        "n_landmarks": [Interval(Integral, 4, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "n_steps": [Interval(Integral, 0, None, closed="left")],
        "warp_penalty": [Interval(Real, 0, None, closed="left")],
        "affine_penalty": [Interval(Real, 0, None, closed="left")],
        "affine_steps": [Interval(Integral, 0, None, closed="left")],
        "screen_steps": [Interval(Integral, 0, None, closed="left")],
        "n_candidates": [None, Interval(Integral, 1, None, closed="left")],
        "update_steps": [Interval(Integral, 0, None, closed="left")],
        "init": [StrOptions({"k-means+merge", "k-means", "k-means++", "random"}), "array-like"],
        "beta": [StrOptions({"auto"}), Interval(Real, 0, np.inf, closed="both")],
    }

    def __init__(
        self,
        n_clusters=8,
        *,
        image_shape=None,
        warp="tps",
        n_landmarks=16,
        learning_rate=0.01,
        n_steps=10,
        affine_steps=5,
        screen_steps=3,
        warp_penalty=1.0,
        affine_penalty=1.0,
        n_candidates=3,
        update_steps=10,
        init="k-means+merge",
        n_init="auto",
        max_iter=20,
        tol=1e-4,
        batch_size=64,
        device="auto",
        random_state=None,
        verbose=0,
        beta="auto",
    ):
        self.n_clusters = n_clusters
        self.image_shape = image_shape
        self.warp = warp
        self.n_landmarks = n_landmarks
        self.learning_rate = learning_rate
        self.n_steps = n_steps
        self.affine_steps = affine_steps
        self.screen_steps = screen_steps
        self.warp_penalty = warp_penalty
        self.affine_penalty = affine_penalty
        self.n_candidates = n_candidates
        self.update_steps = update_steps
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.batch_size = batch_size
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.beta = beta

    # -- hooks of BaseTorchKMeans ------------------------------------------------------
    def _check_input_geometry(self, n_features: int) -> None:
        resolve_image_shape(self.image_shape, n_features)
        grid_size_from_landmarks(self.n_landmarks)

    def _make_geometry(self, n_features: int) -> WarpGeometry:
        return WarpGeometry(
            resolve_image_shape(self.image_shape, n_features),
            n_landmarks=self.n_landmarks, transform=self.warp, n_steps=self.n_steps,
            learning_rate=self.learning_rate,
            affine_steps=self.affine_steps, screen_steps=self.screen_steps,
            warp_penalty=self.warp_penalty, affine_penalty=self.affine_penalty,
            n_candidates=self.n_candidates, update_steps=self.update_steps,
            batch_size=self.batch_size, verbose=self.verbose,
        )

    def _resolved_n_init(self) -> int:
        if self.n_init == "auto":
            return 10 if (isinstance(self.init, str) and self.init == "random") else 1
        return int(self.n_init)

    def _init_centroids(self, X, sample_weight, generators, init_array, shift):
        if init_array is not None or self.init not in ("k-means", "k-means+merge"):
            return super()._init_centroids(X, sample_weight, generators, init_array, shift)
        return torch.stack([self._kmeans_merge_init(X, sample_weight, g) for g in generators])

    def _kmeans_merge_init(self, X, sample_weight, generator):
        """The "k-means" / "k-means+merge" initial centroids (K, D) of one restart."""
        n_over = self.n_clusters
        if self.init == "k-means+merge":
            n_over = min(2 * self.n_clusters, X.shape[0])
        centers, labels = euclidean_kmeans(X, n_over, sample_weight, generator)
        if n_over == self.n_clusters:
            return centers
        # One warped Lloyd step sharpens the over-segmentation, then its clusters are merged
        # by warped distances between their centroids.
        geometry = self._make_geometry(X.shape[1])
        labels, _, centers, _ = lloyd(X, centers, geometry, sample_weight, max_iter=1, tol=0.0,
                                      desc="SpatialTransformerKMeans init (warped step)")
        weight = torch.zeros(n_over, dtype=X.dtype, device=X.device)
        weight.index_add_(0, labels, sample_weight)
        d = geometry.pairwise(centers, centers)
        d = (0.5 * (d + d.T)).cpu().to(torch.float64).numpy()
        group = torch.as_tensor(ward_merge(d, weight.cpu().to(torch.float64).numpy(),
                                           self.n_clusters), device=X.device)
        # Merged centroid = weighted mean of the merged members (Euclidean update step);
        # a weightless group keeps the centroid of its first over-segment.
        first = {int(g): i for i, g in reversed(list(enumerate(group.tolist())))}
        fallback = centers[[first[k] for k in range(self.n_clusters)]]
        merged, _ = EuclideanGeometry(self.batch_size).update(
            X, fallback, Assignment(group[labels], None), sample_weight
        )
        return merged

    def _after_fit(self, X, labels, centers) -> None:
        self.image_shape_ = resolve_image_shape(self.image_shape, X.shape[1])
        self._fit_statistics(X, centers, self._make_geometry(X.shape[1]))

    def _after_partial_fit(self, X, centers, geometry):
        """One alignment pass of the chunk: its labels, distances and ``beta_`` (from all
        rows of the chunk)."""
        self.image_shape_ = resolve_image_shape(self.image_shape, X.shape[1])
        losses = torch.cat([losses for _, losses, _ in
                            self._warped_evidence_chunks(X, centers, geometry)])
        distances, labels = losses.min(dim=1)
        self._set_fit_statistics(losses, X.shape[1])
        return Assignment(labels, distances)

    def _row_scores(self, geometry, X, centers):
        """Laplace log-evidence of each row (see :meth:`score`)."""
        return geometry.log_evidence(X, centers, self.noise_variance_)

    # -- inspection ----------------------------------------------------------------------
    @blockwise("features")
    def align(self, X):
        """Each sample warped into the frame of its cluster's centroid.

        The optimal warp of the centroid onto the sample is inverted (fixed-point
        iteration) and the sample resampled through it, so aligned members of a cluster
        overlay its centroid; useful for inspection or t-SNE of the residual variation.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            A dask array gives a dask array, computed block by block.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            Same float dtype as X; 0 where the inverse warp leaves the sample.
        """
        Xt, centers, geometry, shift = self._inference_frame(*self._validated_tensor(X))
        out = empty_output(Xt, *Xt.shape)
        for rows, x in self._framed_chunks(Xt, shift):
            out[rows] = geometry.aligned(x, geometry.assign(x, centers)).cpu().numpy()
        return out
