r"""Appearance transformations of a warped centroid: gain, offset and stroke thickness.

Pure torch; no scikit-learn import. Shapes: ``P`` pixels, ``C`` appearance channels,
any leading pair axes ``...``.

A warp moves the ink of a centroid but cannot make it darker, fainter, bolder or thinner:
a bold and a faint stroke of one shape differ by more than any warp can fix. An
:class:`Appearance` lets the warped centroid of every (sample, centroid) pair take a
linear transformation of its own,

.. math::  a = g\,S_v\mu + \sum_{j \ge 1} u_j\,S_v b_j(\mu) + o,
   \qquad
   E = \lVert x - a\rVert^2 + \lambda\,v^\top G v
       + \kappa\,\bigl(\lambda (g - 1)^2 + \lambda \textstyle\sum_j u_j^2 + P o^2\bigr),

where :math:`\lambda` is the pair's warp-penalty weight (the sample's contrast
:math:`\lVert x - \bar x\rVert^2` in ST K-means), :math:`\kappa` the appearance penalty
and :math:`b_j(\mu)` images derived from the centroid (the *channels* beyond the first):

- ``"intensity"``: no extra channel; a gain :math:`g` and an offset :math:`o`;
- ``"intensity+thickness"``: also the half morphological gradient
  :math:`b_1 = (\max_{3\times3}\mu - \min_{3\times3}\mu) / 2`, about :math:`|\nabla\mu|`
  times one pixel, so :math:`\mu + t\,b_1` is a dilation of the strokes by :math:`t`
  pixels for :math:`t > 0` and an erosion for :math:`t < 0` (to first order: a flat
  dilation moves each level set outwards, raising a stroke profile :math:`f` to about
  :math:`f + t|f'|`); :math:`u_1 = g\,t`.

The penalty pulls the gain to 1 and the thickness to 0 on the scale of the sample's
contrast, the offset to 0 on the scale of a per-pixel level; every term scales with the
data squared, so the model stays scale invariant. For a fixed warp the coefficients are a
small ridge regression of the sample on the warped channels and a constant, solved in
closed form (:meth:`Appearance.fit`). The warp solver minimises the energy with them
profiled out (variable projection): every energy it evaluates is the minimum over them,
so Levenberg-Marquardt's acceptance test still never lets it rise, and its Gauss-Newton
step uses the Jacobian of the transformed centroid, :math:`S_v` applied to
:math:`g\mu + \sum_j u_j b_j` (by the envelope theorem, the gradient of the profiled
energy is that Jacobian times the residual).

With the fitted coefficients fixed, :math:`a` is affine in the warped centroid, so NEON's
effective centroid is :math:`a` (relevance still sums to the evidence), and the centroid
update is a least-squares solve on the rows :math:`(x_i - o_i - \sum_j u_{ij} S_i
b_j(\mu)) / g_i` with weights :math:`g_i^2` (:func:`intensity_rows`; the channels
:math:`b_j` are taken at the centroid being updated).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .warps import WarpModel, channel_rows, warp_images

__all__ = ["APPEARANCES", "Appearance", "intensity_rows", "spd_inverse", "thickness_channel",
           "warp_channels"]

APPEARANCES = ("intensity", "intensity+thickness")


def thickness_channel(images: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """Half the morphological gradient of each image: ``(max - min) / 2`` over the 3 x 3
    neighbourhood of every pixel (1 x 3 along a ``1 x n`` signal), edges replicated.

    Parameters
    ----------
    images : Tensor of shape (K, P)
    shape : (H, W) with ``H * W == P``, or (C, 1, L) for the channels of a signal

    Returns
    -------
    Tensor of shape (K, P)

    Examples
    --------
    A one-pixel line gains a one-pixel rim on both sides:

    >>> import torch
    >>> from skxclust.nn.appearance import thickness_channel
    >>> line = torch.tensor([[0.0, 0.0, 1.0, 0.0, 0.0]])
    >>> thickness_channel(line, (1, 5)).tolist()
    [[0.0, 0.5, 0.5, 0.5, 0.0]]
    """
    rows, (height, width) = channel_rows(images, shape)  # (C, 1, L): each channel
    grid = rows.reshape(-1, 1, height, width)
    kernel = (3 if height > 1 else 1, 3 if width > 1 else 1)
    pad = (kernel[1] // 2, kernel[1] // 2, kernel[0] // 2, kernel[0] // 2)
    padded = F.pad(grid, pad, mode="replicate")
    top = F.max_pool2d(padded, kernel, stride=1)
    bottom = -F.max_pool2d(-padded, kernel, stride=1)
    return ((top - bottom) / 2).reshape(images.shape)


class Appearance:
    """A linear appearance transformation of the warped centroid, with its penalty.

    Parameters
    ----------
    kind : {"intensity", "intensity+thickness"}
        The transformation (see the module docstring).
    penalty : float
        :math:`\\kappa` > 0: weight of the penalty relative to the pair's warp-penalty
        weight ``lambda``. Large values pin the identity (``g = 1``, no thickness change,
        ``o = 0``); small ones let the centroid take any level, contrast and thickness.

    Attributes
    ----------
    n_channels : int
        ``C``: the centroid and the images derived from it (1 or 2).

    Examples
    --------
    A centroid at half the sample's intensity is matched by a gain of about 2:

    >>> import torch
    >>> from skxclust.nn.appearance import Appearance
    >>> x = torch.tensor([[0.0, 2.0, 4.0, 2.0]])
    >>> coef, offset = Appearance("intensity", 1e-3).fit((x / 2)[:, None], x,
    ...                                                 torch.tensor([8.0]))
    >>> round(float(coef[0, 0]), 2), round(float(offset[0]), 2)
    (2.0, 0.0)
    """

    def __init__(self, kind: str, penalty: float):
        if kind not in APPEARANCES:
            raise ValueError(f"kind must be one of {APPEARANCES}, got {kind!r}.")
        if not penalty > 0:
            raise ValueError(f"penalty must be > 0, got {penalty!r}.")
        self.kind = kind
        self.penalty = float(penalty)
        self.n_channels = 2 if kind == "intensity+thickness" else 1

    def __repr__(self) -> str:
        return f"Appearance({self.kind!r}, penalty={self.penalty!r})"

    def channels(self, images: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        """The channels of each centroid, (K, C, P): the centroid, then the images
        derived from it."""
        if self.n_channels == 1:
            return images[:, None]
        return torch.stack([images, thickness_channel(images, shape)], dim=1)

    def fit(self, warped: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor):
        r"""The coefficients (..., C) and offset (...) minimising
        ``||x - sum_c coef_c w_c - o||^2`` plus the penalty, for the warped channels
        ``warped`` (..., C, P), the samples ``targets`` (broadcastable to (..., P)) and the
        pairs' warp-penalty weights ``weight`` (broadcastable to (...), >= 0).

        The normal equations of the ``C + 1`` unknowns (a ridge regression towards
        ``(1, 0, ..., 0)``) are positive definite (the offset's diagonal exceeds its
        column's Gram entry by ``kappa P``; a ridge far below any data term keeps the
        other coefficients at their prior when the sample is constant and the centroid
        blank). The offset is eliminated first and the ``C x C`` system left is solved in
        closed form.
        """
        n_pixels, n_channels = warped.shape[-1], warped.shape[-2]
        # the offset eliminated first (o = (1^T x - sum_c coef_c 1^T w_c) / (P (1 + kappa))),
        # the C x C system of the coefficients then solved in closed form: no batched
        # LAPACK call per pair in the solver's inner loop
        level = n_pixels * (1.0 + self.penalty)
        sums = warped.sum(-1)  # (..., C)
        total = targets.sum(-1)[..., None]  # (..., 1)
        squares = torch.linalg.vecdot(warped[..., 0, :], warped[..., 0, :])  # (...)
        ridge = self.penalty * weight + 1e-12 * squares + torch.finfo(warped.dtype).tiny
        rhs = torch.linalg.vecdot(warped, targets[..., None, :]) - sums * total / level
        rhs[..., 0] += ridge  # the gain's prior mean is 1
        if n_channels == 1:
            a = squares - sums[..., 0] ** 2 / level + ridge
            coef = (rhs[..., 0] / a)[..., None]
        else:
            gram = warped @ warped.transpose(-1, -2) - sums[..., :, None] * sums[..., None, :] \
                / level
            diag = torch.diagonal(gram, dim1=-2, dim2=-1)
            diag += ridge[..., None]
            coef = _solve_spd(gram, rhs)
        offset = (total[..., 0] - (coef * sums).sum(-1)) / level
        return coef, offset

    def normal_matrix(self, warped: torch.Tensor, weight: torch.Tensor):
        """The normal matrix (..., C + 1, C + 1) of the coefficients and the offset, prior
        included, and the prior precision of each coefficient (...), for the warped
        channels (..., C, P) and the pairs' warp-penalty weights (...)."""
        n_pixels, n_channels = warped.shape[-1], warped.shape[-2]
        lead = warped.shape[:-2]
        gram = warped.new_empty(*lead, n_channels + 1, n_channels + 1)
        gram[..., :n_channels, :n_channels] = warped @ warped.transpose(-1, -2)
        sums = warped.sum(-1)
        gram[..., :n_channels, n_channels] = sums
        gram[..., n_channels, :n_channels] = sums
        gram[..., n_channels, n_channels] = n_pixels * (1.0 + self.penalty)
        ridge = self.penalty * weight.expand(lead) \
            + 1e-12 * gram[..., 0, 0] + torch.finfo(warped.dtype).tiny
        diag = torch.diagonal(gram, dim1=-2, dim2=-1)
        diag[..., :n_channels] += ridge[..., None]
        return gram, ridge

    def posterior(self, warped: torch.Tensor, weight: torch.Tensor):
        """The Gauss-Newton Hessian of the energy in the coefficients and the offset
        (..., C + 1, C + 1), prior included, and the log-determinant of the prior alone
        (...): what the Laplace volume of the fit (``warp_log_volume``) adds."""
        gram, ridge = self.normal_matrix(warped, weight)
        n_pixels, n_channels = warped.shape[-1], warped.shape[-2]
        log_prior = n_channels * torch.log(ridge) + torch.log(
            torch.tensor(n_pixels * self.penalty, dtype=warped.dtype, device=warped.device))
        return gram, log_prior

    def cost(self, coef: torch.Tensor, offset: torch.Tensor, weight: torch.Tensor,
             n_pixels: int) -> torch.Tensor:
        """The penalty ``kappa (lambda ((g - 1)^2 + sum_j u_j^2) + P o^2)`` (...)."""
        shifted = coef.clone()
        shifted[..., 0] -= 1.0
        return self.penalty * (weight * (shifted * shifted).sum(-1)
                               + n_pixels * offset * offset)

    def transformed(self, warped: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor):
        """The transformed centroid ``sum_c coef_c w_c + o`` (..., P), the coefficients
        (..., C) and the penalty (...) of every pair, from the warped channels (..., C, P)."""
        coef, offset = self.fit(warped, targets, weight)
        fitted = torch.addcmul(offset[..., None], coef[..., :1], warped[..., 0, :])
        for channel in range(1, warped.shape[-2]):
            fitted.addcmul_(coef[..., channel:channel + 1], warped[..., channel, :])
        return fitted, coef, self.cost(coef, offset, weight, warped.shape[-1])


def warp_channels(appearance: Appearance, images: torch.Tensor, model: WarpModel,
                  warps: torch.Tensor) -> torch.Tensor:
    """The appearance channels of ``images`` warped by ``warps``.

    Parameters
    ----------
    appearance : Appearance
    images : Tensor of shape (K, P)
    model : WarpModel
    warps : Tensor of shape (B, K, n_basis, D)

    Returns
    -------
    Tensor of shape (B, K, C, P)

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.appearance import Appearance, warp_channels
    >>> model = make_warp_model((1, 5), n_landmarks=4, transform="affine")
    >>> line = torch.tensor([[0.0, 0.0, 1.0, 0.0, 0.0]])
    >>> warps = torch.zeros(1, 1, 2, 1)  # the identity
    >>> warp_channels(Appearance("intensity+thickness", 1.0), line, model, warps).tolist()
    [[[[0.0, 0.0, 1.0, 0.0, 0.0], [0.0, 0.5, 0.5, 0.5, 0.0]]]]
    """
    channels = appearance.channels(images, model.input_shape)  # (K, C, P)
    n_images, n_channels = channels.shape[:2]
    params = warps.transpose(0, 1).repeat_interleave(n_channels, dim=0)
    warped = warp_images(channels.reshape(n_images * n_channels, -1), model, params)
    return warped.reshape(n_images, n_channels, *warped.shape[1:]).permute(2, 0, 1, 3)


def spd_inverse(matrix: torch.Tensor) -> torch.Tensor:
    """The inverse of symmetric positive definite (..., n, n) matrices: closed form for
    n = 2, Cholesky otherwise.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.appearance import spd_inverse
    >>> spd_inverse(torch.tensor([[2.0, 1.0], [1.0, 2.0]])) * 3
    tensor([[ 2., -1.],
            [-1.,  2.]])
    """
    if matrix.shape[-1] != 2:
        return torch.cholesky_inverse(torch.linalg.cholesky(matrix))
    a, b, d = matrix[..., 0, 0], matrix[..., 0, 1], matrix[..., 1, 1]
    det = a * d - b * b
    return torch.stack([torch.stack([d, -b], -1), torch.stack([-b, a], -1)], -2) \
        / det[..., None, None]


def _solve_spd(matrix: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """``matrix^-1 rhs`` for symmetric positive definite (..., n, n) matrices: Cramer's
    rule for n = 2, Cholesky otherwise."""
    if matrix.shape[-1] != 2:
        return torch.cholesky_solve(rhs[..., None], torch.linalg.cholesky(matrix))[..., 0]
    a, b, d = matrix[..., 0, 0], matrix[..., 0, 1], matrix[..., 1, 1]
    det = a * d - b * b
    return torch.stack([d * rhs[..., 0] - b * rhs[..., 1],
                        a * rhs[..., 1] - b * rhs[..., 0]], dim=-1) / det[..., None]


def intensity_rows(X: torch.Tensor, gain: torch.Tensor, offset: torch.Tensor,
                   weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The rows and weights that make the centroid update see a gain and an offset.

    ``sum_i w_i ||x_i - g_i S_i mu - o_i||^2 = sum_i w_i g_i^2 ||(x_i - o_i) / g_i - S_i
    mu||^2``, so the update of the untransformed fit on the rows ``(x_i - o_i) / g_i``
    with weights ``w_i g_i^2`` is the update for the fixed transforms (a gain of
    magnitude below 1e-6 is raised to 1e-6: such a row weighs nothing). ``offset`` may
    be per pixel, (N, P), e.g. with the thickness channel's share folded in.

    Parameters
    ----------
    X : Tensor of shape (N, P)
    gain : Tensor of shape (N,)
    offset : Tensor of shape (N,) or (N, P)
    weights : Tensor of shape (N,)

    Returns
    -------
    rows : Tensor of shape (N, P)
    weights : Tensor of shape (N,)

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.appearance import intensity_rows
    >>> rows, w = intensity_rows(torch.tensor([[3.0, 5.0]]), torch.tensor([2.0]),
    ...                          torch.tensor([1.0]), torch.tensor([1.0]))
    >>> rows.tolist(), w.tolist()
    ([[1.0, 2.0]], [4.0])
    """
    sign = torch.where(gain < 0, -1.0, 1.0).to(gain.dtype)
    safe = torch.where(gain.abs() < 1e-6, 1e-6 * sign, gain)
    if offset.dim() == 1:
        offset = offset[:, None]
    return (X - offset) / safe[:, None], weights * gain * gain
