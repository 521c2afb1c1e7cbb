r"""Monotone 1-D warps: a signal's warp must keep time order.

Pure torch; no scikit-learn import. A 1-D warp samples the centroid at
:math:`g(p) = p + u(p)`; it keeps the order of events (no folding back in time, as DTW,
MSM and KASBA's alignments never do) when :math:`g` increases strictly from one sample to
the next. The slopes of :math:`g` are linear in the warp parameters, so the
Levenberg–Marquardt solver (:func:`~skxclust.nn.warp_solver.levenberg_marquardt`) keeps
every 1-D warp monotone by :func:`monotone_steps`: a step that would fold the warp is
shortened to go at most ``keep`` (0.9) of the way to where a slope would reach
``min_slope`` (1e-3), just short of a fold (the
fraction-to-the-boundary rule of interior-point methods), and is then kept only where it
lowers the energy, as every step. From a monotone start (the identity, a translation)
every fitted warp is therefore monotone, and a fit pressed against the constraint still
moves along it instead of stalling. :func:`folds` tells which warps of a batch fold.
"""

from __future__ import annotations

import torch

from .warps import WarpModel

__all__ = ["MIN_SLOPE", "folds", "monotone_steps", "warp_slopes"]

# The smallest slope of a fitted 1-D warp (1 at the identity): far below any slope a
# signal's alignment uses (the clusters' fits on the UCR sets of bench_timeseries stay
# above 0.01), far above rounding.
MIN_SLOPE = 1e-3


def _rates(model: WarpModel) -> torch.Tensor:
    """The differences of the basis between neighbouring samples over their spacing,
    ``(n - 1, n_basis)``: the warps' slopes are ``1 + flat @ rates.T`` (built once, in
    ``model.cache``)."""
    key = ("monotone rates",)
    if key not in model.cache:
        n = model.length  # the channels of a signal share the first one's times
        points, basis = model.points[:n, 0], model.basis[:n]
        model.cache[key] = (basis[1:] - basis[:-1]) / (points[1:] - points[:-1])[:, None]
    return model.cache[key]


def warp_slopes(model: WarpModel, flat: torch.Tensor) -> torch.Tensor:
    """``g(p_{i+1}) - g(p_i)`` over the sample spacing, for every warp: 1 everywhere at the
    identity, at most 0 where the warp folds.

    Parameters
    ----------
    model : WarpModel
        1-D.
    flat : Tensor of shape (N, n_params)

    Returns
    -------
    Tensor of shape (N, n - 1)

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.monotone import warp_slopes
    >>> model = make_warp_model((1, 5), n_landmarks=4, transform="affine")
    >>> warp_slopes(model, torch.tensor([[0.5, 0.2]])).tolist()  # stretch by 1.5, shift
    [[1.5, 1.5, 1.5, 1.5]]
    """
    if model.ndim != 1:
        raise ValueError(f"warp slopes need a 1-D warp model, got shape {model.shape}.")
    rates = _rates(model)
    return 1.0 + flat.to(rates.dtype) @ rates.T


def folds(model: WarpModel, flat: torch.Tensor) -> torch.Tensor:
    """Which 1-D warps fold: their sampling positions fail to increase strictly.

    Parameters
    ----------
    model : WarpModel
        1-D.
    flat : Tensor of shape (N, n_params)

    Returns
    -------
    BoolTensor of shape (N,)

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.monotone import folds
    >>> model = make_warp_model((1, 5), n_landmarks=4, transform="affine")
    >>> folds(model, torch.tensor([[0.5, 0.2], [-1.5, 0.0]])).tolist()  # the second reverses
    [False, True]
    """
    return (warp_slopes(model, flat) <= 0).any(-1)


def monotone_steps(model: WarpModel, flat: torch.Tensor, step: torch.Tensor,
                   keep: float = 0.9, min_slope: float = MIN_SLOPE) -> torch.Tensor:
    """Steps shortened so that no warp folds: ``flat + t * step`` with the largest
    ``t <= 1`` that goes at most ``keep`` of the way to the nearest slope ``min_slope``.

    Parameters
    ----------
    model : WarpModel
        1-D.
    flat : Tensor of shape (N, n_params)
        Monotone warps.
    step : Tensor of shape (N, n_params)
    keep : float, default=0.9
        Fraction of the way to the boundary a step may go.
    min_slope : float, default=MIN_SLOPE
        The boundary: the slopes of the warps (1 at the identity) stay above it, so they
        stay positive through rounding too (a fit pressed against the constraint
        approaches it geometrically).

    Returns
    -------
    Tensor of shape (N, n_params)
        ``t * step`` per warp; ``step`` itself where it does not fold the warp.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.monotone import monotone_steps, warp_slopes
    >>> model = make_warp_model((1, 5), n_landmarks=4, transform="affine")
    >>> flat = torch.zeros(1, 2)
    >>> step = torch.tensor([[-3.0, 0.0]])  # would reverse time (slope -2)
    >>> short = monotone_steps(model, flat, step)
    >>> round(short[0, 0].item(), 3), warp_slopes(model, flat + short).min().item() > 0
    (-0.899, True)
    """
    rates = _rates(model)
    if rates.shape[0] == 0:  # a single sample: nothing can fold
        return step
    n_warps = flat.shape[0]
    # the slopes of the warps and their changes along the steps in one product, (2 N, n - 1)
    both = torch.cat([flat, step]).to(rates.dtype) @ rates.T
    # in place: a fit calls this every step on (N, n - 1) arrays, and fresh temporaries of
    # that size cost more in page faults than in arithmetic
    room = both[:n_warps].add_(1.0 - min_slope).clamp_min_(torch.finfo(both.dtype).tiny)
    # the fraction of the room to the boundary a whole step uses, along each falling slope
    # (0 along the others); the step may go ``keep`` of the way to the nearest boundary
    used = both[n_warps:].neg_().clamp_min_(0.0).div_(room).amax(-1)
    # (``used`` may be -0.0 where no slope falls: compared, not divided into)
    scale = torch.where(used > keep, keep / used, 1.0)
    return step * scale.to(step.dtype)[:, None]
