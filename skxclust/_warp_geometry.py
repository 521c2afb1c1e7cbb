"""The warped geometry of ST K-means, for the shared Lloyd loop.

:class:`WarpGeometry` plugs warped distances and the least-squares centroid update into
:func:`skxclust._lloyd.lloyd` (its initialisation is in :mod:`skxclust._merge_init`).
"""

from __future__ import annotations

import copy
import time

import torch

from ._geometry import Assignment, Geometry
from ._noise import NOISE_FLOOR, check_contrast
from ._pair_fit import PairFit
from ._progress import track
from ._relocation import relocate_in_groups
from ._shapes import is_signal
from ._threads import SIGNAL_CHUNK_SCALE, Work, map_jobs
from .nn.appearance import Appearance, intensity_rows, warp_channels
from .nn.centroid_update import adjoint_sums, covered, normal_sums, solve_normal_equations
from .nn.graduated import graduated_fit_warps
from .nn.pair_batch import pair_scale, warp_energy
from .nn.pyramid import coarse_shape
from .nn.warp_evidence import laplace_log_evidence, penalty_scale, row_contrast, warp_log_volume
from .nn.warp_inverse import unwarp_images
from .nn.warp_refit import refit_warps
from .nn.warps import make_warp_model, warp_images

__all__ = ["FIRST_PASS_CANDIDATES", "PairFit", "WarpGeometry"]

# The first assignment of every Lloyd run (the initialisation's warped step, the fit's
# Lloyd iterations, those after each split–merge move; a partial_fit step) fits at most
# this many candidates of a row fully: the lowest-energy ones when screened (after the
# affine and the first full steps), besides ``screen_ratio``. Its centroids have not been
# updated from aligned members yet (the initialisation's are means of unaligned rows, or
# Euclidean k-means centroids): nearly all of them are within the screening ratio of the
# lowest (8.1 of 10 per MNIST row, 9.3 of the initialisation's 20; 2.5 of 10 in the later
# passes), so that pass cost about twice a later fresh one. The pass only seeds the first
# update and the warps the next pass continues from (dropped pairs continue from where
# they were dropped); the run's final assignment fits as predict does (refine). 3,333-row
# MNIST fit: first Lloyd pass 5.8 s instead of 11.5 s, final distortion within 0.05 %.
FIRST_PASS_CANDIDATES = 3


class WarpGeometry(Geometry):
    """Distances and centroid updates of ST K-means, for :func:`skxclust._lloyd.lloyd`.

    ``d(x, mu) = min_v ||x - S_v mu||^2 + c(x) * (warp_penalty * bend(v) + affine_penalty *
    ||a(v)||^2)`` with ``c(x) = ||x - mean(x)||^2`` (the sample's contrast, at least 1 % of
    the centroids' mean contrast: :func:`~skxclust.nn.warp_evidence.penalty_scale`; so the
    objective is invariant to the scale of the data, not to an offset: the warped centroid
    is padded with zeros): the centroid is warped onto the sample (the sample is never
    resampled); the warp is the optimum of this regularised fit (:func:`skxclust.nn.fit_warps`).

    An assignment fits the warps afresh, from the identity (``predict``'s schedule; from
    centroids blurred by ``blur_widths`` pixels to sharp ones, see
    :func:`skxclust.nn.graduated.graduated_fit_warps`). Within one Lloyd run
    (:meth:`for_rows`) the passes after the first continue every pair's warp from the
    previous pass (:func:`skxclust.nn.warp_refit.refit_warps`), and the run's final
    assignment (:meth:`refine`) fits afresh again, so a fit assigns its rows exactly as
    ``predict`` assigns new ones. The first pass of a run fits at most
    :data:`FIRST_PASS_CANDIDATES` candidates of a row fully (see there).

    The update is split into sufficient statistics that add up over row blocks
    (:meth:`partial_sums`: ``sum_i w_i S_i^T x_i`` and the per-pixel weight
    ``sum_i w_i S_i^T 1``), the normal operator (:meth:`normal_sums`) and the solve
    (:meth:`solve_from_sums`), so ``partial_fit`` and the dask fit reuse them.
    """

    translation_invariant = False  # zero padding outside the image: shifts are not free

    def __init__(self, image_shape, *, n_landmarks, transform, n_steps, learning_rate,
                 affine_steps, screen_steps, warp_penalty, affine_penalty, n_candidates,
                 update_steps, batch_size, screen_ratio=None, coarse_steps=None,
                 warp_dtype=None, n_clusters=None, appearance=None, appearance_penalty=1.0,
                 blur_widths=(), noise="constant", verbose=0):
        self.image_shape = image_shape
        self.noise = noise  # "contrast": a row's noise variance scales with c(x)
        self.signal = is_signal(image_shape)  # warped along one axis
        self.n_landmarks = n_landmarks
        self.transform = transform
        self.n_steps = n_steps
        self.learning_rate = learning_rate
        self.affine_steps = affine_steps
        self.screen_steps = screen_steps
        self.warp_penalty = warp_penalty
        self.affine_penalty = affine_penalty
        self.n_candidates = n_candidates
        self.update_steps = update_steps
        self.batch_size = batch_size
        self.n_clusters = n_clusters  # of the model: sets the pairs per chunk (map_chunks)
        self.screen_ratio = screen_ratio
        self.coarse_steps = coarse_steps
        self.blur_widths = tuple(blur_widths)  # a fresh fit's centroid blurs (nn/graduated)
        self.warp_dtype = warp_dtype  # torch dtype of the warp fits; None: that of X
        self.appearance = (None if appearance is None  # fitted per pair (nn/appearance.py)
                           else Appearance(appearance, appearance_penalty))
        self.verbose = verbose
        self._models: dict = {}
        # None outside a Lloyd run; within one (for_rows): "warps" of every pair of the last
        # pass (n, K, n_basis, ndim) (None before it), "as_predicted": whether that pass
        # fitted as predict does (neither continued nor capped)
        self.lloyd_run: dict | None = None
        # grouped() runs: (row groups (n,), centroid groups (K,), most centroids in a group)
        self.groups: tuple[torch.Tensor, torch.Tensor, int] | None = None

    @property
    def warm_steps(self) -> int:
        """Levenberg–Marquardt steps of a pass continued from the previous pass's warps
        (a quarter of ``n_steps``, rounded up)."""
        return -(-self.n_steps // 4)

    def model(self, X: torch.Tensor, shape=None):
        """The warp model for the dtype and device of ``X`` (built once), on the image
        shape or on ``shape`` (the coarse level)."""
        shape = tuple(self.image_shape) if shape is None else shape
        key = (X.dtype, X.device, shape)
        if key not in self._models:
            self._models[key] = make_warp_model(shape, self.n_landmarks, self.transform,
                                                X.dtype, X.device)
        return self._models[key]

    def coarse_model(self, X: torch.Tensor):
        """The warp model of the coarse level (:mod:`skxclust.nn.pyramid`), or None when
        the fits run at full resolution only (``coarse_steps`` None or a small image)."""
        shape = None if self.coarse_steps is None else coarse_shape(tuple(self.image_shape))
        return None if shape is None else self.model(X, shape)

    def use_model_cache(self, cache: dict) -> None:
        """Keep the warp models in ``cache`` (shared by the dask workers' tasks of a fit:
        building one costs 15-40 ms; they are read-only)."""
        self._models = cache

    def pair_warps(self, X: torch.Tensor, centers: torch.Tensor,
                   start: torch.Tensor | None = None, cap: int | None = None,
                   allowed: torch.Tensor | None = None):
        """The regularised warp fits of the rows of one chunk to every centroid.

        Screened as :meth:`assign` screens (``screen_ratio``, ``n_candidates``), so the
        row-wise argmin of the distances is the assigned label.

        Parameters
        ----------
        X : Tensor of shape (B, P)
            A chunk of :meth:`map_chunks` (memory is O(B * K * P)).
        centers : Tensor of shape (K, P)
        start : Tensor of shape (B, K, n_basis, ndim), optional
            Warps to continue from (:attr:`warm_steps` steps at full resolution, see
            :func:`~skxclust.nn.warp_refit.refit_warps`); None: the full (graduated) fit.
        cap : int, optional
            At most this many candidates per row, besides ``n_candidates`` (the first
            pass of a Lloyd run, see :data:`FIRST_PASS_CANDIDATES`).
        allowed : BoolTensor of shape (B, K), optional
            Only these pairs are fitted, the others are at an infinite distance.

        Returns
        -------
        distances : Tensor of shape (B, K)
            Penalised warped squared distances.
        warps : Tensor of shape (B, K, n_basis, ndim)
            The fitted warp parameters of every pair (see :class:`skxclust.nn.WarpModel`).
        """
        row_penalty = penalty_scale(X, centers)
        n_candidates = self.n_candidates
        if cap is not None:
            n_candidates = cap if n_candidates is None else min(cap, n_candidates)
        solve = X.dtype if self.warp_dtype is None else self.warp_dtype
        Xs, Cs, penalty = X, centers, row_penalty
        if solve != X.dtype:  # cast images of magnitude ~1: no overflow or underflow
            scale = pair_scale(X, centers)  # (the fit is scale-invariant, see fit_warps)
            Xs, Cs = (X / scale).to(solve), (centers / scale).to(solve)
            penalty = (row_penalty / (scale * scale)).to(solve)
        if start is None:
            energies, warps = graduated_fit_warps(
                Xs, Cs, self.model(Xs), widths=self.blur_widths, refit_steps=self.warm_steps,
                penalty=penalty,
                bending_weight=self.warp_penalty, affine_weight=self.affine_penalty,
                n_steps=self.n_steps, affine_steps=self.affine_steps,
                n_candidates=n_candidates, screen_ratio=self.screen_ratio,
                screen_steps=self.screen_steps, damping=1e-4 / self.learning_rate,
                coarse=self.coarse_model(Xs), coarse_steps=self.coarse_steps or 0,
                appearance=self.appearance, shift_search=True,  # 1-D only (nn/shift_search)
                allowed=allowed)
        else:
            energies, warps = refit_warps(
                Xs, Cs, self.model(Xs), start, penalty=penalty,
                bending_weight=self.warp_penalty, affine_weight=self.affine_penalty,
                n_steps=self.warm_steps, n_candidates=n_candidates,
                screen_ratio=self.screen_ratio, damping=1e-4 / self.learning_rate,
                appearance=self.appearance, allowed=allowed)
        if solve != X.dtype:  # the distances of the fitted warps, in the dtype of X
            warps = warps.to(X.dtype)
            energies = warp_energy(X, centers, self.model(X), warps, row_penalty,
                                   self.warp_penalty, self.affine_penalty, self.appearance)
        return energies if allowed is None else energies.masked_fill(~allowed, torch.inf), warps

    def effective_centroids(self, X: torch.Tensor, centers: torch.Tensor,
                            warps: torch.Tensor) -> torch.Tensor:
        """Every centroid as fitted onto every row, (B, K, P): warped by ``warps`` (B, K,
        n_basis, ndim), with its optimal appearance coefficients and offset under an
        appearance transformation (for fixed fits, the distance is ``||x - a||^2`` plus
        constants)."""
        if self.appearance is None:
            return warp_images(centers, self.model(X), warps.transpose(0, 1)).transpose(0, 1)
        warped = warp_channels(self.appearance, centers, self.model(X), warps)
        scale = penalty_scale(X, centers)[:, None]
        return self.appearance.transformed(warped, X[:, None], scale)[0]

    def pair_fit(self, X: torch.Tensor, centers: torch.Tensor, labels: torch.Tensor,
                 warps: torch.Tensor) -> PairFit:
        """The :class:`PairFit` of each row ``X`` (n, P) with its centroid ``labels`` under
        its warp ``warps`` (n, n_basis, ndim): the appearance coefficients and offset are
        refitted (closed form: the values the warp fit ended with)."""
        if self.appearance is None:
            return PairFit(warps)
        warped = warp_channels(self.appearance, centers[labels], self.model(X), warps[None])[0]
        coef, offset = self.appearance.fit(warped, X, penalty_scale(X, centers))
        return PairFit(warps, coef, offset)

    def member_rows(self, X: torch.Tensor, centers: torch.Tensor, assignment: Assignment,
                    sample_weight: torch.Tensor):
        """The rows and weights the centroid update sees for the fits of ``assignment``:
        ``X`` and ``sample_weight``, or under an appearance transformation ``(x - o -
        sum_j u_j S b_j(mu)) / g`` and ``w g^2`` (the channels ``b_j`` of the centroids
        ``centers`` being updated; :func:`~skxclust.nn.appearance.intensity_rows`)."""
        fit = assignment.state
        if self.appearance is None or fit.coef is None or fit.offset is None:
            return X, sample_weight
        offset = fit.offset
        if fit.coef.shape[1] > 1:  # the other channels' share, held at these centroids
            warped = warp_channels(self.appearance, centers[assignment.labels], self.model(X),
                                   fit.warps[None])[0]
            offset = offset[:, None] + (fit.coef[:, 1:, None] * warped[:, 1:]).sum(1)
        return intensity_rows(X, fit.coef[:, 0], offset, sample_weight)

    def pass_work(self, X: torch.Tensor, centers: torch.Tensor) -> Work:
        """(row, centroid, pixel) terms of a chunk of a pass (K, D or R, K, D centers)."""
        return self._chunk_work(X, centers.shape[-2])

    def _chunk_work(self, X: torch.Tensor, n_centers: int) -> Work:
        rows = min(self._chunk_rows(n_centers), X.shape[0])
        return Work("warp", rows * n_centers * X.shape[1], X.device)

    def _chunk_rows(self, n_centers: int | None) -> int:
        """Rows per chunk: ``batch_size * n_clusters`` pairs (see :meth:`map_chunks`)."""
        rows = self.batch_size * (SIGNAL_CHUNK_SCALE if self.signal else 1)
        if n_centers is None or self.n_clusters is None:
            return rows
        if self.groups is not None:  # a row meets its group's centroids only
            n_centers = min(n_centers, self.groups[2])
        return max(1, rows * self.n_clusters // max(n_centers, 1))

    def map_chunks(self, fn, X: torch.Tensor, *, desc: str, n_centers: int | None = None
                   ) -> list:
        """``[fn(rows) for rows in chunks]``, the chunks of rows spread over threads.

        A chunk holds ``batch_size`` rows (1-D signals: ``SIGNAL_CHUNK_SCALE`` times that,
        see :mod:`skxclust._threads`) when the rows are fitted against ``n_clusters``
        centroids, as many more or fewer as keeps ``rows * n_centers`` pairs (memory stays
        O(batch_size * n_clusters * P); the split–merge moves' two-centroid fits then share
        the fixed cost of a call among 5x more rows), and as many without ``n_centers``.

        The chunks are independent jobs of :func:`skxclust._threads.map_jobs`: on the CPU
        they run in ``torch.get_num_threads()`` Python threads, each chunk on one torch
        thread, unless a chunk is too small for threads (:meth:`pass_work`; its
        ``(row, centroid, pixel)`` terms count ``n_centers``, default ``n_clusters``,
        centroids per row); on a GPU one after the other. Every chunk runs single-threaded
        whatever the thread count, so the results do not depend on it.
        """
        step, n = self._chunk_rows(n_centers), X.shape[0]
        chunks = [slice(i, min(i + step, n)) for i in range(0, n, step)]
        sizes = [c.stop - c.start for c in chunks]

        def build_models():  # up front, not in the concurrent chunks
            for dtype in {X.dtype, self.warp_dtype or X.dtype}:
                model = self.model(X.new_empty(0, dtype=dtype))
                self.coarse_model(model.basis)

        return map_jobs(fn, chunks, X.device, setup=build_models, name="skxclust-warp",
                        work=self._chunk_work(X, n_centers or self.n_clusters or 1),
                        track=lambda items: track(items, desc=desc, unit="rows",
                                                  sizes=sizes, verbose=self.verbose))

    def pairwise(self, X: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
        """Deformation-invariant squared distances, shape (n, K).

        The same fits as :meth:`assign` (screening included; grouped, infinite to other
        groups' centroids), so the row-wise argmin is the assigned label; with screening,
        the distances to centroids dropped from a sample's candidates are the full-resolution
        energies of the warps reached when they were dropped (upper bounds of the optimum).
        """
        return torch.cat(self.map_chunks(
            lambda rows: self.pair_warps(X[rows], centers, allowed=self._allowed(rows))[0],
            X, desc="SpatialTransformerKMeans: aligning", n_centers=centers.shape[0]))

    def for_rows(self, X: torch.Tensor, sample_weight: torch.Tensor) -> WarpGeometry:
        """This geometry for the passes of one Lloyd run over the rows X, and no others.

        Its first :meth:`assign` fits afresh (at most :data:`FIRST_PASS_CANDIDATES`
        candidates per row); each later one continues every (row, centroid) pair from the
        warp of the previous pass (:attr:`warm_steps` steps, see
        :func:`~skxclust.nn.warp_refit.refit_warps`), which costs about a sixth of a fresh
        pass; it keeps those warps, (n, K, n_basis, ndim), between passes. Its
        :meth:`refine` then assigns afresh. The warp models are shared with this geometry.
        """
        run = copy.copy(self)  # shares the model cache (read-only models)
        run.lloyd_run = {"warps": None, "as_predicted": True}
        return run

    def grouped(self, row_groups: torch.Tensor,
                center_groups: torch.Tensor) -> WarpGeometry | None:
        """This geometry for groups of rows (n,) and centroids (K,) fitted in shared chunks,
        a row to its group's centroids only (a Lloyd run is one run per group). 1-D signals
        only (else None): their small per-group fits cost what a call costs, not images'."""
        if not self.signal:
            return None
        grouped = copy.copy(self)
        grouped.groups = (row_groups, center_groups, int(torch.bincount(center_groups).max()))
        return grouped

    def _allowed(self, rows) -> torch.Tensor | None:
        """The pairs (rows, K) fitted: in a grouped geometry a row's group's; None: all."""
        return None if self.groups is None else self.groups[0][rows, None] == self.groups[1]

    def relocate(self, X, centers, weight, assignment) -> None:
        """:meth:`Geometry.relocate`; in a grouped run within each group."""
        if self.groups is None:
            return super().relocate(X, centers, weight, assignment)
        relocate_in_groups(X, centers, weight, assignment.distances, *self.groups[:2])

    def refine(self, X: torch.Tensor, centers: torch.Tensor,
               assignment: Assignment) -> Assignment:
        """The final assignment of a Lloyd run: ``assignment`` when its pass fitted as
        ``predict`` does, else (continued or capped) a fresh :meth:`assign` outside the
        run (labels and distances as ``predict`` gives them)."""
        if self.lloyd_run is None or self.lloyd_run["as_predicted"]:
            return assignment
        return self._fresh().assign(X, centers)

    def _fresh(self) -> WarpGeometry:
        """This geometry outside any Lloyd run (every assignment from the identity)."""
        fresh = copy.copy(self)
        fresh.lloyd_run = None
        return fresh

    def assign(self, X: torch.Tensor, centers: torch.Tensor) -> Assignment:
        """Labels, distances and the warp of every sample to its assigned centroid.

        Fitted afresh, or within a Lloyd run (:meth:`for_rows`) continued from the warps
        of the run's previous pass; a run's first pass fits at most
        :data:`FIRST_PASS_CANDIDATES` candidates per row fully."""
        t0 = time.perf_counter()
        n, n_centers = X.shape[0], centers.shape[0]
        labels = torch.empty(n, dtype=torch.long, device=X.device)
        dists = torch.empty(n, dtype=X.dtype, device=X.device)
        distances = X.new_empty(n, n_centers)
        run = self.lloyd_run
        start = None if run is None else run["warps"]
        if start is not None and start.shape[:2] != (n, n_centers):
            start = None  # other rows or centroids: nothing to continue from
        cap = None  # the candidates of a run's first pass, where fewer than predict's
        if run is not None and start is None and FIRST_PASS_CANDIDATES < min(
                n_centers, self.n_candidates or n_centers):
            cap = FIRST_PASS_CANDIDATES
        model = self.model(X)
        kept = None if run is None else X.new_empty(n, n_centers, model.n_basis, model.ndim)

        def chunk(rows):  # each chunk writes its own rows and returns its warps
            losses, warps = self.pair_warps(X[rows], centers, None if start is None else
                                            start[rows], cap, self._allowed(rows))
            distances[rows] = losses
            dists[rows], labels[rows] = losses.min(dim=1)
            if kept is not None:
                kept[rows] = warps
            own = warps[torch.arange(warps.shape[0], device=X.device), labels[rows]]
            return self.pair_fit(X[rows], centers, labels[rows], own)

        # (the warp model is built in map_chunks, with the threads of the pass)
        fits = self.map_chunks(chunk, X, desc="SpatialTransformerKMeans: aligning",
                               n_centers=n_centers)
        if run is not None:
            run["warps"] = kept
            run["as_predicted"] = start is None and cap is None
        state = PairFit.concat(fits) if fits else PairFit(
            X.new_empty(0, model.n_basis, model.ndim))
        if self.verbose >= 2:
            print(f"  aligned {n} samples x {n_centers} centroids in "
                  f"{time.perf_counter() - t0:.1f}s")
        # the (n, K) distances go along: moves and statistics need not align again
        return Assignment(labels, dists, state, distances)

    def noise_scale(self, X: torch.Tensor, centers: torch.Tensor) -> torch.Tensor | None:
        """Each row's pixel-noise variance scale (n,) float64: None with "constant" noise; with
        "contrast" its contrast, at least NOISE_FLOOR of the centroids' (constant rows refused)."""
        if self.noise == "constant":
            return None
        x = X.to(torch.float64)
        check_contrast(row_contrast(x))
        return penalty_scale(x, centers.to(torch.float64), floor=NOISE_FLOOR)

    def log_evidence(self, X: torch.Tensor, centers: torch.Tensor,
                     noise_variance: float | None = None) -> torch.Tensor:
        """Laplace log-evidence of each row under its nearest warped centroid, (n,) float64.

        :func:`~skxclust.nn.warp_evidence.laplace_log_evidence` of the minimised energy
        (the distance), the rows' :meth:`noise_scale` and the Occam volume of their warps
        (:func:`~skxclust.nn.warp_evidence.warp_log_volume`: a warp family that lowers the
        energy only by fitting noise pays for it there); ``noise_variance`` None: its
        maximum-likelihood value on these rows.
        """
        assignment = self.assign(X, centers)
        model = self.model(X)

        def chunk(rows):  # O(chunk) memory: the rows' contrast here, not for all of X
            x = X[rows]
            return warp_log_volume(x, centers[assignment.labels[rows]], model,
                                   assignment.state.warps[rows], penalty_scale(x, centers),
                                   self.warp_penalty, self.affine_penalty, self.appearance)

        volume = torch.cat(self.map_chunks(chunk, X, desc="SpatialTransformerKMeans: evidence"))
        return laplace_log_evidence(assignment.distances, volume, X.shape[1], noise_variance,
                                    self.noise_scale(X, centers))

    # -- sufficient statistics, for the streaming and blockwise fits ---------------------
    def partial_sums(self, X, centers, assignment, sample_weight):
        """Per-pixel sufficient statistics of the members of every centroid.

        Returns
        -------
        sums : Tensor of shape (K, P)
            ``sum_i w_i S_i^T x_i``: the members splatted into the centroid frame.
        weight : Tensor of shape (K, P)
            ``sum_i w_i S_i^T 1``: per-pixel weight (coverage). Both add up over disjoint
            row blocks; their ratio is the adjoint-weighted average.
        """
        rows, weight = self.member_rows(X, centers, assignment, sample_weight)
        return adjoint_sums(rows, self.model(X), assignment.state.warps, assignment.labels,
                            centers.shape[-2], weight, batch_size=self.batch_size)

    @staticmethod
    def centers_from_sums(sums, weight, centers):
        """Adjoint-weighted average ``sums / weight``; pixels without coverage (below 1e-6
        of the centroid's largest) keep their value in ``centers``."""
        return torch.where(covered(weight), sums / weight.clamp_min(1e-300), centers)

    def normal_operator(self, labels, state, sample_weight):
        """``v -> normal_sums(v, labels, state, sample_weight)``: the update is a
        least-squares solve (:meth:`solve_from_sums`)."""
        return lambda v: self.normal_sums(v, labels, state, sample_weight)

    def normal_sums(self, centers, labels, state: PairFit, sample_weight):
        """``sum_{i in k} w_i g_i^2 S_i^T S_i mu_k`` (K, P) for the fits ``state`` (n rows;
        ``g_i`` = 1 without an appearance transformation)."""
        weight = sample_weight if state.coef is None else sample_weight * state.coef[:, 0] ** 2
        return normal_sums(centers, self.model(centers), state.warps, labels, weight,
                           batch_size=self.batch_size)

    def solve_from_sums(self, sums, weight, centers, normal):
        """The least-squares centroids for fixed warps from :meth:`partial_sums`, by
        ``update_steps`` CG steps with the operator ``normal`` (see solve_centroids).

        ``sums``, ``weight`` and ``centers`` may carry leading restart axes (..., K, P);
        ``normal`` then receives and returns that shape too.
        """
        shape = centers.shape
        flat = shape[-1]

        def normal_flat(v):
            return normal(v.reshape(shape)).reshape(-1, flat)

        mu = solve_normal_equations(sums.reshape(-1, flat), weight.reshape(-1, flat),
                                    centers.reshape(-1, flat), normal_flat, self.update_steps)
        return mu.reshape(shape)

    def update(self, X, centers, assignment, sample_weight):
        """Centroids minimising the distortion for the fixed warps (see solve_centroids);
        run within the Lloyd loop's threads."""
        sums, cover = self.partial_sums(X, centers, assignment, sample_weight)
        new = self.solve_from_sums(sums, cover, centers, lambda v: self.normal_sums(
            v, assignment.labels, assignment.state, sample_weight))
        weight = torch.zeros(centers.shape[0], dtype=X.dtype, device=X.device)
        weight.index_add_(0, assignment.labels, sample_weight)
        return new, weight

    def aligned(self, X: torch.Tensor, centers: torch.Tensor,
                assignment: Assignment) -> torch.Tensor:
        """Each sample resampled into the frame of its centroid, shape (n, P) (under an
        appearance transformation, the sample with the fitted transformation undone, as
        the centroid update sees it)."""
        model = self.model(X)

        def chunk(rows):
            x, _ = self.member_rows(X[rows], centers, Assignment(
                assignment.labels[rows], assignment.distances[rows], assignment.state[rows]),
                X.new_ones(rows.stop - rows.start))
            return unwarp_images(x, model, assignment.state.warps[rows])

        return torch.cat(self.map_chunks(chunk, X, desc="SpatialTransformerKMeans: aligning"))
