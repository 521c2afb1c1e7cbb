"""SpatialTransformerKMeans: deformation-invariant k-means with thin-plate-spline warps."""

from __future__ import annotations

import math
import time
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils._param_validation import Interval, StrOptions

from ._base import Assignment, BaseTorchKMeans, EuclideanGeometry, kmeans_plusplus, lloyd
from ._threads import torch_threads
from .nn.align import optimize_pairs, optimize_warps, solve_centroids
from .nn.tps import grid_size_from_landmarks
from .nn.warps import TRANSFORMS, make_warp_model, unwarp_images

__all__ = ["SpatialTransformerKMeans"]


def resolve_image_shape(image_shape, n_features: int) -> tuple[int, int]:
    """The (H, W) the rows of X are reshaped to; raises ValueError naming ``image_shape``.

    None gives a square image when ``n_features`` is a perfect square and a ``1 x n``
    signal otherwise.
    """
    if image_shape is None:
        side = math.isqrt(n_features)
        return (side, side) if side * side == n_features else (1, n_features)
    shape = tuple(np.asarray(image_shape).tolist()) if not isinstance(image_shape, tuple) \
        else image_shape
    ok = len(shape) == 2 and all(
        isinstance(s, (Integral, np.integer)) and not isinstance(s, bool) and s >= 1
        for s in shape
    )
    if not ok:
        raise ValueError(
            f"image_shape={image_shape!r} must be None or a pair (H, W) of positive ints."
        )
    height, width = int(shape[0]), int(shape[1])
    if height * width != n_features:
        raise ValueError(
            f"image_shape={image_shape!r} holds {height * width} pixels but X has "
            f"n_features={n_features}; H * W must equal n_features."
        )
    return height, width


def euclidean_kmeans(X, n_clusters, sample_weight, generator, n_runs=10, max_iter=300):
    """Best (lowest inertia) of ``n_runs`` Euclidean k-means runs: (centers, labels).

    k-means++ seeding and the project's Lloyd loop on centred data; cheap next to one
    warped assignment.
    """
    mean = (sample_weight @ X) / sample_weight.sum()
    Xc = X - mean
    tol = 1e-4 * float(Xc.var(dim=0, unbiased=False).mean()) if X.shape[0] > 1 else 0.0
    geometry = EuclideanGeometry()
    best = None
    for _ in range(n_runs):
        seeds = kmeans_plusplus(Xc, n_clusters, sample_weight, generator)
        labels, inertia, centers, _ = lloyd(Xc, seeds, geometry, sample_weight, max_iter, tol)
        if best is None or inertia < best[0]:
            best = (inertia, centers, labels)
    return best[1] + mean, best[2]


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
        ga, gb = alive[a], alive[b]
        member[ga] += member[gb]
        alive.remove(gb)
    return np.argmax(member[alive] > 0, axis=0)


class WarpGeometry:
    """Distances and centroid updates of ST K-means, for :func:`skxclust._base.lloyd`.

    ``d(x, mu) = min_warp ||x - S mu||^2 + penalty(x) * ||landmark displacement||^2``:
    the centroid is warped onto the sample (the sample is never resampled). The penalty
    weight of a sample is ``warp_penalty * ||x - mean(x)||^2`` (its contrast energy), so
    the objective is invariant to the scale and offset of the data.

    Within one fit the geometry remembers the warp of each sample to its assigned
    centroid; the next assignment re-evaluates it against the moved centroid and keeps it
    when it beats the fresh optimisation. Since the update minimises the distortion for
    fixed warps, this keeps the distortion from rising between Lloyd iterations.
    """

    translation_invariant = False  # zero padding outside the image: shifts are not free
    # Below this many (sample, centroid, pixel) terms per chunk, each of the ~100 small ops
    # of an Adam step costs more in thread barriers than it gains from a second thread.
    serial_below = 2**17

    def __init__(self, image_shape, *, n_landmarks, transform, n_steps, learning_rate,
                 warp_penalty, n_candidates, update_steps, batch_size, verbose=0):
        self.image_shape = image_shape
        self.n_landmarks = n_landmarks
        self.transform = transform
        self.n_steps = n_steps
        self.learning_rate = learning_rate
        self.warp_penalty = warp_penalty
        self.n_candidates = n_candidates
        self.update_steps = update_steps
        self.batch_size = batch_size
        self.verbose = verbose
        self._models: dict = {}
        self._memory = None  # (X, X._version, labels, params) of the last assignment

    def model(self, X: torch.Tensor):
        """The warp model for the dtype and device of ``X`` (built once)."""
        key = (X.dtype, X.device)
        if key not in self._models:
            self._models[key] = make_warp_model(
                self.image_shape, self.n_landmarks, self.transform, X.dtype, X.device
            )
        return self._models[key]

    def _penalty(self, Xc: torch.Tensor) -> torch.Tensor:
        centred = Xc - Xc.mean(dim=1, keepdim=True)
        return self.warp_penalty * (centred * centred).sum(dim=1)

    def _optimize(self, Xc, centers, screen: bool):
        coarse = self.n_steps // 2 if self.transform == "affine+tps" else 0
        return optimize_warps(
            Xc, centers, self.model(Xc), n_steps=self.n_steps,
            learning_rate=self.learning_rate, penalty=self._penalty(Xc), coarse_steps=coarse,
            n_candidates=self.n_candidates if screen else None,
            screen_steps=max(1, self.n_steps // 4),
        )

    def lloyd_threads(self, X: torch.Tensor, centers: torch.Tensor) -> int | None:
        """Intra-op threads for this data: 1 for small chunks on the CPU, else unchanged."""
        terms = min(self.batch_size, X.shape[0]) * centers.shape[0] * X.shape[1]
        return 1 if X.device.type == "cpu" and terms < self.serial_below else None

    def _chunks(self, n: int):
        return [slice(i, min(i + self.batch_size, n)) for i in range(0, n, self.batch_size)]

    def pairwise(self, X: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
        """Deformation-invariant squared distances, shape (n, K)."""
        chunks = self._chunks(X.shape[0])
        with torch_threads(self.lloyd_threads(X, centers)):
            return torch.cat([self._optimize(X[sl], centers, screen=False)[0] for sl in chunks])

    def _remembered(self, X):
        mem = self._memory
        if mem is not None and mem[0] is X and mem[1] == X._version:
            return mem[2], mem[3]
        return None

    def assign(self, X: torch.Tensor, centers: torch.Tensor) -> Assignment:
        """Labels, distances and the warp of every sample to its assigned centroid."""
        with torch_threads(self.lloyd_threads(X, centers)):
            return self._assign(X, centers)

    def _assign(self, X: torch.Tensor, centers: torch.Tensor) -> Assignment:
        t0 = time.perf_counter()
        n = X.shape[0]
        model = self.model(X)
        previous = self._remembered(X)
        labels = torch.empty(n, dtype=torch.long, device=X.device)
        dists = torch.empty(n, dtype=X.dtype, device=X.device)
        params = X.new_empty(n, model.n_basis, model.ndim)
        for sl in self._chunks(n):
            losses, warps = self._optimize(X[sl], centers, screen=True)
            if previous is not None:
                self._keep_previous(X[sl], centers, losses, warps, previous[0][sl],
                                    previous[1][sl])
            dists[sl], labels[sl] = losses.min(dim=1)
            params[sl] = warps[torch.arange(warps.shape[0], device=X.device), labels[sl]]
        self._memory = (X, X._version, labels, params)
        if self.verbose >= 2:
            print(f"  aligned {n} samples x {centers.shape[0]} centroids "
                  f"in {time.perf_counter() - t0:.1f}s")
        return Assignment(labels, dists, params)

    def _keep_previous(self, Xc, centers, losses, warps, prev_labels, prev_params):
        """Where the remembered warp beats the fresh one for the same centroid, keep it."""
        old, _ = optimize_pairs(Xc, centers[prev_labels], self.model(Xc), n_steps=0,
                                penalty=self._penalty(Xc), init=prev_params)
        rows = torch.arange(Xc.shape[0], device=Xc.device)
        better = old < losses[rows, prev_labels]
        losses[rows[better], prev_labels[better]] = old[better]
        warps[rows[better], prev_labels[better]] = prev_params[better].to(warps.dtype)

    def update(self, X, centers, assignment, sample_weight):
        """Centroids minimising the distortion for the fixed warps (see solve_centroids)."""
        new = solve_centroids(X, self.model(X), assignment.state, assignment.labels, centers,
                              sample_weight, n_iter=self.update_steps,
                              batch_size=self.batch_size)
        weight = torch.zeros(centers.shape[0], dtype=X.dtype, device=X.device)
        weight.index_add_(0, assignment.labels, sample_weight)
        return new, weight

    def aligned(self, X: torch.Tensor, assignment: Assignment) -> torch.Tensor:
        """Each sample resampled into the frame of its centroid, shape (n, P)."""
        model = self.model(X)
        with torch_threads(self.lloyd_threads(X, X[:1])):
            return torch.cat([unwarp_images(X[sl], model, assignment.state[sl])
                              for sl in self._chunks(X.shape[0])])


class SpatialTransformerKMeans(BaseTorchKMeans):
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
    clusters, best inertia of 10 k-means++ runs) and merges the clusters whose union raises
    the warped distortion least (Ward criterion on warped distances between centroids), so
    variants of one shape (e.g. slanted and upright digits) start in one cluster.

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
        "k-means+merge": Euclidean k-means with ``2 * n_clusters`` clusters, merged by
        warped distances (see above). "k-means": the best of 10 Euclidean k-means runs.
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

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        Centroid images, flattened.
    labels_ : ndarray of shape (n_samples,)
    inertia_ : float
        Distortion: weighted sum of the (penalised) warped squared distances of the samples
        to their centroid.
    n_iter_ : int
        Lloyd iterations of the kept run.
    image_shape_ : tuple of int
        The resolved (H, W).
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
        "n_candidates": [None, Interval(Integral, 1, None, closed="left")],
        "update_steps": [Interval(Integral, 0, None, closed="left")],
        "init": [StrOptions({"k-means+merge", "k-means", "k-means++", "random"}), "array-like"],
    }

    def __init__(
        self,
        n_clusters=8,
        *,
        image_shape=None,
        warp="tps",
        n_landmarks=16,
        learning_rate=0.01,
        n_steps=40,
        warp_penalty=1e-3,
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
    ):
        self.n_clusters = n_clusters
        self.image_shape = image_shape
        self.warp = warp
        self.n_landmarks = n_landmarks
        self.learning_rate = learning_rate
        self.n_steps = n_steps
        self.warp_penalty = warp_penalty
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

    # -- hooks of BaseTorchKMeans ------------------------------------------------------
    def _check_input_geometry(self, n_features: int) -> None:
        resolve_image_shape(self.image_shape, n_features)
        grid_size_from_landmarks(self.n_landmarks)

    def _make_geometry(self, n_features: int) -> WarpGeometry:
        return WarpGeometry(
            resolve_image_shape(self.image_shape, n_features),
            n_landmarks=self.n_landmarks, transform=self.warp, n_steps=self.n_steps,
            learning_rate=self.learning_rate, warp_penalty=self.warp_penalty,
            n_candidates=self.n_candidates, update_steps=self.update_steps,
            batch_size=self.batch_size, verbose=self.verbose,
        )

    def _resolved_n_init(self) -> int:
        if self.n_init == "auto":
            return 10 if (isinstance(self.init, str) and self.init == "random") else 1
        return int(self.n_init)

    def _init_centroids(self, X, sample_weight, generator, init_array, shift):
        if init_array is not None or self.init not in ("k-means", "k-means+merge"):
            return super()._init_centroids(X, sample_weight, generator, init_array, shift)
        n_over = self.n_clusters
        if self.init == "k-means+merge":
            n_over = min(2 * self.n_clusters, X.shape[0])
        centers, labels = euclidean_kmeans(X, n_over, sample_weight, generator)
        if n_over == self.n_clusters:
            return centers
        # Merge the over-segmentation by warped distances between its centroids.
        d = self._make_geometry(X.shape[1]).pairwise(centers, centers)
        d = (0.5 * (d + d.T)).cpu().to(torch.float64).numpy()
        weight = torch.zeros(n_over, dtype=X.dtype, device=X.device)
        weight.index_add_(0, labels, sample_weight)
        group = torch.as_tensor(ward_merge(d, weight.cpu().to(torch.float64).numpy(),
                                           self.n_clusters), device=X.device)
        merged = group[labels]
        sums = torch.zeros(self.n_clusters, X.shape[1], dtype=X.dtype, device=X.device)
        sums.index_add_(0, merged, X * sample_weight[:, None])
        total = torch.zeros(self.n_clusters, dtype=X.dtype, device=X.device)
        total.index_add_(0, merged, sample_weight)
        fallback = torch.zeros_like(sums).index_copy_(0, group, centers)  # any member
        return torch.where(total[:, None] > 0, sums / total.clamp_min(1e-300)[:, None], fallback)

    def _after_fit(self, X, labels, centers) -> None:
        self.image_shape_ = resolve_image_shape(self.image_shape, X.shape[1])

    # -- inspection ----------------------------------------------------------------------
    def align(self, X):
        """Each sample warped into the frame of its cluster's centroid.

        The optimal warp of the centroid onto the sample is inverted (fixed-point
        iteration) and the sample resampled through it, so aligned members of a cluster
        overlay its centroid; useful for inspection or t-SNE of the residual variation.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            Same float dtype as X; 0 where the inverse warp leaves the sample.
        """
        Xt, centers, geometry = self._prepare(X)
        assignment = geometry.assign(Xt, centers)
        return geometry.aligned(Xt, assignment).cpu().numpy()
