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
:math:`J^\top J`, one batched Cholesky solve gives every step.

The first ``affine_steps`` steps move only the affine part of the warp (coarse to fine):
the global pose is found before the local bending, which keeps the fit out of the poor
local minima that bilinear interpolation creates.
"""

from __future__ import annotations

import torch

from ._checks import check_pair_args, check_warp_args
from .pyramid import downsample_images
from .warps import BILINEAR, ZEROS, WarpModel

__all__ = ["Coordinates", "PairBatch", "PairLevel", "coordinates", "fit_warps",
           "levenberg_marquardt", "screen_pairs",
           "pair_scale", "per_pair_weight", "warp_energy"]


def _quadratic(flat: torch.Tensor, gram: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``v^T G v`` per row of ``flat`` (N, n) and ``G v`` (N, n)."""
    gv = flat @ gram
    return (flat * gv).sum(-1), gv


class Coordinates:
    """The parameters a fit moves: ``params = rows @ z`` (rows of the warp basis).

    Holds what the normal equations need: the basis in these coordinates (P, m), the
    products of its columns per pixel (upper triangle, (P, m (m + 1) / 2)) and the lift
    ``kron(rows, I_D)`` to full parameters (None when ``rows`` is the identity).
    """

    def __init__(self, model: WarpModel, rows: torch.Tensor | None = None):
        basis = model.basis if rows is None else model.basis @ rows.to(model.basis.dtype)
        self.basis = basis
        self.size = basis.shape[1]
        self.upper = torch.triu_indices(self.size, self.size, device=basis.device)
        self.outer = basis[:, self.upper[0]] * basis[:, self.upper[1]]
        # J^T J[(j, d), (k, e)] is entry tri(j, k) of slope product s_d s_e: its position
        # in the flattened (slope product, triangle entry) output of the one GEMM
        n_upper = self.upper.shape[1]
        tri = torch.zeros(self.size, self.size, dtype=torch.long, device=basis.device)
        order = torch.arange(n_upper, device=basis.device)
        tri[self.upper[0], self.upper[1]] = order
        tri[self.upper[1], self.upper[0]] = order
        ndim = model.ndim
        product = torch.tensor([[0, 1], [1, 2]] if ndim == 2 else [[0]], device=basis.device)
        self.gather = (product[None, :, None, :] * n_upper + tri[:, None, :, None]).reshape(-1)
        self.lift = None
        if rows is not None:
            eye = torch.eye(model.ndim, dtype=basis.dtype, device=basis.device)
            self.lift = torch.kron(rows.to(basis.dtype), eye)


def coordinates(model: WarpModel, affine: bool) -> Coordinates:
    """The coordinates of all the parameters or of the affine ones, built once per model
    (in ``model.cache``)."""
    key = ("coordinates", affine)
    if key not in model.cache:
        model.cache[key] = Coordinates(model, model.affine_rows if affine else None)
    return model.cache[key]


class PairBatch:
    """``G`` images, each warped by ``M`` warps and compared with targets (G, M, P)."""

    def __init__(self, images, targets, model: WarpModel, weight, gram):
        self.images = images  # (G, 1, H, W)
        self.targets = targets  # broadcastable to (G, M, P)
        self.model = model
        self.weight = weight  # (G * M,)
        self.gram = gram  # (n_params, n_params)

    def select(self, rows: torch.Tensor) -> PairBatch:
        """The pairs ``rows`` (into the image-major ``G * M`` list), one image each."""
        n_warps = self.weight.shape[0] // self.images.shape[0]
        image, warp = rows // n_warps, rows % n_warps
        pixels = self.targets.shape[-1]
        targets = self.targets.expand(self.images.shape[0], n_warps, pixels)[image, warp]
        return PairBatch(self.images[image], targets[:, None], self.model, self.weight[rows],
                         self.gram)

    def _grid(self, flat):
        """Sampling grids of the warps ``flat`` (N, n_params), shape (G, M * H, W, 2)."""
        grid = torch.addmm(self.model.flat_points, flat, self.model.flat_basis)
        return grid.reshape(self.images.shape[0], -1, self.model.shape[1], 2)

    def energy(self, flat):
        """Energy (G * M,) and residual ``S mu - x`` (G, M, P) of the warps ``flat``."""
        warped = torch.grid_sampler_2d(self.images, self._grid(flat), BILINEAR, ZEROS, True)
        residual = warped.reshape(self.images.shape[0], -1, self.targets.shape[-1]) \
            - self.targets
        size, _ = _quadratic(flat, self.gram)
        return (residual * residual).sum(-1).reshape(-1) + self.weight * size, residual

    def normal_system(self, flat, residual, coords: Coordinates):
        """``A = J^T J + lambda G`` (N, m D, m D) and ``b = J^T r + lambda G v`` (N, m D)
        in the coordinates ``coords``."""
        n_pairs, ndim, size = flat.shape[0], self.model.ndim, coords.size
        grid = self._grid(flat)
        ones = torch.ones(grid.shape[:3], dtype=flat.dtype, device=flat.device)[:, None]
        _, slope = torch.ops.aten.grid_sampler_2d_backward(
            ones, self.images, grid, BILINEAR, ZEROS, True, [False, True]
        )
        # slope[n, d, p]: derivative of warped pixel p along the grid coordinate of warped
        # axis d (each output pixel depends only on its own grid point). Parameter (j, d)
        # moves that coordinate of pixel p by basis[p, j], so J[n, (j, d), p] =
        # basis[p, j] slope[n, d, p] and J^T J is built from per-pixel slope products
        # against per-pixel basis products: one GEMM, no (N, m D, P) Jacobian.
        # (N, 2, P), contiguous: the products below then run on unit-stride rows
        slope = slope.reshape(n_pairs, -1, 2).transpose(1, 2)
        if ndim == 1:
            slope = slope[:, self.model.axes[0]:self.model.axes[0] + 1]
        slope = slope.contiguous()
        if ndim == 2:
            sx, sy = slope[:, 0], slope[:, 1]
            weights = slope.new_empty(n_pairs, 3, slope.shape[-1])
            torch.mul(sx, sx, out=weights[:, 0])
            torch.mul(sx, sy, out=weights[:, 1])
            torch.mul(sy, sy, out=weights[:, 2])
        else:
            weights = slope * slope
        vals = (weights.reshape(-1, weights.shape[-1]) @ coords.outer).reshape(
            n_pairs, weights.shape[1], -1)
        hess = torch.index_select(vals.reshape(n_pairs, -1), 1, coords.gather).reshape(
            n_pairs, size * ndim, size * ndim)
        res = residual.reshape(n_pairs, 1, -1)
        grad = ((slope * res).reshape(n_pairs * ndim, -1) @ coords.basis).reshape(
            n_pairs, ndim, size).transpose(1, 2).reshape(n_pairs, size * ndim)
        _, gv = _quadratic(flat, self.gram)
        penalty, pen_hess = self.weight[:, None] * gv, self.gram
        if coords.lift is not None:
            penalty = penalty @ coords.lift
            pen_hess = coords.lift.T @ pen_hess @ coords.lift
        # + weight_n * pen_hess for every pair n, in place (no (N, m D, m D) temporary)
        hess.view(n_pairs, -1).addr_(self.weight, pen_hess.reshape(-1))
        return hess, grad + penalty


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
    energy, residual = pairs.energy(flat)
    if steps > 0:
        hess, grad = pairs.normal_system(flat, residual, coords)
    for step_index in range(steps):
        step = _damped_steps(hess, grad, damping)
        if coords.lift is not None:
            step = step @ coords.lift.T
        trial = flat + step
        trial_energy, trial_residual = pairs.energy(trial)
        better = trial_energy < energy
        flat = torch.where(better[:, None], trial, flat)
        energy = torch.where(better, trial_energy, energy)
        residual = torch.where(better.reshape(residual.shape[0], -1, 1), trial_residual,
                               residual)
        damping = torch.where(better, damping * 0.3, damping * 10.0).clamp(1e-7, 1e7)
        if step_index + 1 == steps:
            break
        moved = torch.nonzero(better)[:, 0]
        if moved.numel() == better.numel():
            hess, grad = pairs.normal_system(flat, residual, coords)
        elif moved.numel():
            hess[moved], grad[moved] = pairs.select(moved).normal_system(
                flat[moved], residual.reshape(better.numel(), -1)[moved], coords)
    return energy, flat, damping


def per_pair_weight(weight, n_samples: int, n_images: int, like: torch.Tensor) -> torch.Tensor:
    """Penalty weight per (image, sample) pair, image-major, shape (n_images * n_samples,)."""
    if not isinstance(weight, torch.Tensor):
        weight = like.new_full((n_samples,), float(weight))
    return weight.to(like.dtype).reshape(n_samples).repeat(n_images)


class PairLevel:
    """The pairs of a chunk at one resolution: every (centroid, sample) pair or a subset.

    ``weight`` is the per-pair penalty (K * B,), image-major, already scaled to the level.
    """

    def __init__(self, model: WarpModel, samples, centroids, weight, gram):
        self.model = model
        self.samples = samples  # (B, P_level)
        self.images = centroids.reshape(centroids.shape[0], 1, *model.shape)
        self.weight = weight
        self.gram = gram
        self.full = coordinates(model, affine=False)
        self.affine = None if model.affine_rows is None else coordinates(model, affine=True)

    def pairs(self, rows: torch.Tensor | None) -> PairBatch:
        """All pairs (``rows`` None) or the pairs ``rows`` of the image-major list."""
        if rows is None:
            return PairBatch(self.images, self.samples[None], self.model, self.weight, self.gram)
        n_samples = self.samples.shape[0]
        return PairBatch(self.images[rows // n_samples], self.samples[rows % n_samples][:, None],
                         self.model, self.weight[rows], self.gram)


def screen_pairs(energy: torch.Tensor, n_candidates: int | None,
                screen_ratio: float | None) -> torch.Tensor:
    """Rows (image-major, into the K * B pairs) of the pairs a sample keeps fitting.

    ``energy`` is (K, B). A centroid stays a candidate of a sample when its energy is at
    most ``screen_ratio`` times the sample's lowest (``lowest + (ratio - 1) |lowest|``,
    so the lowest itself always stays) and, with ``n_candidates``, when it is among the
    ``n_candidates`` lowest.
    """
    keep = torch.ones_like(energy, dtype=torch.bool)
    if screen_ratio is not None:
        lowest = energy.min(dim=0, keepdim=True).values
        keep &= energy <= lowest + (float(screen_ratio) - 1.0) * lowest.abs()
    if n_candidates is not None:
        top = torch.zeros_like(keep)
        top.scatter_(0, energy.topk(n_candidates, dim=0, largest=False).indices, True)
        keep &= top
    return torch.nonzero(keep.reshape(-1))[:, 0]


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
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The regularised warp of every centroid onto every sample of a chunk.

    Minimises ``||x_b - S(v) mu_k||^2 + penalty_b * v^T G v`` (``G`` =
    ``model.penalty_gram``) over ``v`` for each pair by Levenberg–Marquardt, starting
    from the identity; the energy of a pair never rises from one step to the next at one
    resolution. Memory is O(B * K * P * n_params).

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
    # The fit is scale-invariant (x and mu times c: the energy times c^2 when the penalty
    # is too), so it runs on images of magnitude ~1, scaled by a power of two (exact).
    scale = pair_scale(samples, centroids)
    samples, centroids = samples.detach() / scale, centroids.detach() / scale
    n_samples, n_clusters = samples.shape[0], centroids.shape[0]
    weight = per_pair_weight(penalty, n_samples, n_clusters, samples) / (scale * scale)
    gram = model.penalty_gram(bending_weight, affine_weight).to(samples.dtype)
    fine = PairLevel(model, samples, centroids, weight, gram)
    switch, first_level = 0, fine  # full steps on the coarse level, level of the first
    if coarse is not None:
        switch = min(coarse_steps, n_steps)
        ratio = coarse.shape[0] * coarse.shape[1] / (model.shape[0] * model.shape[1])
        low = first_level = PairLevel(
            coarse, downsample_images(samples, model.shape, coarse.shape),
            downsample_images(centroids, model.shape, coarse.shape), weight * ratio, gram)
    flat = samples.new_zeros(n_clusters * n_samples, model.n_params)
    damp = flat.new_full((flat.shape[0],), float(damping))  # per pair
    if first_level.affine is not None and affine_steps > 0 and n_steps > 0:
        _, flat, damp = levenberg_marquardt(first_level.pairs(None), flat, affine_steps,
                                            first_level.affine, damp)
    capped = n_candidates is not None and n_candidates < n_clusters
    screen_at = screen_steps if ((capped or screen_ratio is not None)
                                 and 0 <= screen_steps < n_steps) else None
    energy, rows = None, None  # energy of every pair; the candidates once screened
    coarse_energy = coarse_candidates = False  # those energies are coarse-level ones
    for first, last, on_coarse in _schedule(n_steps, switch, screen_at):
        level = low if on_coarse else fine
        if first == screen_at:
            # screened on full-resolution energies: on 600 MNIST rows the coarse-level
            # ones dropped the final centroid of 0.3 % of the samples, these of none
            if energy is None or coarse_energy:
                energy, coarse_energy = fine.pairs(None).energy(flat)[0], False
            rows = screen_pairs(energy.reshape(n_clusters, n_samples),
                               n_candidates if capped else None, screen_ratio)
        if rows is None:
            energy, flat, damp = levenberg_marquardt(level.pairs(None), flat,
                                                     last - first, level.full, damp)
            coarse_energy = on_coarse
            continue
        out = levenberg_marquardt(level.pairs(rows), flat[rows], last - first, level.full,
                                  damp[rows])
        assert energy is not None  # set when the candidates were screened
        energy, flat, damp = energy.clone(), flat.clone(), damp.clone()
        energy[rows], flat[rows], damp[rows] = out
        coarse_candidates = on_coarse
    if energy is None:  # no step at all: the identity
        energy = fine.pairs(None).energy(flat)[0]
    # pairs whose last energy is a coarse-level one get their full-resolution energy
    redo = torch.full_like(energy, coarse_energy, dtype=torch.bool)
    if rows is not None:
        redo[rows] = coarse_candidates
    redo = torch.nonzero(redo)[:, 0]
    if redo.numel():
        energy = energy.clone()
        energy[redo] = fine.pairs(redo).energy(flat[redo])[0]
    shape = (n_clusters, n_samples, model.n_basis, model.ndim)
    return ((energy * (scale * scale)).reshape(n_clusters, n_samples).T.contiguous(),
            flat.reshape(shape).transpose(0, 1).contiguous())


def pair_scale(samples: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """The power of two nearest the largest magnitude of ``samples`` and ``centroids``.

    Dividing both by it changes no rounding (a power of two) but keeps every product of
    the warp fit far from overflow and underflow, whatever the scale of the data (1 for
    all-zero images).

    Parameters
    ----------
    samples : Tensor of shape (B, P)
    centroids : Tensor of shape (K, P)

    Returns
    -------
    Tensor of shape (), in the dtype of ``samples``

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.warp_solver import pair_scale
    >>> float(pair_scale(torch.tensor([[3.0, -1.0]]), torch.zeros(2, 2)))
    4.0
    """
    largest = torch.maximum(samples.detach().abs().amax(), centroids.detach().abs().amax())
    _, exponent = torch.frexp(largest)
    scale = torch.ldexp(torch.ones_like(largest), exponent)
    return torch.where(largest > 0, scale, torch.ones_like(scale))


def warp_energy(
    samples: torch.Tensor,
    centroids: torch.Tensor,
    model: WarpModel,
    params: torch.Tensor,
    penalty: float | torch.Tensor,
    bending_weight: float = 1.0,
    affine_weight: float = 1.0,
) -> torch.Tensor:
    """Energy ``||x_b - S(params[b, k]) mu_k||^2 + penalty_b v^T G v`` of given warps.

    Parameters
    ----------
    samples : Tensor of shape (B, P)
    centroids : Tensor of shape (K, P)
    model : WarpModel
    params : Tensor of shape (B, K, n_basis, D)
    penalty : float or Tensor of shape (B,)

    Returns
    -------
    Tensor of shape (B, K)

    Examples
    --------
    At the identity warp the energy is the squared distance:

    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.warp_solver import warp_energy
    >>> model = make_warp_model((1, 4), n_landmarks=4, transform="affine")
    >>> x, mu = torch.tensor([[1.0, 2.0, 3.0, 4.0]]), torch.zeros(2, 4)
    >>> warp_energy(x, mu, model, torch.zeros(1, 2, 2, 1), penalty=1.0).tolist()
    [[30.0, 30.0]]
    """
    check_pair_args(model, samples, centroids, penalty)
    check_warp_args(model, params=params, params_dims="(B, K, n_basis, D)",
                     B=(samples.shape[0], "samples.shape[0]"),
                     K=(centroids.shape[0], "centroids.shape[0]"))
    n_samples, n_clusters = params.shape[:2]
    images = centroids.reshape(n_clusters, 1, *model.shape)
    flat = params.transpose(0, 1).reshape(n_clusters * n_samples, model.n_params)
    weight = per_pair_weight(penalty, n_samples, n_clusters, samples)
    pairs = PairBatch(images, samples[None], model, weight,
                      model.penalty_gram(bending_weight, affine_weight).to(samples.dtype))
    return pairs.energy(flat.to(samples.dtype))[0].reshape(n_clusters, n_samples).T
