"""Samples brought into the frame of their centroid: the inverse of a fitted warp.

Pure torch; no scikit-learn import. A warp of :mod:`skxclust.nn.warps` samples the
centroid at ``g(q) = q + u(q)`` for every output pixel ``q``; :func:`invert_warps` finds
the grids of ``g^{-1}`` and :func:`unwarp_images` resamples a sample through them (what
:meth:`skxclust.SpatialTransformerKMeans.align` shows).
"""

from __future__ import annotations

import torch

from ._checks import check_warp_args
from .warps import BILINEAR, BORDER, ZEROS, WarpModel, warp_grids

__all__ = ["invert_warps", "unwarp_images"]


def invert_warps(model: WarpModel, params: torch.Tensor, n_iter: int = 30) -> torch.Tensor:
    """Grids of the inverse warps, by the fixed-point iteration ``p = q - u(p)``.

    A warp sends output pixel ``q`` to ``g(q) = q + u(q)``; the inverse grid ``h`` solves
    ``g(h(q)) = q``. The iteration converges when the displacement is a contraction
    (``|grad u| < 1``, i.e. moderate warps); ``u`` is interpolated bilinearly, and where an
    iterate leaves the image it takes the displacement of the nearest edge pixel (border
    padding: a warp that is a translation has the exact inverse there too).

    Parameters
    ----------
    model : WarpModel
    params : Tensor of shape (B, n_basis, D)
    n_iter : int

    Returns
    -------
    Tensor of shape (B, H, W, 2)

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.warp_inverse import invert_warps
    >>> model = make_warp_model((1, 5), n_landmarks=4, transform="affine")
    >>> inverse = invert_warps(model, torch.tensor([[[0.0], [0.5]]]))  # shift by +0.5
    >>> inverse[0, 0, :, 0].tolist()  # the inverse grid shifts by -0.5
    [-1.5, -1.0, -0.5, 0.0, 0.5]
    """
    check_warp_args(model, params=params)
    n = params.shape[0]
    height, width = model.shape
    identity = model.flat_points.reshape(1, height, width, 2)
    disp = warp_grids(model, params) - identity  # (B, H, W, 2)
    field = disp.permute(0, 3, 1, 2).contiguous()  # (B, 2, H, W)
    inverse = identity - disp
    for _ in range(n_iter):
        u = torch.grid_sampler_2d(field, inverse, BILINEAR, BORDER, True)
        inverse = identity - u.permute(0, 2, 3, 1)
    return inverse.reshape(n, height, width, 2)


def unwarp_images(images: torch.Tensor, model: WarpModel, params: torch.Tensor) -> torch.Tensor:
    """Bring each sample into the frame of the centroid it was aligned with.

    Parameters
    ----------
    images : Tensor of shape (B, P)
        Samples, in their own frame.
    model : WarpModel
    params : Tensor of shape (B, n_basis, D)
        Warp of the centroid onto each sample (as fitted by
        :func:`~skxclust.nn.warp_solver.fit_warps`).

    Returns
    -------
    Tensor of shape (B, P)
        ``x_i(g_i^{-1}(q))``: sample ``i`` resampled on the centroid's pixel grid (0 where
        the inverse falls outside the sample).

    Examples
    --------
    Undo a shift by one sample of a 1-D signal:

    >>> import torch
    >>> from skxclust.nn import make_warp_model, unwarp_images, warp_images
    >>> model = make_warp_model((1, 5), n_landmarks=4, transform="affine")
    >>> params = torch.tensor([[[0.0], [0.5]]])
    >>> mu = torch.tensor([[0.0, 1.0, 2.0, 1.0, 0.0]])
    >>> x = warp_images(mu, model, params[None])[0]  # the centroid, shifted
    >>> unwarp_images(x, model, params).tolist()
    [[0.0, 1.0, 2.0, 1.0, 0.0]]
    """
    check_warp_args(model, images)
    check_warp_args(model, params=params, B=(images.shape[0], "images.shape[0]"))
    n = images.shape[0]
    height, width = model.shape
    inverse = invert_warps(model, params.to(images.dtype))
    out = torch.grid_sampler_2d(images.reshape(n, 1, height, width), inverse, BILINEAR,
                                ZEROS, True)
    return out.reshape(n, height * width)
