r"""The centroid update of ST K-means for fixed warps.

Pure torch; no scikit-learn import. Shapes: ``N`` samples, ``K`` centroids, ``P = H * W``
pixels; warps and operators come from :mod:`skxclust.nn.warps`. The warps themselves (the
regularised fit of every (sample, centroid) pair) come from :mod:`skxclust.nn.warp_solver`.

The centroid is warped onto the sample (the sample itself is never resampled), so for
fixed warps the distortion of cluster :math:`k`,

.. math::  \sum_{i \in k} w_i\, \lVert x_i - S_i \mu_k\rVert^2,

is quadratic in :math:`\mu_k` (:math:`S_i` the bilinear resampling operator of member
:math:`i`'s warp). :func:`solve_centroids` returns its minimiser: conjugate gradients on the
normal equations :math:`(\sum_i w_i S_i^\top S_i)\,\mu_k = \sum_i w_i S_i^\top x_i`, started
from the better of the current centroid and the adjoint-weighted average
:math:`\sum_i w_i S_i^\top x_i / \sum_i w_i S_i^\top 1`. Its pieces are sums over samples
(:func:`adjoint_sums`, :func:`normal_sums`), so streaming and blockwise fits reduce them
and call :func:`solve_normal_equations`.
"""

from __future__ import annotations

import torch

from ._checks import check_shape, check_warp_args
from .warps import WarpModel, warp_adjoint, warp_normal

__all__ = [
    "adjoint_sums",
    "covered",
    "normal_sums",
    "solve_centroids",
    "solve_normal_equations",
]


def _check_member_args(model, X, params, labels, weights, X_name="X", X_dims="(B, P)"):
    """Shapes of the members' rows, warps, labels and weights."""
    rows = (params.shape[0], "params.shape[0]")
    check_warp_args(model, X, images_name=X_name, images_dims=X_dims,
                     **({} if X_dims == "(K, P)" else {"B": rows}))
    check_warp_args(model, params=params)
    check_shape(labels, "labels", "(B,)", B=rows)
    if weights is not None:
        check_shape(weights, "weights", "(B,)", B=rows)


def adjoint_sums(
    X: torch.Tensor,
    model: WarpModel,
    params: torch.Tensor,
    labels: torch.Tensor,
    n_clusters: int,
    weights: torch.Tensor | None = None,
    *,
    batch_size: int = 256,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sufficient statistics of the centroid update: ``sum_i w_i S_i^T x_i`` and
    ``sum_i w_i S_i^T 1`` per cluster, in chunks of ``batch_size`` rows.

    Both are sums over samples, so the statistics of disjoint row blocks add up (streaming
    and blockwise fits reduce them). Their ratio is the adjoint-weighted average.

    Parameters
    ----------
    X : Tensor of shape (N, P)
    model : WarpModel
    params : Tensor of shape (N, n_basis, D)
    labels : LongTensor of shape (N,)
    n_clusters : int
    weights : Tensor of shape (N,), optional
    batch_size : int

    Returns
    -------
    rhs : Tensor of shape (n_clusters, P)
    cover : Tensor of shape (n_clusters, P)

    Examples
    --------
    Identity warps of two 1-D signals of 3 samples, both in cluster 0:

    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.centroid_update import adjoint_sums
    >>> model = make_warp_model((1, 3), n_landmarks=4, transform="affine")
    >>> X = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    >>> params, labels = torch.zeros(2, 2, 1), torch.tensor([0, 0])
    >>> rhs, cover = adjoint_sums(X, model, params, labels, n_clusters=1)
    >>> rhs.round(decimals=4).tolist(), cover.round(decimals=4).tolist()
    ([[4.0, 4.0, 4.0]], [[2.0, 2.0, 2.0]])
    """
    _check_member_args(model, X, params, labels, weights)
    rhs = X.new_zeros(n_clusters, X.shape[1])
    cover = X.new_zeros(n_clusters, X.shape[1])
    for i in range(0, X.shape[0], batch_size):
        sl = slice(i, i + batch_size)
        s, c = warp_adjoint(X[sl], model, params[sl], labels[sl], n_clusters,
                            None if weights is None else weights[sl])
        rhs += s
        cover += c
    return rhs, cover


def normal_sums(
    centroids: torch.Tensor,
    model: WarpModel,
    params: torch.Tensor,
    labels: torch.Tensor,
    weights: torch.Tensor | None = None,
    *,
    batch_size: int = 256,
) -> torch.Tensor:
    """``sum_{i in k} w_i S_i^T S_i mu_k`` per cluster (the normal operator), in chunks.

    Parameters
    ----------
    centroids : Tensor of shape (K, P)
    model : WarpModel
    params : Tensor of shape (N, n_basis, D)
    labels : LongTensor of shape (N,)
    weights : Tensor of shape (N,), optional
    batch_size : int

    Returns
    -------
    Tensor of shape (K, P)

    Examples
    --------
    Identity warps of two 1-D signals of 3 samples, both in cluster 0:

    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.centroid_update import normal_sums
    >>> model = make_warp_model((1, 3), n_landmarks=4, transform="affine")
    >>> X = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    >>> params, labels = torch.zeros(2, 2, 1), torch.tensor([0, 0])
    >>> normal_sums(torch.ones(1, 3), model, params, labels).round(decimals=4).tolist()
    [[2.0, 2.0, 2.0]]
    """
    _check_member_args(model, centroids, params, labels, weights, X_name="centroids",
                       X_dims="(K, P)")
    out = torch.zeros_like(centroids)
    for i in range(0, params.shape[0], batch_size):
        sl = slice(i, i + batch_size)
        out += warp_normal(centroids, model, params[sl], labels[sl],
                           None if weights is None else weights[sl])
    return out


def covered(cover: torch.Tensor) -> torch.Tensor:
    """Pixels some member's warp samples: ``cover`` above 1e-6 of its cluster's maximum.

    Parameters
    ----------
    cover : Tensor of shape (K, P)
        From :func:`adjoint_sums`.

    Returns
    -------
    BoolTensor of shape (K, P)

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.centroid_update import covered
    >>> covered(torch.tensor([[2.0, 0.0, 1e-9]])).tolist()
    [[True, False, False]]
    """
    check_shape(cover, "cover", "(K, P)")
    return cover > 1e-6 * cover.amax(dim=-1, keepdim=True).clamp_min(1e-300)


def solve_normal_equations(
    rhs: torch.Tensor,
    cover: torch.Tensor,
    start: torch.Tensor,
    normal,
    n_iter: int = 10,
) -> torch.Tensor:
    """Preconditioned CG on ``A mu = rhs`` per row, started from the better of ``start``
    and the average ``rhs / cover``; never worse than ``start`` (see solve_centroids).

    Every operation acts on each row (cluster) separately, so rows of several independent
    problems (e.g. restarts) can be stacked.

    Parameters
    ----------
    rhs, cover : Tensor of shape (K, P)
        From :func:`adjoint_sums`.
    start : Tensor of shape (K, P)
    normal : callable
        ``normal(v)`` applies the normal operator ``A`` (:func:`normal_sums` summed over
        all members) to ``v`` of shape (K, P).
    n_iter : int

    Returns
    -------
    Tensor of shape (K, P)

    Examples
    --------
    Identity warps of two 1-D signals of 3 samples, both in cluster 0:

    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.centroid_update import adjoint_sums, normal_sums, solve_normal_equations
    >>> model = make_warp_model((1, 3), n_landmarks=4, transform="affine")
    >>> X = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    >>> params, labels = torch.zeros(2, 2, 1), torch.tensor([0, 0])
    >>> rhs, cover = adjoint_sums(X, model, params, labels, n_clusters=1)
    >>> mu = solve_normal_equations(rhs, cover, torch.zeros(1, 3),
    ...                             lambda v: normal_sums(v, model, params, labels))
    >>> mu.round(decimals=4).tolist()  # the mean of the two members
    [[2.0, 2.0, 2.0]]
    """
    check_shape(rhs, "rhs", "(K, P)")
    like_rhs = {"K": (rhs.shape[0], "rhs.shape[0]"), "P": (rhs.shape[1], "rhs.shape[1]")}
    check_shape(cover, "cover", "(K, P)", **like_rhs)
    check_shape(start, "start", "(K, P)", **like_rhs)
    seen = covered(cover)
    average = torch.where(seen, rhs / cover.clamp_min(1e-300), start)

    def objective(mu, a_mu):  # distortion up to a constant, per cluster
        return (mu * (a_mu - 2.0 * rhs)).sum(dim=1)

    a_start, a_avg = normal(start), normal(average)
    use_avg = (objective(average, a_avg) <= objective(start, a_start))[:, None]
    mu = torch.where(use_avg, average, start)
    residual = rhs - torch.where(use_avg, a_avg, a_start)
    inv_diag = torch.where(seen, 1.0 / cover.clamp_min(1e-300), torch.zeros_like(cover))
    z = residual * inv_diag
    direction = z
    rz = (residual * z).sum(dim=1, keepdim=True)
    for _ in range(n_iter):
        a_dir = normal(direction)
        curvature = (direction * a_dir).sum(dim=1, keepdim=True)
        alpha = torch.where(curvature > 0, rz / curvature.clamp_min(1e-300), 0.0)
        mu = mu + alpha * direction
        residual = residual - alpha * a_dir
        z = residual * inv_diag
        rz_new = (residual * z).sum(dim=1, keepdim=True)
        beta = torch.where(rz > 0, rz_new / rz.clamp_min(1e-300), 0.0)
        direction = z + beta * direction
        rz = rz_new
    return mu


def solve_centroids(
    X: torch.Tensor,
    model: WarpModel,
    params: torch.Tensor,
    labels: torch.Tensor,
    start: torch.Tensor,
    weights: torch.Tensor | None = None,
    *,
    n_iter: int = 10,
    batch_size: int = 256,
) -> torch.Tensor:
    """Centroids minimising ``sum_i w_i ||x_i - S_i mu_{l_i}||^2`` for fixed warps.

    Preconditioned conjugate gradients on the normal equations
    ``(sum_i w_i S_i^T S_i) mu = sum_i w_i S_i^T x_i``, one independent CG per cluster,
    with the diagonal preconditioner ``1 / sum_i w_i S_i^T 1``. Each cluster starts from
    whichever of ``start`` and the adjoint-weighted average has the lower distortion, and
    CG never increases it, so the result is never worse than ``start``. Pixels that no
    member's warp samples keep their value from ``start``. It is
    :func:`adjoint_sums` followed by :func:`solve_normal_equations` with
    :func:`normal_sums` as the operator.

    Parameters
    ----------
    X : Tensor of shape (N, P)
    model : WarpModel
    params : Tensor of shape (N, n_basis, D)
        Warp of each sample's centroid onto the sample.
    labels : LongTensor of shape (N,)
    start : Tensor of shape (K, P)
        Current centroids.
    weights : Tensor of shape (N,), optional
    n_iter : int
        CG iterations; 0 returns the better of ``start`` and the weighted average.
    batch_size : int
        Samples per operator application chunk (memory O(batch_size * P)).

    Returns
    -------
    Tensor of shape (K, P)

    Examples
    --------
    Identity warps of two 1-D signals of 3 samples, both in cluster 0:

    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.centroid_update import solve_centroids
    >>> model = make_warp_model((1, 3), n_landmarks=4, transform="affine")
    >>> X = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    >>> params, labels = torch.zeros(2, 2, 1), torch.tensor([0, 0])
    >>> solve_centroids(X, model, params, labels, torch.zeros(1, 3)).round(decimals=4).tolist()
    [[2.0, 2.0, 2.0]]
    """
    _check_member_args(model, X, params, labels, weights)
    check_warp_args(model, start, images_name="start", images_dims="(K, P)")
    rhs, cover = adjoint_sums(X, model, params, labels, start.shape[0], weights,
                              batch_size=batch_size)

    def normal(v):
        return normal_sums(v, model, params, labels, weights, batch_size=batch_size)

    return solve_normal_equations(rhs, cover, start, normal, n_iter)
