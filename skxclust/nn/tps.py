r"""Thin-plate-spline (TPS) and affine warps written as one linear map of landmark offsets.

Pure torch; no scikit-learn import. Coordinates follow :func:`torch.nn.functional.grid_sample`
with ``align_corners=True``: ``x`` (width) first, ``y`` (height) second, both normalised to
``[-1, 1]`` so that ``-1`` and ``1`` are the centres of the border pixels.

TPS with ``l = g*g`` control points :math:`c_j` on a uniform grid of ``[-1, 1]^2`` and the
radial basis :math:`U(r) = r^2 \log r^2` (``U(0) = 0``). The interpolant of landmark
values :math:`v` (``l x D``) is :math:`f(p) = \sum_j w_j U(\lVert p - c_j\rVert) + a^\top
[1, p]` with the coefficients given by the block system::

    | K    P | | w |   | v |        K_ij = U(||c_i - c_j||)      (l, l)
    |        | |   | = |   |        P_i  = [1, c_i]              (l, D + 1)
    | P^T  0 | | a |   | 0 |

For the output pixels :math:`p` (``HW x D``) and :math:`R = [U(\lVert p - c_j\rVert), 1, p]`
the matrix ``M = R L^{-1}[:, :l]`` (``HW x l``) is computed **once**; a warp whose landmarks
move by ``delta`` (``l x D``) then has the sampling grid ``p + M @ delta``. TPS reproduces
affine maps, so ``M @ c = p``, and ``M`` restricted to the control points is the identity.

1-D signals (``1 x n`` images) use the 1-D polyharmonic spline :math:`U(r) = |r|^3` (the
natural cubic spline) with ``g`` knots along the signal and ``P = [1, x]``.

Affine warps use the basis ``[p, 1]`` (``HW x (D + 1)``): the grid is ``p + [p, 1] @ theta``
with ``theta`` (``(D + 1) x D``) zero at the identity. Every warp here is therefore
``grid = p + basis @ params``; :func:`warp_basis` stacks the bases of a transform family.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "pixel_grid",
    "control_points",
    "tps_kernel_matrix",
    "tps_system_matrix",
    "tps_interpolation_matrix",
    "tps_bending_energy_matrix",
    "tps_penalty_matrices",
    "affine_basis",
    "warp_basis",
    "warp_grid",
    "to_sampling_grid",
    "grid_size_from_landmarks",
]


def _linspace(n: int, dtype, device) -> torch.Tensor:
    """``n`` points evenly spaced in ``[-1, 1]`` (``[-1]`` when ``n == 1``)."""
    return torch.linspace(-1.0, 1.0, n, dtype=dtype, device=device)


def pixel_grid(
    shape: tuple[int, int], ndim: int = 2, dtype=torch.float32, device=None
) -> torch.Tensor:
    """Normalised coordinates of the pixel centres, in row-major order.

    Parameters
    ----------
    shape : (H, W)
        Image height and width.
    ndim : {1, 2}
        2: ``(x, y)`` per pixel. 1: the coordinate along the single non-trivial axis (the
        width when ``H == 1``, else the height; ``H`` or ``W`` must then be 1).
    dtype, device : torch dtype and device of the result.

    Returns
    -------
    Tensor of shape (H * W, ndim)
    """
    height, width = shape
    if ndim == 1:
        if min(height, width) != 1:
            raise ValueError(f"a 1-D grid needs H == 1 or W == 1, got shape {shape}.")
        return _linspace(height * width, dtype, device)[:, None]
    ys = _linspace(height, dtype, device)
    xs = _linspace(width, dtype, device)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([gx.reshape(-1), gy.reshape(-1)], dim=1)


def control_points(grid_size: int, ndim: int = 2, dtype=torch.float32, device=None) -> torch.Tensor:
    """Control points on a uniform ``grid_size`` (per axis) grid of ``[-1, 1]^ndim``.

    Returns
    -------
    Tensor of shape (grid_size ** ndim, ndim)
        In ``(x, y)`` order for ``ndim == 2``.
    """
    if grid_size < 2:
        raise ValueError(f"grid_size must be >= 2, got {grid_size}.")
    if ndim == 1:
        return _linspace(grid_size, dtype, device)[:, None]
    return pixel_grid((grid_size, grid_size), 2, dtype, device)


def tps_kernel_matrix(points: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
    r"""Radial basis :math:`U(\lVert p_i - c_j\rVert)` between two point sets.

    :math:`U(r) = r^2 \log r^2` in 2-D (``U(0) = 0``) and :math:`U(r) = |r|^3` in 1-D.

    Parameters
    ----------
    points : Tensor of shape (N, D)
    centers : Tensor of shape (L, D)

    Returns
    -------
    Tensor of shape (N, L)
    """
    diff = points[:, None, :] - centers[None, :, :]
    r2 = (diff * diff).sum(-1)
    if points.shape[1] == 1:
        return r2 * r2.sqrt()
    return torch.where(r2 > 0, r2 * torch.log(r2.clamp_min(1e-300)), torch.zeros_like(r2))


def _poly(points: torch.Tensor) -> torch.Tensor:
    """``[1, p]`` of shape (N, D + 1)."""
    return torch.cat([torch.ones_like(points[:, :1]), points], dim=1)


def tps_system_matrix(centers: torch.Tensor) -> torch.Tensor:
    """The TPS block matrix ``L = [[K, P], [P^T, 0]]``.

    Parameters
    ----------
    centers : Tensor of shape (L, D)

    Returns
    -------
    Tensor of shape (L + D + 1, L + D + 1)
    """
    kernel = tps_kernel_matrix(centers, centers)
    poly = _poly(centers)
    zeros = torch.zeros(poly.shape[1], poly.shape[1], dtype=centers.dtype, device=centers.device)
    return torch.cat([torch.cat([kernel, poly], 1), torch.cat([poly.T, zeros], 1)], 0)


def tps_interpolation_matrix(points: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
    """``M = R L^{-1}[:, :l]``: values at ``points`` of the TPS through landmark values.

    Solved once in float64, returned in the dtype of ``points``.

    Parameters
    ----------
    points : Tensor of shape (N, D)
        Where the interpolant is evaluated (e.g. :func:`pixel_grid`).
    centers : Tensor of shape (L, D)
        Control points (e.g. :func:`control_points`).

    Returns
    -------
    Tensor of shape (N, L)
        ``f(points) = M @ v`` for landmark values ``v`` of shape (L, D').
    """
    p64, c64 = points.to(torch.float64), centers.to(torch.float64)
    rhs = torch.cat([tps_kernel_matrix(p64, c64), _poly(p64)], dim=1)  # (N, L + D + 1)
    # L is symmetric, so M^T = (L^{-1} R^T)[:l].
    sol = torch.linalg.solve(tps_system_matrix(c64), rhs.T)
    return sol[: centers.shape[0]].T.contiguous().to(points.dtype)


def tps_bending_energy_matrix(centers: torch.Tensor) -> torch.Tensor:
    """``(L^{-1})[:l, :l]``: the bending energy of the TPS through ``v`` is ``v^T E v``.

    Positive semi-definite; its null space holds the affine maps. Computed in float64 and
    returned in the dtype of ``centers``.

    Returns
    -------
    Tensor of shape (L, L)
    """
    n = centers.shape[0]
    inv = torch.linalg.inv(tps_system_matrix(centers.to(torch.float64)))
    energy = inv[:n, :n]
    return (0.5 * (energy + energy.T)).to(centers.dtype)


def tps_penalty_matrices(
    centers: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Quadratic forms on landmark displacements that split a warp into bending and pose.

    For landmark displacements ``delta`` (``L x D``), ``trace(delta^T B delta)`` is the
    bending energy of the TPS through them (Bookstein 1989: ``B`` is the upper-left
    ``L x L`` block of ``L^{-1}``; zero exactly for affine displacements), and
    ``a = C delta`` with ``C = (P^T P)^{-1} P^T``, ``P = [1, c]``, is the least-squares
    affine part (``(D + 1) x D``: a translation row, then the linear map), so
    ``trace(delta^T C^T C delta) = ||a||^2``. For the displacements sampled from one smooth
    field both converge as the landmark grid is refined, so a penalty built from them means
    the same at every number of landmarks (unlike ``||delta||^2``, which grows with it).

    Parameters
    ----------
    centers : Tensor of shape (L, D)
        Control points.

    Returns
    -------
    bending : Tensor of shape (L, L)
        ``B``, positive semi-definite, null on ``span(P)``.
    affine : Tensor of shape (L, L)
        ``C^T C``.
    affine_landmarks : Tensor of shape (L, D + 1)
        ``P``: the displacements of an affine map with coefficients ``a`` are ``P a``.

    Examples
    --------
    >>> import torch
    >>> c = control_points(4, 2, torch.float64)
    >>> bending, affine, P = tps_penalty_matrices(c)
    >>> a = torch.tensor([[0.1, -0.2], [0.3, 0.0], [0.05, 0.2]], dtype=torch.float64)
    >>> delta = P @ a  # an affine displacement: no bending, ||a||^2 of pose
    >>> float(torch.trace(delta.T @ bending @ delta)) < 1e-12
    True
    >>> round(float(torch.trace(delta.T @ affine @ delta)), 6) == round(float((a**2).sum()), 6)
    True
    """
    c64 = centers.to(torch.float64)
    poly = _poly(c64)
    affine_part = torch.linalg.solve(poly.T @ poly, poly.T)  # (D + 1, L)
    dtype = centers.dtype
    return (tps_bending_energy_matrix(c64).to(dtype=dtype),
            (affine_part.T @ affine_part).to(dtype=dtype), poly.to(dtype=dtype))


def affine_basis(points: torch.Tensor) -> torch.Tensor:
    """``[p, 1]``: displacement basis of affine warps, ``grid = p + [p, 1] @ theta``.

    Parameters
    ----------
    points : Tensor of shape (N, D)

    Returns
    -------
    Tensor of shape (N, D + 1)
    """
    return torch.cat([points, torch.ones_like(points[:, :1])], dim=1)


def warp_basis(
    points: torch.Tensor, centers: torch.Tensor, transform: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Displacement basis of a warp family: ``grid = points + basis @ params``.

    Parameters
    ----------
    points : Tensor of shape (N, D)
        Output pixel coordinates.
    centers : Tensor of shape (L, D)
        Control points.
    transform : {"tps", "affine", "affine+tps"}
        ``"tps"``: the ``L`` landmark offsets. ``"affine"``: the ``D + 1`` rows of
        ``theta``. ``"affine+tps"``: the affine rows first, then the landmark offsets.

    Returns
    -------
    basis : Tensor of shape (N, n_basis)
        The basis at ``points``.
    landmark_basis : Tensor of shape (L, n_basis)
        The same basis at the control points: ``landmark_basis @ params`` is the
        displacement of every landmark (used to penalise the warp size).
    """
    if transform == "tps":
        eye = torch.eye(centers.shape[0], dtype=points.dtype, device=points.device)
        return tps_interpolation_matrix(points, centers), eye
    if transform == "affine":
        return affine_basis(points), affine_basis(centers)
    if transform == "affine+tps":
        tps, tps_at_landmarks = warp_basis(points, centers, "tps")
        return (
            torch.cat([affine_basis(points), tps], 1),
            torch.cat([affine_basis(centers), tps_at_landmarks], 1),
        )
    raise ValueError(
        f"transform={transform!r} is not supported; use 'tps', 'affine' or 'affine+tps'."
    )


def warp_grid(points: torch.Tensor, basis: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
    """Sampling grids ``points + basis @ params`` of a batch of warps.

    Parameters
    ----------
    points : Tensor of shape (N, D)
    basis : Tensor of shape (N, n_basis)
    params : Tensor of shape (B, n_basis, D)

    Returns
    -------
    Tensor of shape (B, N, D)
    """
    batch, n_basis, dim = params.shape
    # One GEMM for the whole batch: (N, n_basis) @ (n_basis, B * D).
    flat = params.permute(1, 0, 2).reshape(n_basis, batch * dim)
    disp = (basis @ flat).reshape(points.shape[0], batch, dim).permute(1, 0, 2)
    return points + disp


def to_sampling_grid(grid: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """Turn ``(..., H * W, D)`` coordinates into a ``grid_sample`` grid ``(..., H, W, 2)``.

    1-D coordinates (``D == 1``) are placed on the non-trivial axis of ``shape``; the
    other coordinate is 0 (any value samples the single row or column).
    """
    height, width = shape
    lead = grid.shape[:-2]
    if grid.shape[-1] == 1:
        zero = torch.zeros_like(grid)
        pair = (grid, zero) if height == 1 else (zero, grid)
        grid = torch.cat(pair, dim=-1)
    return grid.reshape(*lead, height, width, 2)


def grid_size_from_landmarks(n_landmarks: int) -> int:
    """``g`` with ``g * g == n_landmarks``; raises ValueError otherwise (or if ``g < 2``)."""
    grid = math.isqrt(int(n_landmarks))
    if grid * grid != n_landmarks or grid < 2:
        raise ValueError(
            f"n_landmarks={n_landmarks!r} must be a perfect square >= 4 "
            "(4, 9, 16, 25, ...): the landmarks form a g x g grid."
        )
    return grid
