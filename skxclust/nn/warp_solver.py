r"""Regularised warp fits of (sample, centroid) pairs, solved by Levenberg–Marquardt.

Pure torch; no scikit-learn import. Shapes: ``B`` samples of a chunk, ``K`` centroids,
``P = H * W`` pixels, ``n_params = n_basis * D`` parameters per warp (see
:mod:`skxclust.nn.warps`).

For a sample :math:`x` and a centroid :math:`\mu` the warp is the minimiser of

.. math::  E(v) = \lVert x - S_v \mu\rVert^2 + \lambda\, v^\top G\, v,

where :math:`S_v` resamples the centroid through the warp with parameters ``v`` and ``G``
is the warp's penalty matrix (:attr:`WarpModel.penalty_gram
<skxclust.nn.warps.WarpModel>`: TPS bending energy plus a separate affine term). Every
pair is a small non-linear least-squares problem (``n_params`` unknowns: 32 for 16 TPS
landmarks), so each is solved by damped Gauss–Newton steps (Levenberg–Marquardt) rather
than by a first-order method: with :math:`J` the Jacobian of :math:`S_v\mu` in ``v`` and
:math:`r = S_v\mu - x`, a step solves

.. math::  (J^\top J + \lambda G + \nu\,\mathrm{diag}(J^\top J + \lambda G))\,\Delta
           = -(J^\top r + \lambda G v),

and is kept only where it lowers :math:`E` (the damping :math:`\nu` of that pair then
shrinks; otherwise it grows and the pair stays). :math:`E` therefore never rises, and a
few tens of steps reach the optimum to the precision that matters for the assignment.
All pairs of a chunk share every operation: one GEMM builds the grids, one
``grid_sampler`` call warps every centroid, one batched matrix product forms every
:math:`J^\top J` (:class:`~skxclust.nn.pair_batch.PairBatch`), one batched Cholesky
solve gives every step. :class:`PairLevel` holds the pairs of a chunk at one resolution
and runs the steps on all of them or on the screened candidates; :func:`fit_warps`
(from the identity) and :func:`~skxclust.nn.warp_refit.refit_warps` (from given warps)
are two schedules of those steps.

The first ``affine_steps`` steps move only the affine part of the warp (coarse to fine):
the global pose is found before the local bending, which keeps the fit out of the poor
local minima that bilinear interpolation creates.
"""

from __future__ import annotations

import torch

from ._checks import check_pair_args
from .appearance import Appearance
from .monotone import monotone_steps
from .pair_batch import (
    Coordinates,
    PairBatch,
    coordinates,
    pair_images,
    pair_scale,
    per_pair_weight,
)
from .pyramid import downsample_images
from .shift_search import off_the_knots, shift_start
from .warps import WarpModel

__all__ = ["PairLevel", "allowed_pairs", "fit_warps", "levenberg_marquardt", "restricted",
           "screen_pairs", "screening"]


def _damped_steps(hess, grad, damping):
    """Solve ``(A + nu diag(A)) step = -b`` per pair (Cholesky, with a jitter fallback)."""
    diag = torch.diagonal(hess, dim1=-2, dim2=-1)
    scale = diag.mean(-1, keepdim=True).clamp_min(torch.finfo(diag.dtype).tiny)
    floor = 1e-9 * scale  # keeps flat directions (no image gradient, no penalty) solvable
    system = hess.clone()
    system.diagonal(dim1=-2, dim2=-1).add_(damping[:, None] * diag + floor)
    factor, info = torch.linalg.cholesky_ex(system)
    bad = info > 0
    if bool(bad.any()):
        jitter = torch.diag_embed((1e-6 * scale[bad]).expand(-1, diag.shape[1]))
        factor[bad] = torch.linalg.cholesky_ex(system[bad] + jitter)[0]
    return -torch.cholesky_solve(grad[..., None], factor)[..., 0]


def levenberg_marquardt(pairs: PairBatch, flat, steps: int, coords: Coordinates, damping):
    """``steps`` LM iterations on every warp of ``pairs`` from ``flat`` (N, n_params) with
    the per-warp damping ``damping`` (N,).

    Returns the final energies (N,), parameters (N, n_params) and damping (N,).

    A rejected step leaves a warp where it was, so its normal system is kept and only the
    warps that moved get a new one (about half of them late in a fit).
    """
    # coef: appearance coefficients or None; sampled: the grids (and warped channels) the
    # normal system at the same warps reuses
    energy, residual, coef, sampled = pairs.evaluate(flat)
    if steps > 0:
        hess, grad = pairs.normal_system(flat, residual, coords, coef, sampled)
    for step_index in range(steps):
        step = _damped_steps(hess, grad, damping)
        if coords.lift is not None:
            step = step @ coords.lift.T
        if pairs.model.ndim == 1:  # a signal's warp keeps time order (nn/monotone.py)
            step = monotone_steps(pairs.model, flat, step)
        trial = flat + step
        trial_energy, trial_residual, trial_coef, sampled = pairs.evaluate(trial)
        better = trial_energy < energy
        flat = torch.where(better[:, None], trial, flat)
        energy = torch.where(better, trial_energy, energy)
        kept = better.reshape(residual.shape[0], -1, 1)
        residual = torch.where(kept, trial_residual, residual)
        if coef is not None:
            coef = torch.where(kept, trial_coef, coef)
        damping = torch.where(better, damping * 0.3, damping * 10.0).clamp(1e-7, 1e7)
        if step_index + 1 == steps:
            break
        moved = torch.nonzero(better)[:, 0]
        if moved.numel() == better.numel():
            hess, grad = pairs.normal_system(flat, residual, coords, coef, sampled)
        elif moved.numel():  # the trial's samples are those of the warps that moved
            hess[moved], grad[moved] = pairs.select(moved).normal_system(
                flat[moved], residual.reshape(better.numel(), -1)[moved], coords,
                None if coef is None else coef.reshape(better.numel(), 1, -1)[moved],
                pairs.select_sampled(moved, sampled))
    return energy, flat, damping


class PairLevel:
    """Every (centroid, sample) pair of a chunk at one resolution, and the steps that fit
    their warps.

    The images are scaled by ``scale`` (see :func:`~skxclust.nn.pair_batch.pair_scale`)
    and ``weight`` is the per-pair penalty (K * B,), image-major, scaled to the images and
    to the level. Warps are flat parameters (K * B, n_params) in the same image-major
    order. Build one with :meth:`scaled`; :meth:`coarser` is the same pairs on
    downsampled images, :meth:`steps` fits all the pairs or a subset, and
    :meth:`per_sample` turns flat results back into the caller's scale and layout.
    """

    def __init__(self, model: WarpModel, samples, centroids, weight, gram, scale,
                 appearance: Appearance | None = None):
        self.model = model
        self.appearance = appearance
        self.samples = samples  # (B, P_level)
        self.images = pair_images(centroids, model, appearance)  # (K, C, H, W)
        self.weight = weight
        self.gram = gram
        self.scale = scale
        self.full = coordinates(model, affine=False)
        self.affine = None if model.affine_rows is None else coordinates(model, affine=True)

    @classmethod
    def scaled(cls, samples: torch.Tensor, centroids: torch.Tensor, model: WarpModel,
               penalty, bending_weight: float, affine_weight: float,
               appearance: Appearance | None = None) -> PairLevel:
        """The pairs of ``samples`` (B, P) and ``centroids`` (K, P) with the penalty
        ``penalty`` (float or (B,)), on images divided by their power-of-two scale: the
        fit is scale-invariant (x and mu times c: the energy times c^2 when the penalty
        is too), so it runs on images of magnitude ~1 (an exact division)."""
        scale = pair_scale(samples, centroids)
        samples, centroids = samples.detach() / scale, centroids.detach() / scale
        weight = per_pair_weight(penalty, samples.shape[0], centroids.shape[0], samples)
        gram = model.penalty_gram(bending_weight, affine_weight).to(samples.dtype)
        return cls(model, samples, centroids, weight / (scale * scale), gram, scale,
                   appearance)

    def coarser(self, coarse: WarpModel) -> PairLevel:
        """The same pairs on the images downsampled to ``coarse.shape`` (the penalty scaled
        by the ratio of pixel counts); warp parameters mean the same at both levels."""
        shape = self.model.shape
        ratio = coarse.shape[0] * coarse.shape[1] / (shape[0] * shape[1])
        n_images, n_channels = self.images.shape[:2]
        # every channel downsampled (not derived again from the coarse centroid), so the
        # appearance coefficients mean the same at both levels
        images = downsample_images(self.images.reshape(n_images * n_channels, -1), shape,
                                   coarse.shape).reshape(n_images, n_channels, *coarse.shape)
        level = PairLevel(coarse, downsample_images(self.samples, shape, coarse.shape),
                          images[:, 0].reshape(n_images, -1), self.weight * ratio, self.gram,
                          self.scale, self.appearance)
        level.images = images
        return level

    def pairs(self, rows: torch.Tensor | None) -> PairBatch:
        """All pairs (``rows`` None) or the pairs ``rows`` of the image-major list."""
        if rows is None:
            return PairBatch(self.images, self.samples[None], self.model, self.weight, self.gram,
                             self.appearance)
        n_samples = self.samples.shape[0]
        return PairBatch(self.images[rows // n_samples], self.samples[rows % n_samples][:, None],
                         self.model, self.weight[rows], self.gram, self.appearance)

    def energy(self, flat: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Energy of every pair at the warps ``flat`` (K * B, n_params), or of the pairs
        ``rows`` at ``flat[rows]``."""
        return self.pairs(rows).energy(flat if rows is None else flat[rows])[0]

    def updated_energy(self, flat: torch.Tensor, rows: torch.Tensor | None,
                       energy: torch.Tensor | None) -> torch.Tensor:
        """The energies (K * B,) at the warps ``flat`` of every pair (``rows`` None) or of
        the pairs ``rows``, the others keeping theirs in ``energy``."""
        if rows is None:
            return self.energy(flat)
        assert energy is not None  # the energies of the pairs left out
        energy = energy.clone()
        energy[rows] = self.energy(flat, rows)
        return energy

    def steps(self, flat: torch.Tensor, damping: torch.Tensor, n_steps: int,
              rows: torch.Tensor | None = None, energy: torch.Tensor | None = None,
              affine: bool = False):
        """``n_steps`` Levenberg–Marquardt steps (on the affine part of the warps with
        ``affine``) on every pair, or on the pairs ``rows`` only: the others keep their
        warp, damping and ``energy`` (required with ``rows``).

        Returns the energies, warps and damping of every pair.
        """
        coords: Coordinates = self.affine if affine else self.full  # type: ignore[assignment]
        if rows is None:
            return levenberg_marquardt(self.pairs(None), flat, n_steps, coords, damping)
        assert energy is not None  # the energies of the pairs left out
        out = levenberg_marquardt(self.pairs(rows), flat[rows], n_steps, coords,
                                  damping[rows])
        energy, flat, damping = energy.clone(), flat.clone(), damping.clone()
        energy[rows], flat[rows], damping[rows] = out
        return energy, flat, damping

    def per_sample(self, energy: torch.Tensor, flat: torch.Tensor):
        """Energies (B, K) in the caller's scale and warps (B, K, n_basis, D) from the
        image-major ``energy`` (K * B,) and ``flat`` (K * B, n_params)."""
        n_clusters, n_samples = self.images.shape[0], self.samples.shape[0]
        shape = (n_clusters, n_samples, self.model.n_basis, self.model.ndim)
        return ((energy * (self.scale * self.scale)).reshape(n_clusters, n_samples)
                .T.contiguous(), flat.reshape(shape).transpose(0, 1).contiguous())


def screen_pairs(energy: torch.Tensor, n_candidates: int | None,
                screen_ratio: float | None) -> torch.Tensor:
    """Rows (image-major, into the K * B pairs) of the pairs a sample keeps fitting.

    ``energy`` is (K, B). A centroid stays a candidate of a sample when its energy is at
    most ``screen_ratio`` times the sample's lowest (``lowest + (ratio - 1) |lowest|``,
    so the lowest itself always stays) and, with ``n_candidates`` below K, when it is
    among the ``n_candidates`` lowest.
    """
    keep = torch.ones_like(energy, dtype=torch.bool)
    if screen_ratio is not None:
        lowest = energy.min(dim=0, keepdim=True).values
        keep &= energy <= lowest + (float(screen_ratio) - 1.0) * lowest.abs()
    if n_candidates is not None and n_candidates < energy.shape[0]:
        top = torch.zeros_like(keep)
        top.scatter_(0, energy.topk(n_candidates, dim=0, largest=False).indices, True)
        keep &= top
    return torch.nonzero(keep.reshape(-1))[:, 0]


def allowed_pairs(allowed: torch.Tensor | None) -> torch.Tensor | None:
    """Rows (image-major, into the K * B pairs) of the pairs a fit may fit: those where
    ``allowed`` (B, K) is True; None (every pair) without ``allowed``."""
    return None if allowed is None else torch.nonzero(allowed.T.reshape(-1))[:, 0]


def restricted(energy: torch.Tensor, rows: torch.Tensor | None,
               allowed_rows: torch.Tensor | None) -> torch.Tensor | None:
    """The pairs ``rows`` (None: every pair) that are among ``allowed_rows`` (None: every
    pair), for ``energy`` (K * B,) of every pair."""
    if allowed_rows is None:
        return rows
    if rows is None:
        return allowed_rows
    keep = torch.zeros_like(energy, dtype=torch.bool)
    keep[rows] = True
    return allowed_rows[keep[allowed_rows]]


def screening(n_candidates: int | None, screen_ratio: float | None, n_clusters: int) -> bool:
    """Whether :func:`screen_pairs` can drop a pair by its rules: a ratio, or a cap on the
    candidates below the number of centroids ``n_clusters``."""
    return screen_ratio is not None or (n_candidates is not None and n_candidates < n_clusters)


def _schedule(n_steps: int, switch: int, screen_at: int | None):
    """The segments ``(first, last, on the coarse level)`` of the full-warp steps: cut
    where the candidates are screened (after ``screen_at`` steps) and where the fit moves
    from the coarse level to full resolution (after ``switch`` steps)."""
    cuts = sorted({0, n_steps, switch} | ({screen_at} if screen_at is not None else set()))
    return [(a, b, a < switch) for a, b in zip(cuts[:-1], cuts[1:])]


def fit_warps(
    samples: torch.Tensor,
    centroids: torch.Tensor,
    model: WarpModel,
    *,
    penalty: float | torch.Tensor,
    n_steps: int = 20,
    affine_steps: int = 5,
    bending_weight: float = 1.0,
    affine_weight: float = 1.0,
    n_candidates: int | None = None,
    screen_ratio: float | None = None,
    screen_steps: int = 0,
    damping: float = 1e-2,
    coarse: WarpModel | None = None,
    coarse_steps: int = 0,
    appearance: Appearance | None = None,
    shift_search: bool = False,
    allowed: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The regularised warp of every centroid onto every sample of a chunk.

    Minimises ``||x_b - S(v) mu_k||^2 + penalty_b * v^T G v`` (``G`` =
    ``model.penalty_gram(bending_weight, affine_weight)``) over ``v`` for each pair by
    Levenberg–Marquardt, starting from the identity; the energy of a pair never rises from
    one step to the next at one resolution. Memory is O(B * K * (P + n_params ** 2)) (no
    per-pair Jacobian is formed: the normal equations come from per-pixel slopes).

    Parameters
    ----------
    samples : Tensor of shape (B, P)
    centroids : Tensor of shape (K, P)
        Held fixed.
    model : WarpModel
    penalty : float or Tensor of shape (B,)
        Weight :math:`\lambda` of the warp penalty (one per sample if a tensor).
    n_steps : int, default=20
        Damped Gauss–Newton steps on all parameters (after the affine ones).
    affine_steps : int, default=5
        Steps on the affine part of the warp first; ignored for
        ``model.transform == "affine"`` and when ``n_steps == 0`` (no warping: the
        identity).
    bending_weight, affine_weight : float, default=1.0
        Weights of the TPS bending energy and of the squared affine coefficients in
        ``G`` (:meth:`~skxclust.nn.WarpModel.penalty_gram`).
    n_candidates : int, optional
        Screening: after the affine steps and ``screen_steps`` full steps, only the
        ``n_candidates`` lowest-energy centroids of each sample are fitted further; the
        others keep the warp reached (their energy, at full resolution, is an upper bound
        of their optimum).
    screen_ratio : float, optional
        Screening (with or without ``n_candidates``): only the centroids whose energy at
        that point is at most ``screen_ratio`` (>= 1) times the sample's lowest are
        fitted further; their number adapts to how clear the choice is.
    screen_steps : int, default=0
    damping : float, default=1e-2
        Initial Levenberg–Marquardt damping :math:`\nu` of every pair (small: the first
        steps are Gauss–Newton steps; large: short gradient-like steps). It adapts per
        pair, so the fitted warps hardly depend on it.
    coarse : WarpModel, optional
        The same warp family on a coarser image shape (see :mod:`skxclust.nn.pyramid`):
        the affine steps and the first ``coarse_steps`` full steps then run on the images
        downsampled to ``coarse.shape`` (the penalty scaled by the ratio of pixel counts),
        the others at full resolution. Warp parameters mean the same at both resolutions.
    coarse_steps : int, default=0
        Full steps on the coarse level (with ``coarse``).
    appearance : Appearance, optional
        Let the warped centroid of every pair take its optimal gain and offset (and
        thickness, for ``"intensity+thickness"``) too (:mod:`skxclust.nn.appearance`);
        the energy then includes their penalty.
    shift_search : bool, default=False
        For a 1-D ``model``: start every pair from its best whole-sample translation
        (:func:`~skxclust.nn.shift_search.shift_start`, the global minimum of the
        penalised energy over the translations; with ``appearance``, of the energy
        without the appearance coefficients) instead of the identity.
    allowed : BoolTensor of shape (B, K), optional
        Only these pairs are fitted (every step, the screening among them); the others
        get an infinite energy (and an unfitted warp). None: every pair.

    Returns
    -------
    energies : Tensor of shape (B, K)
        The minimised energy of every pair at full resolution (the deformation-invariant
        distance).
    params : Tensor of shape (B, K, n_basis, D)

    Examples
    --------
    A blob shifted by a tenth of the image is matched by a warp:

    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.tps import pixel_grid
    >>> p = pixel_grid((12, 12), 2, torch.float64)
    >>> def blob(cx): return torch.exp(-((p - torch.tensor([cx, 0.0])) ** 2).sum(1) / 0.1)
    >>> model = make_warp_model((12, 12), 9, "tps", torch.float64)
    >>> energy, params = fit_warps(blob(0.2)[None], blob(0.0)[None], model, penalty=1e-3)
    >>> float(energy[0, 0]) < 0.01 * float(((blob(0.2) - blob(0.0)) ** 2).sum())
    True
    """
    check_pair_args(model, samples, centroids, penalty)
    fine = PairLevel.scaled(samples, centroids, model, penalty, bending_weight, affine_weight,
                            appearance)
    n_pairs = fine.images.shape[0] * fine.samples.shape[0]
    switch, first_level = 0, fine  # full steps on the coarse level, level of the first
    if coarse is not None:
        switch = min(coarse_steps, n_steps)
        low = first_level = fine.coarser(coarse)
    flat = fine.samples.new_zeros(n_pairs, model.n_params)
    if shift_search and model.ndim == 1 and n_steps > 0:
        n_images = fine.images.shape[0]
        flat = off_the_knots(shift_start(
            fine.samples, fine.images[:, 0].reshape(n_images, -1), model,
            penalty=fine.weight.reshape(n_images, -1)[0], gram=fine.gram), model)
    damp = flat.new_full((n_pairs,), float(damping))  # per pair
    # the pairs fitted before any screening (None: all), and their energy (the others'
    # stays infinite)
    candidates = allowed_pairs(allowed)
    energy = None if candidates is None else flat.new_full((n_pairs,), torch.inf)
    if first_level.affine is not None and affine_steps > 0 and n_steps > 0:
        _, flat, damp = first_level.steps(flat, damp, affine_steps, candidates, energy,
                                          affine=True)
    n_clusters = centroids.shape[0]
    screen_at = screen_steps if (screening(n_candidates, screen_ratio, n_clusters)
                                 and 0 <= screen_steps < n_steps) else None
    rows = candidates  # the pairs fitted: the candidates, then the screened ones
    screened = False
    coarse_energy = coarse_candidates = False  # those energies are coarse-level ones
    for first, last, on_coarse in _schedule(n_steps, switch, screen_at):
        level = low if on_coarse else fine
        if first == screen_at:
            # screened on full-resolution energies: on 600 MNIST rows the coarse-level
            # ones dropped the final centroid of 0.3 % of the samples, these of none
            if energy is None or coarse_energy:
                energy, coarse_energy = fine.updated_energy(flat, candidates, energy), False
            rows = restricted(energy, screen_pairs(energy.reshape(n_clusters, -1),
                                                   n_candidates, screen_ratio), candidates)
            screened = True
        energy, flat, damp = level.steps(flat, damp, last - first, rows, energy)
        if screened:
            coarse_candidates = on_coarse
        else:
            coarse_energy = on_coarse
    if n_steps == 0:  # no step at all: the identity
        energy = fine.updated_energy(flat, candidates, energy)
    assert energy is not None  # set by the steps, or just above without any
    # pairs whose last energy is a coarse-level one get their full-resolution energy
    redo = torch.full_like(energy, coarse_energy, dtype=torch.bool)
    if screened:
        redo[rows] = coarse_candidates
    if candidates is not None:
        redo &= torch.isfinite(energy)
    redo = torch.nonzero(redo)[:, 0]
    if redo.numel():
        energy = energy.clone()
        energy[redo] = fine.energy(flat, redo)
    return fine.per_sample(energy, flat)
