"""The background of images: the value a warp brings in from outside the frame.

A warped centroid is resampled with zero padding, so a centroid moved by a warp shows 0
where it left the frame. For images whose background is not 0 (inverted digits, a
spectrogram in decibels, any data with an offset) ST K-means computes in the frame
``X - b`` with ``b`` the images' background: the weighted median of the rows' border
pixels. It moves with an offset of the data (``b(X + c) = b(X) + c``) and scales with it,
so the warped distances do neither; on data whose border is mostly 0 (digits, MNIST) it
is exactly 0 and nothing moves.
"""

from __future__ import annotations

import torch

from ._checks import check_shape

__all__ = ["border_pixels", "background_level", "weighted_median"]


def border_pixels(image_shape: tuple[int, ...]) -> torch.Tensor:
    """Flat indices (int64) of the outermost ring of pixels of images of ``image_shape``.

    ``image_shape`` is ``(H, W)`` or ``(C, H, W)`` (every channel's ring, in channel
    order); images narrower than 3 pixels are all border.

    Examples
    --------
    >>> border_pixels((3, 3)).tolist()
    [0, 1, 2, 3, 5, 6, 7, 8]
    """
    *channels, height, width = image_shape
    ring = torch.ones(height, width, dtype=torch.bool)
    ring[1:-1, 1:-1] = False
    n_channels = channels[0] if channels else 1
    return torch.nonzero(ring.expand(n_channels, height, width).reshape(-1)).reshape(-1)


def weighted_median(values: torch.Tensor, weights: torch.Tensor) -> float:
    """The lower weighted median of ``values`` (n, m): each of row ``i``'s m values
    weighs ``weights[i]`` (n,), non-negative and not all zero.

    The smallest value ``v`` whose values at or below it weigh at least half the total,
    so an integer weight equals that many repeated rows. Computed in float64.

    Examples
    --------
    >>> weighted_median(torch.tensor([[0.0, 1.0], [5.0, 5.0]]), torch.tensor([1.0, 3.0]))
    5.0
    """
    check_shape(values, "values", "(N, M)")
    check_shape(weights, "weights", "(N,)", N=(values.shape[0], "values.shape[0]"))
    flat = values.to(torch.float64).reshape(-1)
    mass = weights.to(torch.float64)[:, None].expand(values.shape).reshape(-1)
    order = torch.argsort(flat, stable=True)
    cumulative = torch.cumsum(mass[order], dim=0)
    index = int(torch.searchsorted(cumulative, cumulative[-1] / 2))
    return float(flat[order[min(index, flat.shape[0] - 1)]])


def background_level(X: torch.Tensor, weights: torch.Tensor, pixels: torch.Tensor) -> float:
    """The background of the images X (n, P): the :func:`weighted_median` of their
    ``pixels`` (int64 indices, e.g. :func:`border_pixels`), each row weighing
    ``weights[i]`` (n,).

    Examples
    --------
    >>> X = torch.zeros(2, 9) + 3.0
    >>> X[:, 4] = 10.0  # ink in the middle of 3 x 3 images
    >>> background_level(X, torch.ones(2), border_pixels((3, 3)))
    3.0
    """
    check_shape(X, "X", "(N, P)")
    return weighted_median(X[:, pixels.to(X.device)], weights)
