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

from ._checks import check_shape, check_warp_args
from .warps import BILINEAR, ZEROS, WarpModel

__all__ = ["fit_warps", "warp_energy", "warp_log_volume"]


def _quadratic(flat: torch.Tensor, gram: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``v^T G v`` per row of ``flat`` (N, n) and ``G v`` (N, n)."""
    gv = flat @ gram
    return (flat * gv).sum(-1), gv


class _Coordinates:
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


class _Pairs:
    """``G`` images, each warped by ``M`` warps and compared with targets (G, M, P)."""

    def __init__(self, images, targets, model: WarpModel, weight, gram):
        self.images = images  # (G, 1, H, W)
        self.targets = targets  # broadcastable to (G, M, P)
        self.model = model
        self.weight = weight  # (G * M,)
        self.gram = gram  # (n_params, n_params)

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

    def normal_system(self, flat, residual, coords: _Coordinates):
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
        slope = slope.reshape(n_pairs, -1, 2).transpose(1, 2)
        if ndim == 1:
            slope = slope[:, self.model.axes[0]:self.model.axes[0] + 1]
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
        grad = ((slope * res) @ coords.basis).transpose(1, 2).reshape(n_pairs, size * ndim)
        _, gv = _quadratic(flat, self.gram)
        penalty, pen_hess = self.weight[:, None] * gv, self.gram
        if coords.lift is not None:
            penalty = penalty @ coords.lift
            pen_hess = coords.lift.T @ pen_hess @ coords.lift
        return hess + self.weight[:, None, None] * pen_hess, grad + penalty


def _damped_steps(hess, grad, damping):
    """Solve ``(A + nu diag(A)) step = -b`` per pair (Cholesky, with a jitter fallback)."""
    diag = torch.diagonal(hess, dim1=-2, dim2=-1)
    scale = diag.mean(-1, keepdim=True).clamp_min(1e-30)
    floor = 1e-9 * scale  # keeps flat directions (no image gradient, no penalty) solvable
    system = hess + torch.diag_embed(damping[:, None] * diag + floor)
    factor, info = torch.linalg.cholesky_ex(system)
    bad = info > 0
    if bool(bad.any()):
        jitter = torch.diag_embed((1e-6 * scale[bad]).expand(-1, diag.shape[1]))
        factor[bad] = torch.linalg.cholesky_ex(system[bad] + jitter)[0]
    return -torch.cholesky_solve(grad[..., None], factor)[..., 0]


def _levenberg_marquardt(pairs: _Pairs, flat, steps: int, coords: _Coordinates, damping):
    """``steps`` LM iterations on every warp of ``pairs`` from ``flat`` (N, n_params) with
    the per-warp damping ``damping`` (N,).

    Returns the final energies (N,), parameters (N, n_params) and damping (N,).
    """
    energy, residual = pairs.energy(flat)
    for _ in range(steps):
        hess, grad = pairs.normal_system(flat, residual, coords)
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
    return energy, flat, damping


def _check_pair_args(model, samples, centroids, penalty, centroids_name="centroids",
                     centroids_dims="(K, P)") -> None:
    """Shapes of the samples, the images warped onto them and a per-sample penalty."""
    check_warp_args(model, samples, images_name="samples")
    check_warp_args(model, centroids, images_name=centroids_name, images_dims=centroids_dims,
                     B=(samples.shape[0], "samples.shape[0]"))
    if isinstance(penalty, torch.Tensor):
        check_shape(penalty, "penalty", "()", "(B,)", B=(samples.shape[0], "samples.shape[0]"))


def _per_pair(weight, n_samples: int, n_images: int, like: torch.Tensor) -> torch.Tensor:
    """Penalty weight per (image, sample) pair, image-major, shape (n_images * n_samples,)."""
    if not isinstance(weight, torch.Tensor):
        weight = like.new_full((n_samples,), float(weight))
    return weight.to(like.dtype).reshape(n_samples).repeat(n_images)


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
    screen_steps: int = 0,
    damping: float = 1e-2,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The regularised warp of every centroid onto every sample of a chunk.

    Minimises ``||x_b - S(v) mu_k||^2 + penalty_b * v^T G v`` (``G`` =
    ``model.penalty_gram``) over ``v`` for each pair by Levenberg–Marquardt, starting
    from the identity; the energy of a pair never rises from one step to the next.
    Memory is O(B * K * P * n_params).

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
        Steps on the affine part of the warp first (coarse to fine); ignored for
        ``model.transform == "affine"`` and when ``n_steps == 0`` (no warping: the
        identity).
    n_candidates : int, optional
        With ``screen_steps``: after the affine steps and ``screen_steps`` full steps, only
        the ``n_candidates`` lowest-energy centroids of each sample are fitted further; the
        others keep the energy reached (an upper bound of their optimum).
    screen_steps : int, default=0
    damping : float, default=1e-2
        Initial Levenberg–Marquardt damping :math:`\nu` of every pair (small: the first
        steps are Gauss–Newton steps; large: short gradient-like steps). It adapts per
        pair, so the fitted warps hardly depend on it.

    Returns
    -------
    energies : Tensor of shape (B, K)
        The minimised energy of every pair (the deformation-invariant distance).
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
    _check_pair_args(model, samples, centroids, penalty)
    samples, centroids = samples.detach(), centroids.detach()
    n_samples, n_clusters = samples.shape[0], centroids.shape[0]
    images = centroids.reshape(n_clusters, 1, *model.shape)
    weight = _per_pair(penalty, n_samples, n_clusters, samples)
    gram = model.penalty_gram(bending_weight, affine_weight).to(samples.dtype)
    pairs = _Pairs(images, samples[None], model, weight, gram)
    flat = samples.new_zeros(n_clusters * n_samples, model.n_params)
    damping = flat.new_full((flat.shape[0],), float(damping))
    if model.affine_rows is not None and affine_steps > 0 and n_steps > 0:
        coarse = _Coordinates(model, model.affine_rows)
        _, flat, damping = _levenberg_marquardt(pairs, flat, affine_steps, coarse, damping)
    coords = _Coordinates(model)
    screen = (n_candidates is not None and n_candidates < n_clusters
              and 0 <= screen_steps < n_steps)
    first = screen_steps if screen else n_steps
    energy, flat, damping = _levenberg_marquardt(pairs, flat, first, coords, damping)
    if screen:
        top = energy.reshape(n_clusters, n_samples).topk(n_candidates, dim=0, largest=False)
        rows = (top.indices * n_samples
                + torch.arange(n_samples, device=samples.device)).reshape(-1)
        cluster_of, sample_of = rows // n_samples, rows % n_samples
        kept = _Pairs(images[cluster_of], samples[sample_of][:, None], model, weight[rows],
                      gram)
        energy_kept, flat_kept, _ = _levenberg_marquardt(
            kept, flat[rows], n_steps - first, coords, damping[rows])
        energy, flat = energy.clone(), flat.clone()
        energy[rows], flat[rows] = energy_kept, flat_kept
    shape = (n_clusters, n_samples, model.n_basis, model.ndim)
    return (energy.reshape(n_clusters, n_samples).T.contiguous(),
            flat.reshape(shape).transpose(0, 1).contiguous())


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
    _check_pair_args(model, samples, centroids, penalty)
    check_warp_args(model, params=params, params_dims="(B, K, n_basis, D)",
                     B=(samples.shape[0], "samples.shape[0]"),
                     K=(centroids.shape[0], "centroids.shape[0]"))
    n_samples, n_clusters = params.shape[:2]
    images = centroids.reshape(n_clusters, 1, *model.shape)
    flat = params.transpose(0, 1).reshape(n_clusters * n_samples, model.n_params)
    pairs = _Pairs(images, samples[None], model, _per_pair(penalty, n_samples, n_clusters,
                                                           samples),
                   model.penalty_gram(bending_weight, affine_weight).to(samples.dtype))
    return pairs.energy(flat.to(samples.dtype))[0].reshape(n_clusters, n_samples).T


def warp_log_volume(
    samples: torch.Tensor,
    images: torch.Tensor,
    model: WarpModel,
    params: torch.Tensor,
    penalty: float | torch.Tensor,
    bending_weight: float = 1.0,
    affine_weight: float = 1.0,
) -> torch.Tensor:
    r"""``log det(J^T J + lambda G) - log det(lambda G)`` of each fitted pair (Occam factor).

    With Gaussian pixel noise of variance :math:`\sigma^2` and the Gaussian warp prior
    whose precision is :math:`\lambda G / \sigma^2`, the energy of :func:`fit_warps` is
    :math:`2\sigma^2` times the negative log posterior, and the Laplace approximation of
    the evidence of a sample is

    .. math::  \log p(x) \approx -\frac{E(v^*)}{2\sigma^2} - \frac12\,\mathrm{this}
               - \frac P2 \log(2\pi\sigma^2).

    The term grows with the number of warp parameters the data actually determine, so
    it makes warps of different flexibility comparable (a more flexible warp must lower
    the energy by more than it adds here).

    Parameters
    ----------
    samples : Tensor of shape (N, P)
    images : Tensor of shape (N, P)
        The image warped onto each sample (e.g. ``centroids[labels]``).
    model : WarpModel
    params : Tensor of shape (N, n_basis, D)
        The fitted warps (from :func:`fit_warps`).
    penalty, bending_weight, affine_weight : see :func:`fit_warps`.

    Returns
    -------
    Tensor of shape (N,), float64

    Examples
    --------
    A stiffer warp prior leaves less for the data to determine:

    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.warp_solver import warp_log_volume
    >>> model = make_warp_model((1, 6), n_landmarks=4, transform="affine",
    ...                         dtype=torch.float64)
    >>> x = torch.tensor([[0.0, 1.0, 2.0, 2.0, 1.0, 0.0]], dtype=torch.float64)
    >>> params = torch.zeros(1, 2, 1, dtype=torch.float64)
    >>> soft, stiff = (warp_log_volume(x, x, model, params, penalty=p) for p in (0.1, 10.0))
    >>> bool(soft[0] > stiff[0] > 0)
    True
    """
    _check_pair_args(model, samples, images, penalty, centroids_name="images",
                     centroids_dims="(B, P)")
    check_warp_args(model, params=params, B=(samples.shape[0], "samples.shape[0]"))
    n = samples.shape[0]
    dtype = torch.float64
    gram = model.penalty_gram(bending_weight, affine_weight).to(dtype)
    weight = _per_pair(penalty, n, 1, samples).to(dtype)
    pairs = _Pairs(images.detach().reshape(n, 1, *model.shape).to(dtype),
                   samples.detach().to(dtype)[:, None], model, weight, gram)
    flat = params.detach().reshape(n, -1).to(dtype)
    model_dtype = model.basis.dtype
    if model_dtype != dtype:  # the basis in float64 for the determinant
        model = _model_as(model, dtype)
        pairs.model = model
    _, residual = pairs.energy(flat)
    hess, _ = pairs.normal_system(flat, residual, _Coordinates(model))
    eig_prior = torch.linalg.eigvalsh(gram)
    floor = 1e-12 * eig_prior.abs().max().clamp_min(1e-300)
    log_prior = torch.log(eig_prior.clamp_min(floor)).sum() \
        + gram.shape[0] * torch.log(weight.clamp_min(1e-300))
    eig_post = torch.linalg.eigvalsh(hess)
    return torch.log(eig_post.clamp_min(floor)).sum(-1) - log_prior


def _model_as(model: WarpModel, dtype) -> WarpModel:
    """A shallow copy of ``model`` whose tensors used by the fit are in ``dtype``."""
    out = object.__new__(type(model))
    out.__dict__.update({name: value.to(dtype) if isinstance(value, torch.Tensor)
                         and value.is_floating_point() else value
                         for name, value in model.__dict__.items()})
    return out
