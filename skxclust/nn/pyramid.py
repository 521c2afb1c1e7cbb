r"""A coarse level for the warp fits: images at half resolution on the same coordinates.

Pure torch; no scikit-learn import. Warps act on normalised coordinates (``[-1, 1]`` spans
the image, ``align_corners=True``), so the same warp parameters move an image of any
resolution the same way: a :class:`~skxclust.nn.warps.WarpModel` built for the coarse
shape warps a coarse image exactly as the full-resolution model warps the full image.
:func:`downsample_images` produces that coarse image: each coarse pixel, at normalised
position ``u``, is the tent-weighted (linear, anti-aliased) average of the full-resolution
pixels around ``u``, so no pixel's ink is lost between coarse samples.

A coarse pixel stands for about ``P / P_coarse`` full-resolution pixels, so a squared
residual summed over the coarse image is about ``P_coarse / P`` times the one summed over
the full image; :func:`skxclust.nn.fit_warps` scales the warp penalty by the same ratio,
which keeps the balance of data and penalty, hence the optimum, nearly the same.
"""

from __future__ import annotations

import functools

import torch

from ._checks import check_shape

__all__ = ["coarse_shape", "downsample_images"]

# A coarse level is used only when every warped axis keeps at least this many pixels: a
# thin-plate spline with a 4 x 4 landmark grid has little to fit on fewer.
MIN_COARSE_SIDE = 10


def coarse_shape(shape: tuple[int, ...], min_side: int = MIN_COARSE_SIDE
                 ) -> tuple[int, ...] | None:
    """The half-resolution shape of ``shape``, or None when it would be too small.

    Each axis longer than 1 pixel is halved (rounded up); a 1-D signal (``H == 1`` or
    ``W == 1``) keeps its trivial axis, a signal of channels ``(C, 1, L)`` its channels.

    Parameters
    ----------
    shape : (H, W) or (C, 1, L)
    min_side : int, default=10
        None is returned when a halved axis would have fewer pixels.

    Returns
    -------
    (h, w), (C, 1, l) or None

    Examples
    --------
    >>> from skxclust.nn.pyramid import coarse_shape
    >>> coarse_shape((28, 28)), coarse_shape((1, 150)), coarse_shape((8, 8))
    ((14, 14), (1, 75), None)
    >>> coarse_shape((3, 1, 150))
    (3, 1, 75)
    """
    if len(shape) == 3:
        time = coarse_shape(tuple(shape[1:]), min_side)
        return None if time is None else (int(shape[0]), *time)
    halved = tuple(1 if side == 1 else (int(side) + 1) // 2 for side in shape)
    if any(side != 1 and half < min_side for side, half in zip(shape, halved)):
        return None
    return halved


@functools.lru_cache(maxsize=32)
def _tent_matrix(n: int, m: int, dtype, device) -> torch.Tensor:
    """(m, n) weights of ``m`` evenly spaced samples of ``n`` pixels on ``[-1, 1]``.

    Row ``i`` holds a tent (linear) filter centred at the full-resolution position of
    coarse pixel ``i``, as wide as the coarse spacing, normalised to sum to 1.
    """
    if m == n:
        return torch.eye(n, dtype=dtype, device=device)
    spacing = (n - 1) / (m - 1)
    centre = torch.arange(m, dtype=torch.float64) * spacing
    pixel = torch.arange(n, dtype=torch.float64)
    weight = (1.0 - (pixel[None, :] - centre[:, None]).abs() / spacing).clamp_min(0.0)
    return (weight / weight.sum(1, keepdim=True)).to(dtype=dtype, device=device)


def downsample_images(images: torch.Tensor, shape: tuple[int, int],
                      coarse: tuple[int, int]) -> torch.Tensor:
    """Flattened images of ``shape`` resampled to ``coarse`` (tent-filtered).

    Parameters
    ----------
    images : Tensor of shape (N, H * W)
    shape : (H, W)
    coarse : (h, w)
        From :func:`coarse_shape`.

    Returns
    -------
    Tensor of shape (N, h * w)
        Same dtype and device; a constant image stays the same constant.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.pyramid import downsample_images
    >>> spike = torch.tensor([[0.0, 0.0, 0.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.0]])  # 1 x 9
    >>> downsample_images(spike, (1, 9), (1, 5)).tolist()  # the spike's mass is kept
    [[0.0, 0.0, 2.0, 0.0, 0.0]]
    >>> downsample_images(torch.full((1, 36), 3.0), (6, 6), (3, 3)).tolist()
    [[3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]]
    """
    height, width = (int(s) for s in shape)
    check_shape(images, "images", "(N, P)", P=(height * width, "H * W"))
    rows = _tent_matrix(height, coarse[0], images.dtype, images.device)  # cached, read-only
    cols = _tent_matrix(width, coarse[1], images.dtype, images.device)
    out = rows @ images.reshape(-1, height, width) @ cols.T
    return out.reshape(images.shape[0], coarse[0] * coarse[1])
