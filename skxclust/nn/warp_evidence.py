r"""The Laplace (Occam) volume of fitted warps: how much of the warp the data determine.

Pure torch; no scikit-learn import. Used by the model's log-evidence
(:meth:`skxclust.SpatialTransformerKMeans.score`); see :func:`warp_log_volume`.
"""

from __future__ import annotations

import math

import torch

from ._checks import check_pair_args, check_warp_args
from .appearance import Appearance
from .pair_batch import Coordinates, PairBatch, pair_images, per_pair_weight
from .warps import WarpModel, make_warp_model

__all__ = ["PENALTY_FLOOR", "laplace_log_evidence", "penalty_scale", "pixel_noise_variance",
           "row_contrast", "warp_log_volume"]

# A row's warp penalty scale is its contrast, but at least this fraction of the centroids'
# mean contrast (:func:`penalty_scale`). Without the floor a constant row had no warp
# penalty at all: its warp was free, and its Occam volume (that of a flat prior) cost its
# score about 11,000 on digits, so that three blank rows among 300 held-out digits turned
# the ranking of n_landmarks by ``score`` upside down. No row of the digits or of MNIST-5k
# is near it (the least contrast of a row is 0.85 of the fitted centroids' mean on the
# digits, 0.47 of the Euclidean k-means centroids' on MNIST-5k).
PENALTY_FLOOR = 1e-2


def warp_log_volume(
    samples: torch.Tensor,
    images: torch.Tensor,
    model: WarpModel,
    params: torch.Tensor,
    penalty: float | torch.Tensor,
    bending_weight: float = 1.0,
    affine_weight: float = 1.0,
    appearance: Appearance | None = None,
) -> torch.Tensor:
    r"""``log det(J^T J + lambda G) - log det(lambda G)`` of each fitted pair (Occam factor).

    With Gaussian pixel noise of variance :math:`\sigma^2` and the Gaussian warp prior
    whose precision is :math:`\lambda G / \sigma^2`, the energy of
    :func:`~skxclust.nn.warp_solver.fit_warps` is :math:`2\sigma^2` times the negative log
    posterior, and the Laplace approximation of the evidence of a sample is

    .. math::  \log p(x) \approx -\frac{E(v^*)}{2\sigma^2} - \frac12\,\mathrm{this}
               - \frac P2 \log(2\pi\sigma^2).

    The term grows with the number of warp parameters the data actually determine, so
    it makes warps of different flexibility comparable (a more flexible warp must lower
    the energy by more than it adds here).

    It is taken in float64 (a float32 ``model`` is built again in float64) on the range of
    ``G`` (parameters that move no pixel count in neither determinant), and it does not
    depend on the data's units: samples and images times ``c`` with the penalty times
    ``c**2`` give the same volume.

    Parameters
    ----------
    samples : Tensor of shape (N, P)
    images : Tensor of shape (N, P)
        The image warped onto each sample (e.g. ``centroids[labels]``).
    model : WarpModel
    params : Tensor of shape (N, n_basis, D)
        The fitted warps (from :func:`~skxclust.nn.warp_solver.fit_warps`).
    penalty, bending_weight, affine_weight : see :func:`~skxclust.nn.warp_solver.fit_warps`.
    appearance : Appearance, optional
        The appearance coefficients and offset of every pair are parameters too: their
        volume (with their prior, and their coupling with the warp) is included.

    Returns
    -------
    Tensor of shape (N,), float64

    Examples
    --------
    A stiffer warp prior leaves less for the data to determine:

    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.warp_evidence import warp_log_volume
    >>> model = make_warp_model((1, 6), n_landmarks=4, transform="affine",
    ...                         dtype=torch.float64)
    >>> x = torch.tensor([[0.0, 1.0, 2.0, 2.0, 1.0, 0.0]], dtype=torch.float64)
    >>> params = torch.zeros(1, 2, 1, dtype=torch.float64)
    >>> soft, stiff = (warp_log_volume(x, x, model, params, penalty=p) for p in (0.1, 10.0))
    >>> bool(soft[0] > stiff[0] > 0)
    True
    """
    check_pair_args(model, samples, images, penalty, centroids_name="images",
                     centroids_dims="(B, P)")
    check_warp_args(model, params=params, B=(samples.shape[0], "samples.shape[0]"))
    n = samples.shape[0]
    dtype = torch.float64
    model = float64_model(model)  # the basis and G in float64 for the determinant
    gram = model.penalty_gram(bending_weight, affine_weight)
    # a zero penalty (a constant row) as the smallest positive one: a volume of the limit
    weight = per_pair_weight(penalty, n, 1, samples).to(dtype).clamp_min(1e-300)
    pairs = PairBatch(pair_images(images.detach().to(dtype), model, appearance),
                      samples.detach().to(dtype)[:, None], model, weight, gram, appearance)
    flat = params.detach().reshape(n, -1).to(dtype)
    _, residual = pairs.energy(flat)
    hess, _ = pairs.normal_system(flat, residual, Coordinates(model))
    # Both determinants on the range of G: parameters that move no pixel ("affine+tps"
    # holds the affine maps twice) are in the null space of G and of J alike, and count
    # in neither the prior nor the posterior volume.
    eig_prior, vectors = torch.linalg.eigh(gram)
    floor = 1e-12 * eig_prior.abs().max().clamp_min(1e-300)
    kept = eig_prior > floor
    basis = vectors[:, kept]
    log_prior = torch.log(eig_prior[kept]).sum() + basis.shape[1] * torch.log(weight)
    eig_post = torch.linalg.eigvalsh(basis.T @ hess @ basis)
    # the posterior is at least the prior (weight * G) on the range of G: its floor is
    # G's floor times the weight, so the volume keeps its value at any scale of the data
    # (samples and images times c, the penalty times c^2)
    volume = torch.log(eig_post.clamp_min(floor * weight[:, None])).sum(-1) - log_prior
    if appearance is not None:
        volume = volume + _appearance_log_volume(pairs, flat)
    return volume


def _appearance_log_volume(pairs: PairBatch, flat) -> torch.Tensor:
    """``log det M - log det(prior)`` (N,) of the appearance coefficients and offset.

    :meth:`PairBatch.normal_system` returns the warp's Hessian with the coefficients
    eliminated (the Schur complement of their normal matrix ``M`` in the joint
    Gauss-Newton Hessian of the warp, the coefficients and the offset), so the joint
    log-determinant is that of the warp's block plus ``log det M``: the coefficients'
    volume and their coupling with the warp are both counted."""
    appearance = pairs.appearance
    assert appearance is not None
    warped = pairs.warped(flat)[:, 0]  # (N, C, P): one warp per image
    matrix, log_prior = appearance.posterior(warped, pairs.weight)
    return torch.linalg.slogdet(matrix)[1] - log_prior


def float64_model(model: WarpModel) -> WarpModel:
    """``model`` built again in float64 (itself if it is float64; kept in its cache).

    Built, not cast: a float32 build rounds ``G``, which lifts its null space (the affine
    maps that ``"affine+tps"`` holds twice) to about 1e-9 of its largest eigenvalue, above
    the determinant's floor, and a cast keeps that rounding.
    """
    if model.basis.dtype == torch.float64:
        return model
    if model.n_landmarks is None:
        raise ValueError("the warp model must come from make_warp_model (its n_landmarks "
                         "is needed to build it in float64).")
    if "float64_model" not in model.cache:  # built once per model (about 0.1 s)
        model.cache["float64_model"] = make_warp_model(
            model.input_shape, model.n_landmarks, model.transform, torch.float64,
            model.basis.device)
    return model.cache["float64_model"]


def row_contrast(X: torch.Tensor) -> torch.Tensor:
    """``c(x) = ||x - mean(x)||^2`` of every row (n,): a sample's contrast, the scale of
    its warp penalty and, with the contrast noise model, of its pixel noise variance.

    >>> import torch
    >>> row_contrast(torch.tensor([[1.0, 3.0], [5.0, 5.0]])).tolist()
    [2.0, 0.0]
    """
    centred = X - X.mean(dim=1, keepdim=True)
    return (centred * centred).sum(dim=1)


def penalty_scale(X: torch.Tensor, centers: torch.Tensor,
                  floor: float = PENALTY_FLOOR) -> torch.Tensor:
    """The scale of each row's warp and appearance penalty (n,): its contrast
    :func:`row_contrast`, at least ``floor`` times the mean contrast of ``centers``.

    Both scale as the square of the data (and ignore its offset), so the penalties stay
    invariant to the scale and offset of the data; the floor keeps a constant or nearly
    constant row's warp regularised (see :data:`PENALTY_FLOOR`).

    Parameters
    ----------
    X : Tensor of shape (n, P)
    centers : Tensor of shape (K, P)
    floor : float, default=PENALTY_FLOOR

    Returns
    -------
    Tensor of shape (n,)

    Examples
    --------
    >>> import torch
    >>> centers = torch.tensor([[0.0, 20.0], [0.0, 0.0]])  # contrasts 200 and 0
    >>> penalty_scale(torch.tensor([[1.0, 3.0], [5.0, 5.0]]), centers).tolist()
    [2.0, 1.0]
    """
    floor_value = floor * row_contrast(centers).mean()
    return torch.maximum(row_contrast(X), floor_value.to(X.dtype))


def pixel_noise_variance(total_energy: float, n_rows: int, n_pixels: int) -> float:
    """The maximum-likelihood pixel noise variance of rows fitted with the summed
    (minimised) energy ``total_energy``: its mean per row and pixel, at least 1e-300 (rows
    fitted exactly leave no noise, and the evidence divides by it).

    >>> pixel_noise_variance(12.0, 3, 4)
    1.0
    """
    return max(float(total_energy) / n_rows / n_pixels, 1e-300)


def laplace_log_evidence(energy: torch.Tensor, volume: torch.Tensor, n_pixels: int,
                         noise_variance: float | None = None,
                         scale: torch.Tensor | None = None) -> torch.Tensor:
    r"""The Laplace log-evidence of rows fitted with minimised energies ``energy``.

    .. math::  \log p(x) \approx -\frac{E / c}{2\sigma^2} - \frac12\,\mathrm{volume}
               - \frac P2 \log(2\pi\sigma^2 c),

    for Gaussian pixel noise of variance :math:`\sigma^2 c`: ``c`` the row's noise scale
    (``scale``; 1 where None), :math:`\sigma^2` the variance per unit of it.

    Parameters
    ----------
    energy : Tensor of shape (n,)
        Minimised energies (:math:`2\sigma^2 c` times the negative log posterior).
    volume : Tensor of shape (n,)
        Their Occam volumes (:func:`warp_log_volume`).
    n_pixels : int
        ``P``.
    noise_variance : float or None, default=None
        :math:`\sigma^2`; None: its maximum-likelihood value on these rows
        (:func:`pixel_noise_variance` of the energies over their scales).
    scale : Tensor of shape (n,) or None, default=None
        Positive noise scales of the rows (e.g. their contrast, :func:`row_contrast`).

    Returns
    -------
    Tensor of shape (n,), float64

    Examples
    --------
    >>> import torch
    >>> energy, volume = torch.tensor([2.0, 8.0]), torch.zeros(2)
    >>> scale = torch.tensor([1.0, 4.0], dtype=torch.float64)  # the second: 4x the noise
    >>> e = laplace_log_evidence(energy, volume, 2, 1.0, scale)
    >>> round(float(e[0] - e[1]), 4)  # same relative energy: apart by P/2 log 4 only
    1.3863
    """
    energy = energy.to(torch.float64)
    if scale is not None:
        energy = energy / scale
    s2 = (pixel_noise_variance(float(energy.sum()), energy.shape[0], n_pixels)
          if noise_variance is None else float(noise_variance))
    evidence = (-energy / (2.0 * s2) - 0.5 * volume.to(torch.float64)
                - 0.5 * n_pixels * math.log(2.0 * math.pi * s2))
    return evidence if scale is None else evidence - 0.5 * n_pixels * torch.log(scale)
