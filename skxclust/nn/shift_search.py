r"""Global shift search for 1-D warps: the best translation of every pair, exhaustively.

Pure torch; no scikit-learn import. Shapes: ``B`` samples, ``K`` centroids, ``n`` samples
per signal (a ``1 x n`` image), ``n_params`` parameters per warp.

A warp fit by Levenberg–Marquardt from the identity follows the local slope of the
energy: a centroid whose step or peak sits far from the sample's is pulled by features
that happen to overlap, not by the distant match (the local minima of Trace's shifted
steps). For a translation by a whole number of samples ``s`` the energy of a pair is
known for every ``s`` at once from one cross-correlation,

.. math::  E(s) = \lVert x\rVert^2 - 2\sum_i x_i\,\mu_{i+s}
           + \sum_{0 \le i + s < n} \mu_{i+s}^2 + \lambda\, q\, (s h)^2,

(zero padding outside the signal, as the warp's resampling; :math:`h = 2 / (n - 1)` the
sample spacing in normalised coordinates, :math:`q` the warp penalty of a unit
translation), so the global minimum over ``s`` is found exactly, as k-Shape's
cross-correlation does, and the warp fit starts from it: :func:`shift_start`. ``s = 0``
is among the candidates, so the start is never worse than the identity.

A whole shift puts every sample exactly on a pixel of the centroid, where linear
interpolation has a kink: the Jacobian's one-sided derivative there would be chosen by
the rounding of the warp's coordinates, which depends on the thread count and on the
shape of the batch. The fit therefore starts a hair to the right of it
(:func:`off_the_knots`), where the side is always the same.
"""

from __future__ import annotations

import torch

from ._checks import check_pair_args
from .warps import WarpModel

__all__ = ["fft_length", "off_the_knots", "shift_energies", "shift_start", "translation_params"]


def translation_params(model: WarpModel) -> torch.Tensor:
    """The parameters (n_params,) of the translation by 1 (normalised coordinates) along
    the warped axis of a 1-D ``model`` (built once, in ``model.cache``)."""
    key = ("translation",)
    if key not in model.cache:
        if model.ndim != 1:
            raise ValueError(f"a shift search needs a 1-D warp model, got shape {model.shape}.")
        basis = model.basis.to(torch.float64)
        ones = torch.ones(basis.shape[0], 1, dtype=torch.float64, device=basis.device)
        if int(torch.linalg.matrix_rank(basis)) < basis.shape[1]:  # fewer samples than
            # basis functions, or dependent ones ("affine+tps": its TPS holds the affine
            # part): the minimum-norm solution. torch's CPU lstsq read uninitialized memory
            # there: a 1 x 2 signal's translation came out as [1, 0, 1] or [1, 0, 0] at
            # random, and a 1 x 17 "affine+tps" one (rank 3 of 5) about once in 3,000 calls
            # after other fits was no translation at all (CI failed on it once)
            unit = (torch.linalg.pinv(basis) @ ones)[:, 0]
        else:
            unit = torch.linalg.lstsq(basis, ones).solution[:, 0]
        model.cache[key] = unit.to(model.basis.dtype)
    return model.cache[key]


def fft_length(minimum: int) -> int:
    """The smallest length at least ``minimum`` whose only prime factors are 2, 3 and 5.

    A cross-correlation of two signals of ``n`` samples needs an FFT of at least
    ``2 n - 1`` points; ``2 n`` itself can have a large prime factor (OSULeaf's 854 =
    2 x 7 x 61), which made the FFT 3.5 times slower than at the 5-smooth 864.

    Examples
    --------
    >>> from skxclust.nn.shift_search import fft_length
    >>> fft_length(853), fft_length(7), fft_length(1)
    (864, 8, 1)
    """
    length = max(int(minimum), 1)
    while True:
        rest = length
        for prime in (2, 3, 5):
            while rest % prime == 0:
                rest //= prime
        if rest == 1:
            return length
        length += 1


def shift_energies(samples: torch.Tensor, centroids: torch.Tensor,
                   channels: int = 1) -> torch.Tensor:
    """Data term ``||x_b - shift_s mu_k||^2`` of every pair for every whole shift.

    Parameters
    ----------
    samples : Tensor of shape (B, channels * n)
    centroids : Tensor of shape (K, channels * n)
    channels : int, default=1
        Signals of ``channels`` channels of ``n`` samples each (channel after channel),
        all shifted together: the energies are summed over the channels.

    Returns
    -------
    Tensor of shape (K, B, 2 n - 1)
        Entry ``s + n - 1`` is the energy of the centroid sampled at ``i + s`` (zero
        outside the signal), for ``s = -(n - 1) ... n - 1``.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.shift_search import shift_energies
    >>> x = torch.tensor([[0.0, 1.0, 0.0, 0.0]])
    >>> mu = torch.tensor([[0.0, 0.0, 1.0, 0.0]])  # the same peak, one sample later
    >>> e = shift_energies(x, mu)[0, 0]
    >>> int(e.argmin()) - 3, float(e.min())  # shift s = +1 matches it exactly
    (1, 0.0)
    """
    n = samples.shape[1] // channels
    size = fft_length(2 * n - 1)  # no wrap-around: lags -(n - 1) ... n - 1 all distinct
    fx = torch.fft.rfft(samples.reshape(samples.shape[0], channels, n), size)  # (B, C, F)
    fm = torch.fft.rfft(centroids.reshape(centroids.shape[0], channels, n), size)
    # the cross-spectrum of every pair, summed over the channels: (K, B, F)
    spectrum = fx.conj()[None] * fm[:, None]  # (K, B, C, F)
    spectrum = spectrum[:, :, 0] if channels == 1 else spectrum.sum(2)
    corr = torch.fft.irfft(spectrum, size)  # (K, B, size): lag s at s mod size
    lags = torch.cat([corr[..., size - n + 1:], corr[..., :n]], -1)  # s = -(n-1) ... n-1
    squares = (centroids * centroids).reshape(centroids.shape[0], channels, n).sum(1)
    total = torch.cumsum(squares, -1)
    # sum of mu_j^2 over j in [s, n - 1] for s >= 0, over [0, n - 1 + s] for s < 0
    head = total[:, :-1]  # s = -(n - 1) ... -1: sums up to n - 1 + s
    tail = total[:, -1:] - torch.cat([total.new_zeros(total.shape[0], 1), total[:, :-1]], -1)
    overlap = torch.cat([head, tail], -1)  # (K, 2n - 1)
    norms = (samples * samples).sum(-1)  # (B,)
    return norms[None, :, None] - 2 * lags + overlap[:, None, :]


def shift_start(
    samples: torch.Tensor,
    centroids: torch.Tensor,
    model: WarpModel,
    *,
    penalty: float | torch.Tensor,
    gram: torch.Tensor,
) -> torch.Tensor:
    """The translation of lowest penalised energy of every pair, as warp parameters.

    Parameters
    ----------
    samples : Tensor of shape (B, P)
    centroids : Tensor of shape (K, P)
    model : WarpModel
        1-D (a ``1 x n`` or ``n x 1`` image, or ``C`` channels of ``n`` samples).
    penalty : float or Tensor of shape (B,)
        Weight of the warp penalty of each sample.
    gram : Tensor of shape (n_params, n_params)
        The penalty matrix (``model.penalty_gram``).

    Returns
    -------
    Tensor of shape (K * B, n_params)
        Image-major, as :func:`~skxclust.nn.warp_solver.fit_warps` orders its pairs.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.shift_search import shift_start, translation_params
    >>> from skxclust.nn.warps import warp_images
    >>> model = make_warp_model((1, 9), n_landmarks=4, transform="tps", dtype=torch.float64)
    >>> mu = torch.zeros(1, 9, dtype=torch.float64); mu[0, 6] = 1.0
    >>> x = torch.zeros(1, 9, dtype=torch.float64); x[0, 2] = 1.0  # 4 samples earlier
    >>> start = shift_start(x, mu, model, penalty=1e-3, gram=model.penalty_gram())
    >>> warped = warp_images(mu, model, start.reshape(1, 1, model.n_basis, 1))
    >>> torch.allclose(warped[0, 0], x[0])
    True
    """
    check_pair_args(model, samples, centroids, penalty)
    n = model.length
    unit = translation_params(model).to(samples.dtype)
    if n < 2:  # a single sample: no shift to search
        return samples.new_zeros(centroids.shape[0] * samples.shape[0], unit.shape[0])
    per_unit = unit @ gram.to(samples.dtype) @ unit  # penalty of the translation by 1
    step = 2.0 / (n - 1)
    lags = torch.arange(-(n - 1), n, dtype=samples.dtype, device=samples.device) * step
    if not isinstance(penalty, torch.Tensor):
        penalty = samples.new_full((samples.shape[0],), float(penalty))
    cost = penalty.to(samples.dtype)[None, :, None] * per_unit * (lags * lags)
    best = (shift_energies(samples, centroids, model.channels) + cost).argmin(-1)  # (K, B)
    return (lags[best].reshape(-1, 1) * unit[None]).contiguous()


def off_the_knots(start: torch.Tensor, model: WarpModel) -> torch.Tensor:
    """Translations ``start`` (N, n_params) moved right by ``max(1e-6, 1000 eps)`` of a
    sample spacing, far more than the rounding of the warp's coordinates.

    A whole shift samples the centroid exactly at its pixels, where the derivative of
    linear interpolation jumps; the Levenberg–Marquardt Jacobian would take the left or
    the right one by rounding noise (so a fit's outcome would depend on the thread
    count and on which pairs share its batch). Just right of the pixels the derivative is
    the right-hand difference for every pair, and the energy moves by that fraction of a
    sample only.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.shift_search import off_the_knots, translation_params
    >>> model = make_warp_model((1, 9), n_landmarks=4, transform="tps", dtype=torch.float64)
    >>> unit = translation_params(model)  # the translation by 1 (normalised coordinates)
    >>> start = 0.25 * unit[None]  # by 0.25 = 2 / (9 - 1): a whole shift of one sample
    >>> moved = off_the_knots(start, model)
    >>> samples = float((moved - start)[0] @ unit / (unit @ unit)) * (9 - 1) / 2
    >>> 0 < samples < 1e-5  # a millionth of a sample further right
    True
    """
    n = model.length
    if n < 2:
        return start
    eps = torch.finfo(start.dtype).eps
    nudge = max(1e-6, 1e3 * eps) * 2.0 / (n - 1)  # in normalised coordinates
    return start + nudge * translation_params(model).to(start.dtype)[None]
