r"""A batch of (sample, centroid) warp pairs: its energy and its normal equations.

Pure torch; no scikit-learn import. Shapes: ``B`` samples, ``K`` centroids, ``P = H * W``
pixels, ``n_params = n_basis * D`` parameters per warp (see :mod:`skxclust.nn.warps`).

For a sample :math:`x` and a centroid :math:`\mu` the energy of the warp ``v`` is

.. math::  E(v) = \lVert x - S_v \mu\rVert^2 + \lambda\, v^\top G\, v,

where :math:`S_v` resamples the centroid through the warp and ``G`` is the warp's penalty
matrix (:attr:`WarpModel.penalty_gram <skxclust.nn.warps.WarpModel>`). :class:`PairBatch`
evaluates it for every pair of a batch at once (one GEMM builds the grids, one
``grid_sampler`` call warps every centroid) and forms the Gauss-Newton normal equations
that :mod:`skxclust.nn.warp_solver` solves; :func:`warp_energy` is the same energy for
given warps. The solvers (:func:`~skxclust.nn.warp_solver.fit_warps`,
:func:`~skxclust.nn.warp_refit.refit_warps`) and the Laplace volume
(:mod:`skxclust.nn.warp_evidence`) are built on these pieces.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ._checks import check_pair_args, check_warp_args
from .appearance import Appearance, spd_inverse
from .warps import BILINEAR, ZEROS, WarpModel

__all__ = ["Coordinates", "PairBatch", "Sampled", "coordinates", "pair_images", "pair_scale",
           "per_pair_weight", "warp_energy"]

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


class Sampled(NamedTuple):
    """The sampling grid (G, M * H, W, 2) of a :class:`PairBatch`'s warps and, with an
    appearance, the warped channels (G, M, C, P); None where not computed."""

    grid: torch.Tensor | None
    channels: torch.Tensor | None


class PairBatch:
    """``G`` images, each warped by ``M`` warps and compared with targets (G, M, P).

    With an ``appearance`` (:class:`~skxclust.nn.appearance.Appearance`), the images
    have its ``C`` channels (:func:`pair_images`) and each warped image takes the
    coefficients and offset that fit its target best (profiled out: the energy is the
    minimum over them, and the normal equations use the Jacobian of the transformed
    image).
    """

    def __init__(self, images, targets, model: WarpModel, weight, gram,
                 appearance: Appearance | None = None):
        self.images = images  # (G, C, H, W)
        self.targets = targets  # broadcastable to (G, M, P)
        self.model = model
        self.weight = weight  # (G * M,)
        self.gram = gram  # (n_params, n_params)
        self.appearance = appearance

    def _pair_indices(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        """The image and warp of each pair ``rows`` (into the image-major ``G * M`` list),
        and ``M``."""
        n_warps = self.weight.shape[0] // self.images.shape[0]
        return rows // n_warps, rows % n_warps, n_warps

    def select(self, rows: torch.Tensor) -> PairBatch:
        """The pairs ``rows`` (into the image-major ``G * M`` list), one image each."""
        image, warp, n_warps = self._pair_indices(rows)
        pixels = self.targets.shape[-1]
        targets = self.targets.expand(self.images.shape[0], n_warps, pixels)[image, warp]
        return PairBatch(self.images[image], targets[:, None], self.model, self.weight[rows],
                         self.gram, self.appearance)

    def select_sampled(self, rows: torch.Tensor, sampled: Sampled) -> Sampled:
        """``sampled`` (from :meth:`evaluate`) of the pairs ``rows``, laid out as in
        :meth:`select`."""
        image, warp, n_warps = self._pair_indices(rows)
        grid, channels = sampled
        if grid is not None:
            grid = grid.reshape(grid.shape[0], n_warps, *self.model.shape, 2)[image, warp]
        if channels is not None:
            channels = channels[image, warp][:, None]
        return Sampled(grid, channels)

    def _grid(self, flat):
        """Sampling grids of the warps ``flat`` (N, n_params), shape (G, M * H, W, 2)."""
        grid = torch.addmm(self.model.flat_points, flat, self.model.flat_basis)
        return grid.reshape(self.images.shape[0], -1, self.model.shape[1], 2)

    def warped(self, flat, grid=None):
        """The warped images (G, M, P) of the warps ``flat``, or (G, M, C, P) with an
        appearance (``grid``: their sampling grid, if at hand)."""
        grid = self._grid(flat) if grid is None else grid
        warped = torch.grid_sampler_2d(self.images, grid, BILINEAR, ZEROS, True)
        n_images, n_channels = self.images.shape[:2]
        warped = warped.reshape(n_images, n_channels, -1, self.targets.shape[-1])
        return warped[:, 0] if self.appearance is None else warped.transpose(1, 2)

    def coefficients(self, flat):
        """The appearance coefficients (G, M, C) of the warps ``flat`` (see
        :meth:`~skxclust.nn.appearance.Appearance.fit`)."""
        assert self.appearance is not None
        warped = self.warped(flat)
        return self.appearance.fit(warped, self.targets, self.weight.reshape(warped.shape[:2]))[0]

    def energy(self, flat):
        """Energy (G * M,) and residual ``S mu - x`` (G, M, P) of the warps ``flat`` (with
        an appearance: ``g S mu + o - x`` at the optimal gain and offset)."""
        return self.evaluate(flat)[:2]

    def evaluate(self, flat):
        """:meth:`energy`, the appearance coefficients (G, M, C) (None without an
        appearance) and the :class:`Sampled` warps: what :meth:`normal_system` at the
        same ``flat`` then need not compute again."""
        grid = self._grid(flat)
        warped = self.warped(flat, grid)
        size, _ = _quadratic(flat, self.gram)
        size = self.weight * size
        coef, channels = None, None
        if self.appearance is not None:  # (G, M, C, P) -> (G, M, P)
            channels = warped
            transformed, coef, cost = self.appearance.transformed(
                channels, self.targets, self.weight.reshape(channels.shape[:2]))
            size = size + cost.reshape(-1)
            residual = transformed.sub_(self.targets)  # the transformed image is not kept
        else:
            residual = warped - self.targets
        energy = (residual * residual).sum(-1).reshape(-1) + size
        return energy, residual, coef, Sampled(grid, channels)

    def slope(self, flat, coef=None, grid=None):
        """``slope[n, d, p]`` (N, D, P), contiguous: the derivative of warped pixel ``p``
        of pair ``n`` along the grid coordinate of warped axis ``d`` (with an appearance:
        of the transformed image, for the coefficients ``coef`` (G, M, C), fitted when
        None; ``grid``: the sampling grid of ``flat``, if at hand)."""
        n_pairs, ndim = flat.shape[0], self.model.ndim
        grid = self._grid(flat) if grid is None else grid
        if self.appearance is None:
            combine = torch.ones(grid.shape[:3], dtype=flat.dtype, device=flat.device)[:, None]
        else:  # the slope of the transformed image sum_c coef_c S b_c: channels weighted
            if coef is None:
                coef = self.coefficients(flat)  # (G, M, C)
            n_images, n_warps, n_channels = coef.shape
            combine = coef.transpose(1, 2)[..., None, None].expand(
                n_images, n_channels, n_warps, *self.model.shape).reshape(
                n_images, n_channels, *grid.shape[1:3])
        _, slope = torch.ops.aten.grid_sampler_2d_backward(
            combine, self.images, grid, BILINEAR, ZEROS, True, [False, True]
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
        return slope.contiguous()

    def cross(self, flat, columns, coords: Coordinates, slope=None):
        """``J^T c`` (N, m D, C) for per-pair pixel vectors ``columns`` (N, C, P) in the
        coordinates ``coords`` (the coupling of the warp with other parameters; ``slope``
        from :meth:`slope`, if at hand)."""
        slope = self.slope(flat) if slope is None else slope
        n_pairs, ndim, n_pixels = slope.shape
        n_cols = columns.shape[1]
        prod = (slope[:, None] * columns[:, :, None]).reshape(-1, n_pixels) @ coords.basis
        return prod.reshape(n_pairs, n_cols, ndim, coords.size).transpose(2, 3).reshape(
            n_pairs, n_cols, coords.size * ndim).transpose(1, 2)

    def normal_system(self, flat, residual, coords: Coordinates, coef=None,
                      sampled: Sampled | None = None):
        """``A = J^T J + lambda G`` (N, m D, m D) and ``b = J^T r + lambda G v`` (N, m D)
        in the coordinates ``coords`` (``coef`` and ``sampled``: the appearance
        coefficients and the sampled warps of ``flat`` from :meth:`evaluate`, if at
        hand)."""
        n_pairs, ndim, size = flat.shape[0], self.model.ndim, coords.size
        sampled = Sampled(None, None) if sampled is None else sampled
        slope = self.slope(flat, coef, sampled.grid)
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
        penalty, pen_hess = self.weight[:, None] * (flat @ self.gram), self.gram
        if coords.lift is not None:
            penalty = penalty @ coords.lift
            pen_hess = coords.lift.T @ pen_hess @ coords.lift
        # + weight_n * pen_hess for every pair n, in place (no (N, m D, m D) temporary)
        hess.view(n_pairs, -1).addr_(self.weight, pen_hess.reshape(-1))
        if self.appearance is not None:
            self._eliminate_appearance(hess, flat, coords, slope, sampled)
        return hess, grad + penalty

    def _eliminate_appearance(self, hess, flat, coords: Coordinates, slope,
                              sampled: Sampled) -> None:
        """``hess -= X M^-1 X^T`` in place: the Gauss-Newton Hessian of the joint fit of
        the warp and the appearance coefficients (``X = J^T A``, ``A`` the warped channels
        and a constant, ``M`` their normal matrix), with the coefficients eliminated (a
        Schur complement). The step it gives is the joint Gauss-Newton step's warp part:
        the warp no longer moves as if the gain and offset could not follow it."""
        assert self.appearance is not None
        warped = sampled.channels  # (G, M, C, P)
        if warped is None:
            warped = self.warped(flat, sampled.grid)
        matrix, _ = self.appearance.normal_matrix(warped, self.weight.reshape(warped.shape[:2]))
        n_pairs = flat.shape[0]
        warped = warped.reshape(n_pairs, -1, warped.shape[-1])
        columns = torch.cat([warped, torch.ones_like(warped[:, :1])], dim=1)
        coupling = self.cross(flat, columns, coords, slope)  # (N, m D, C + 1)
        inverse = spd_inverse(matrix.reshape(n_pairs, *matrix.shape[-2:]))
        hess.baddbmm_(coupling @ inverse, coupling.transpose(1, 2), alpha=-1.0)


def pair_images(centroids: torch.Tensor, model: WarpModel,
                appearance: Appearance | None = None) -> torch.Tensor:
    """The images (K, C, H, W) a :class:`PairBatch` warps: the centroids (K, P), with the
    channels of ``appearance`` (C = 1 without)."""
    if appearance is None:
        return centroids.reshape(centroids.shape[0], 1, *model.shape)
    return appearance.channels(centroids, model.input_shape).reshape(
        centroids.shape[0], -1, *model.shape)


def per_pair_weight(weight, n_samples: int, n_images: int, like: torch.Tensor) -> torch.Tensor:
    """Penalty weight per (image, sample) pair, image-major, shape (n_images * n_samples,)."""
    if not isinstance(weight, torch.Tensor):
        weight = like.new_full((n_samples,), float(weight))
    return weight.to(like.dtype).reshape(n_samples).repeat(n_images)


def pair_scale(samples: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """The smallest power of two above the largest magnitude of ``samples`` and
    ``centroids`` (2.1 -> 4, 4 -> 8, 0.3 -> 0.5).

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
    >>> from skxclust.nn.pair_batch import pair_scale
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
    appearance: Appearance | None = None,
) -> torch.Tensor:
    """Energy ``||x_b - S(params[b, k]) mu_k||^2 + penalty_b v^T G v`` of given warps
    (with ``appearance``: of the warped centroid at its optimal gain and offset, plus
    their penalty; see :mod:`skxclust.nn.appearance`).

    Parameters
    ----------
    samples : Tensor of shape (B, P)
    centroids : Tensor of shape (K, P)
    model : WarpModel
    params : Tensor of shape (B, K, n_basis, D)
    penalty : float or Tensor of shape (B,)
    bending_weight, affine_weight : float, default=1.0
    appearance : Appearance, optional

    Returns
    -------
    Tensor of shape (B, K)

    Examples
    --------
    At the identity warp the energy is the squared distance:

    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.pair_batch import warp_energy
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
    images = pair_images(centroids, model, appearance)
    flat = params.transpose(0, 1).reshape(n_clusters * n_samples, model.n_params)
    weight = per_pair_weight(penalty, n_samples, n_clusters, samples)
    pairs = PairBatch(images, samples[None], model, weight,
                      model.penalty_gram(bending_weight, affine_weight).to(samples.dtype),
                      appearance)
    return pairs.energy(flat.to(samples.dtype))[0].reshape(n_clusters, n_samples).T
