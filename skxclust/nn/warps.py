r"""Warp families on a fixed image shape, and the linear operators ST K-means needs.

Pure torch; no scikit-learn import. Images are flattened: ``P = H * W`` pixels, ``D`` warped
axes (2 for images, 1 for signals), ``n_basis`` rows of the warp basis (see
:mod:`skxclust.nn.tps`). A warp is ``grid = p + basis @ params`` with ``params`` of shape
``(n_basis, D)``, zero at the identity; :class:`WarpModel` holds the basis, built once.

For a warp with parameters :math:`\nu`, :math:`S_\nu` is the bilinear resampling operator
(``grid_sample`` with zero padding, ``align_corners=True``): :math:`(S_\nu \mu)(p) =
\mu(p + u_\nu(p))`. It is linear in the image, so it has an adjoint :math:`S_\nu^\top`
(bilinear splatting) that brings a sample back into the centroid frame;
:func:`warp_adjoint` and :func:`warp_normal` apply :math:`S^\top` and :math:`S^\top S`
summed per cluster (:mod:`skxclust.nn.warp_inverse` resamples through the inverse warp).
"""

from __future__ import annotations

import torch

from ._checks import check_shape, check_warp_args
from .tps import (
    control_points,
    grid_size_from_landmarks,
    pixel_grid,
    tps_penalty_matrices,
    warp_basis,
)

__all__ = [
    "TRANSFORMS",
    "WarpModel",
    "channel_rows",
    "make_warp_model",
    "warp_grids",
    "warp_images",
    "warp_batch",
    "warp_adjoint",
    "warp_normal",
]

TRANSFORMS = ("tps", "affine", "affine+tps")
BILINEAR, ZEROS, BORDER = 0, 0, 1  # grid_sampler interpolation / padding codes


class WarpModel:
    """A warp family on a fixed image shape: ``grid = points + basis @ params``.

    Build it with :func:`make_warp_model`. All tensors share one dtype and device.

    Attributes
    ----------
    shape : (H, W)
    transform : str
    points : Tensor of shape (P, D)
        Normalised pixel coordinates (``grid_sample`` convention, ``align_corners=True``).
    basis : Tensor of shape (P, n_basis)
    landmark_basis : Tensor of shape (L, n_basis)
        Displacement of the ``L`` landmarks per unit of each parameter row.
    flat_points : Tensor of shape (P * 2,)
        ``points`` as a flattened ``grid_sample`` grid (1-D signals get a zero coordinate).
    flat_basis : Tensor of shape (n_basis * D, P * 2)
        ``flat_points + params.reshape(-1) @ flat_basis`` is the flattened sampling grid.
    axes : list of int
        The ``grid_sample`` coordinate (0: x, 1: y) that each of the ``D`` warped axes moves.
    bending_gram, affine_gram : Tensor of shape (n_basis * D, n_basis * D)
        ``v^T bending_gram v`` is the bending energy of the landmark displacement
        (Bookstein's ``trace(delta^T B delta)``, zero for affine warps) and ``v^T
        affine_gram v`` the squared norm of its least-squares affine part ``[t, A]``
        (translation and linear map). Neither changes its meaning with the number of
        landmarks. See :meth:`penalty_gram`.
    cache : dict
        Tensors the warp solver derives from the basis (and the model's float64 build for
        the Occam volume), built on first use and reused by every later fit with this model
        (read-only once built).
    n_landmarks : int or None
        The ``n_landmarks`` the model was built with (:func:`make_warp_model`), so that it
        can be built again in another dtype.
    affine_rows : Tensor of shape (n_basis, D + 1) or None
        Parameters of the affine warps: ``params = affine_rows @ a`` for affine
        coefficients ``a`` (``(D + 1) x D``); None for ``"affine"``, where every warp is
        affine.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> model = make_warp_model((1, 6), n_landmarks=4, transform="affine+tps")
    >>> model.n_basis, model.ndim, model.n_params  # 2 affine rows + 2 knots, one axis
    (4, 1, 4)
    >>> tuple(model.penalty_gram(bending_weight=1.0, affine_weight=0.1).shape)
    (4, 4)
    """

    def __init__(self, shape, transform, points, basis, landmark_basis, centers,
                 channels: int = 1, n_landmarks: int | None = None):
        self.shape = (int(shape[0]), int(shape[1]))
        self.n_landmarks = n_landmarks  # as given to make_warp_model
        self.channels = int(channels)  # > 1: the H rows are channels of one signal
        self.transform = transform
        self.cache: dict = {}  # tensors derived from the basis by the solver, built once
        self.points = points
        self.basis = basis
        self.landmark_basis = landmark_basis
        n_pixels, ndim = points.shape
        axes = [0, 1] if ndim == 2 else [0 if self.shape[0] == 1 or channels > 1 else 1]
        flat_points = torch.zeros(n_pixels, 2, dtype=points.dtype, device=points.device)
        flat_points[:, axes] = points
        if self.channels > 1:  # each channel sampled on its own row, never between rows
            rows = torch.linspace(-1.0, 1.0, self.channels, dtype=points.dtype,
                                  device=points.device)
            flat_points[:, 1] = rows.repeat_interleave(self.shape[1])
        self.flat_points = flat_points.reshape(-1)
        flat_basis = torch.zeros(self.n_basis, ndim, n_pixels, 2, dtype=points.dtype,
                                 device=points.device)
        for e, axis in enumerate(axes):
            flat_basis[:, e, :, axis] = basis.T
        self.flat_basis = flat_basis.reshape(self.n_basis * ndim, n_pixels * 2)
        self.axes = axes
        eye = torch.eye(ndim, dtype=points.dtype, device=points.device)
        bending, affine, affine_landmarks = tps_penalty_matrices(centers)
        self.bending_gram = torch.kron(landmark_basis.T @ bending @ landmark_basis, eye)
        self.affine_gram = torch.kron(landmark_basis.T @ affine @ landmark_basis, eye)
        if transform == "affine":
            self.affine_rows = None
        elif transform == "tps":
            self.affine_rows = affine_landmarks
        else:  # "affine+tps": the affine rows come first
            self.affine_rows = torch.eye(self.n_basis, ndim + 1, dtype=points.dtype,
                                         device=points.device)

    def penalty_gram(self, bending_weight: float = 1.0, affine_weight: float = 1.0
                     ) -> torch.Tensor:
        """``G = bending_weight * bending_gram + affine_weight * affine_gram``: the warp
        penalty is ``v^T G v`` for ``v = params.reshape(-1)``.

        Parameters
        ----------
        bending_weight : float, default=1.0
            Weight of the bending energy.
        affine_weight : float, default=1.0
            Weight of the squared affine coefficients.

        Returns
        -------
        Tensor of shape (n_params, n_params)
        """
        return float(bending_weight) * self.bending_gram + float(affine_weight) * self.affine_gram

    @property
    def ndim(self) -> int:
        """Number of warped axes ``D``."""
        return self.points.shape[1]

    @property
    def n_basis(self) -> int:
        """Number of parameter rows."""
        return self.basis.shape[1]

    @property
    def n_params(self) -> int:
        """Parameters per warp, ``n_basis * D``."""
        return self.n_basis * self.ndim

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The shape as given to :func:`make_warp_model`: ``(C, 1, L)`` for a signal of
        ``C`` channels, ``shape`` otherwise."""
        if self.channels > 1:
            return (self.channels, 1, self.shape[1])
        return self.shape

    @property
    def length(self) -> int:
        """Samples along the warped axis of a 1-D model (per channel)."""
        return self.shape[1] if self.axes[0] == 0 else self.shape[0]


def make_warp_model(
    shape: tuple[int, ...],
    n_landmarks: int = 16,
    transform: str = "tps",
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> WarpModel:
    """Build the warp basis for images of ``shape`` (computed once, reused for every pair).

    Parameters
    ----------
    shape : (H, W) or (C, 1, L)
        Image shape. ``H == 1`` (or ``W == 1``) gives 1-D signals warped along their axis;
        ``(C, 1, L)``: signals of ``C`` channels of length ``L`` (``C * L`` values per
        row, channel after channel), all channels warped by one 1-D warp along time
        (the model's ``shape`` is then ``(C, L)``, its ``channels`` ``C``).
    n_landmarks : int
        ``g * g`` with ``g >= 2``: a ``g x g`` control grid for images, ``g`` knots along a
        1-D signal. Affine warps use the landmarks only to measure the warp size.
    transform : {"tps", "affine", "affine+tps"}
    dtype, device : of every tensor of the model.

    Returns
    -------
    WarpModel

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> model = make_warp_model((8, 10), n_landmarks=9, transform="tps")
    >>> model.shape, model.n_basis, model.ndim, tuple(model.basis.shape)
    ((8, 10), 9, 2, (80, 9))
    >>> model = make_warp_model((3, 1, 10), n_landmarks=16)  # 3 channels, one time warp
    >>> model.shape, model.channels, model.ndim, model.n_params
    ((3, 10), 3, 1, 4)
    """
    if transform not in TRANSFORMS:
        raise ValueError(
            f"transform={transform!r} is not supported; use one of {', '.join(TRANSFORMS)}."
        )
    grid = grid_size_from_landmarks(n_landmarks)
    channels = 1
    if len(shape) == 3 and int(shape[1]) != 1:
        raise ValueError(f"a 3-entry shape must be (C, 1, L) (channels of a signal), got "
                         f"{tuple(shape)}.")
    if len(shape) == 3:  # (C, 1, L): every channel sampled at the same times
        channels, _, width = (int(s) for s in shape)
        points = pixel_grid((1, width), 1, dtype, device).repeat(channels, 1)
        height, ndim = channels, 1
    else:
        height, width = (int(s) for s in shape)
        ndim = 1 if min(height, width) == 1 else 2
        points = pixel_grid((height, width), ndim, dtype, device)
    centers = control_points(grid, ndim, dtype, device)
    basis, landmark_basis = warp_basis(points, centers, transform)
    return WarpModel((height, width), transform, points, basis, landmark_basis, centers,
                     channels, int(n_landmarks))


def channel_rows(images: torch.Tensor, shape: tuple[int, ...]
                 ) -> tuple[torch.Tensor, tuple[int, int]]:
    """Flattened images (N, P) and their (H, W) as image-shape operations take them: for
    the channels of a signal, ``shape`` ``(C, 1, L)``, every channel as its own ``1 x L``
    row, (N * C, L) and (1, L), so that such operations act along time within each
    channel; other shapes unchanged. Reshape the result back with ``images.shape``.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.warps import channel_rows
    >>> rows, shape = channel_rows(torch.zeros(2, 30), (3, 1, 10))
    >>> tuple(rows.shape), shape
    ((6, 10), (1, 10))
    """
    if len(shape) != 3:
        return images, (int(shape[0]), int(shape[1]))
    channels, length = int(shape[0]), int(shape[2])
    check_shape(images, "images", "(N, P)", P=(channels * length, "C * L"))
    return images.reshape(-1, length), (1, length)


def warp_grids(model: WarpModel, params: torch.Tensor) -> torch.Tensor:
    """``grid_sample`` grids of a batch of warps.

    Parameters
    ----------
    model : WarpModel
    params : Tensor of shape (N, n_basis, D)

    Returns
    -------
    Tensor of shape (N, H, W, 2)

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.warps import warp_grids
    >>> model = make_warp_model((8, 10), 9)
    >>> grids = warp_grids(model, torch.zeros(2, 9, 2))  # identity warps
    >>> tuple(grids.shape), torch.equal(grids[0].reshape(-1), model.flat_points)
    ((2, 8, 10, 2), True)
    """
    check_warp_args(model, params=params, params_dims="(N, n_basis, D)")
    flat = torch.addmm(model.flat_points, params.reshape(params.shape[0], -1), model.flat_basis)
    return flat.reshape(params.shape[0], *model.shape, 2)


def warp_batch(images: torch.Tensor, model: WarpModel, flat_params: torch.Tensor):
    """Warp each of ``G`` images by ``M`` warps with one GEMM and one ``grid_sampler`` call.

    Parameters
    ----------
    images : Tensor of shape (G, 1, H, W)
    model : WarpModel
    flat_params : Tensor of shape (G * M, n_basis * D)
        Image-major: rows ``g * M ... (g + 1) * M - 1`` warp image ``g``.

    Returns
    -------
    warped : Tensor of shape (G, M, P)
    grid : Tensor of shape (G, M * H, W, 2)
        The sampling grid (for the backward pass).
    """
    n_images = images.shape[0]
    height, width = model.shape
    grid = torch.addmm(model.flat_points, flat_params, model.flat_basis)
    grid = grid.reshape(n_images, -1, width, 2)  # (G, M * H, W, 2): a view, no copy
    warped = torch.grid_sampler_2d(images, grid, BILINEAR, ZEROS, True)
    return warped.reshape(n_images, -1, height * width), grid


def warp_images(images: torch.Tensor, model: WarpModel, params: torch.Tensor) -> torch.Tensor:
    """Warp each of ``K`` images by ``B`` warps: ``out[k, b] = S(params[k, b]) images[k]``.

    Parameters
    ----------
    images : Tensor of shape (K, P)
    model : WarpModel
    params : Tensor of shape (K, B, n_basis, D)

    Returns
    -------
    Tensor of shape (K, B, P)
        Zero outside the source image.

    Examples
    --------
    Shift a 1-D signal (a ``1 x 5`` image) by one sample with an affine warp:

    >>> import torch
    >>> from skxclust.nn import make_warp_model, warp_images
    >>> model = make_warp_model((1, 5), n_landmarks=4, transform="affine")
    >>> params = torch.tensor([[[[0.0], [0.5]]]])  # translation by 0.5 = one sample
    >>> warp_images(torch.tensor([[0.0, 1.0, 2.0, 3.0, 4.0]]), model, params).tolist()
    [[[1.0, 2.0, 3.0, 4.0, 0.0]]]
    """
    check_warp_args(model, images, images_dims="(K, P)")
    check_warp_args(model, params=params, params_dims="(K, B, n_basis, D)",
                     K=(images.shape[0], "images.shape[0]"))
    n_clusters, n_warps = params.shape[:2]
    flat = params.reshape(n_clusters * n_warps, model.n_params)
    return warp_batch(images.reshape(n_clusters, 1, *model.shape), model, flat)[0]


def warp_adjoint(
    values: torch.Tensor,
    model: WarpModel,
    params: torch.Tensor,
    labels: torch.Tensor,
    n_clusters: int,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-cluster sums ``sum_i w_i S_i^T v_i`` and ``sum_i w_i S_i^T 1`` (the adjoint).

    ``S_i`` resamples the centroid frame onto sample ``i`` with warp ``params[i]``; its
    transpose splats the sample back into the centroid frame (bilinear weights).

    Parameters
    ----------
    values : Tensor of shape (B, P)
    model : WarpModel
    params : Tensor of shape (B, n_basis, D)
    labels : LongTensor of shape (B,)
        Cluster of each row.
    n_clusters : int
    weights : Tensor of shape (B,), optional

    Returns
    -------
    splat : Tensor of shape (n_clusters, P)
        ``sum_{i in k} w_i S_i^T v_i``.
    coverage : Tensor of shape (n_clusters, P)
        ``sum_{i in k} w_i S_i^T 1``.

    Examples
    --------
    Identity warps splat every sample back unchanged:

    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.warps import warp_adjoint
    >>> model = make_warp_model((1, 4), n_landmarks=4, transform="affine")
    >>> values = torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0]])
    >>> labels = torch.tensor([0, 0])
    >>> splat, cover = warp_adjoint(values, model, torch.zeros(2, 2, 1), labels, 1)
    >>> splat.round(decimals=4).tolist(), cover.round(decimals=4).tolist()
    ([[2.0, 3.0, 4.0, 5.0]], [[2.0, 2.0, 2.0, 2.0]])
    """
    rows = (values.shape[0], "values.shape[0]")
    check_warp_args(model, values, images_name="values")
    check_warp_args(model, params=params, B=rows)
    check_shape(labels, "labels", "(B,)", B=rows)
    if weights is not None:
        check_shape(weights, "weights", "(B,)", B=rows)
    n, n_pixels = values.shape
    height, width = model.shape
    if weights is None:
        weights = values.new_ones(n)
    grid = warp_grids(model, params.to(values.dtype))
    cotangent = torch.stack([values, torch.ones_like(values)], 1) * weights[:, None, None]
    dummy = values.new_zeros(n, 2, height, width)
    adjoint, _ = torch.ops.aten.grid_sampler_2d_backward(
        cotangent.reshape(n, 2, height, width), dummy, grid, BILINEAR, ZEROS, True,
        [True, False],
    )
    sums = values.new_zeros(n_clusters, 2 * n_pixels)
    sums.index_add_(0, labels, adjoint.reshape(n, 2 * n_pixels))
    sums = sums.reshape(n_clusters, 2, n_pixels)
    return sums[:, 0], sums[:, 1]


def warp_normal(
    centroids: torch.Tensor,
    model: WarpModel,
    params: torch.Tensor,
    labels: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-cluster ``sum_{i in k} w_i S_i^T S_i mu_k``: the normal operator of the update.

    Parameters
    ----------
    centroids : Tensor of shape (K, P)
    model : WarpModel
    params : Tensor of shape (B, n_basis, D)
    labels : LongTensor of shape (B,)
    weights : Tensor of shape (B,), optional

    Returns
    -------
    Tensor of shape (K, P)

    Examples
    --------
    For identity warps ``S^T S`` is the identity, times the weight of the members:

    >>> import torch
    >>> from skxclust.nn import make_warp_model
    >>> from skxclust.nn.warps import warp_normal
    >>> model = make_warp_model((1, 4), n_landmarks=4, transform="affine")
    >>> mu = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    >>> out = warp_normal(mu, model, torch.zeros(3, 2, 1), torch.tensor([0, 0, 0]))
    >>> out.round(decimals=4).tolist()
    [[3.0, 6.0, 9.0, 12.0]]
    """
    check_warp_args(model, centroids, params, images_name="centroids", images_dims="(K, P)")
    rows = (params.shape[0], "params.shape[0]")
    check_shape(labels, "labels", "(B,)", B=rows)
    if weights is not None:
        check_shape(weights, "weights", "(B,)", B=rows)
    n = params.shape[0]
    height, width = model.shape
    grid = warp_grids(model, params.to(centroids.dtype))
    images = centroids.reshape(-1, 1, height, width)[labels]
    warped = torch.grid_sampler_2d(images, grid, BILINEAR, ZEROS, True)
    if weights is not None:
        warped = warped * weights.reshape(n, 1, 1, 1)
    adjoint, _ = torch.ops.aten.grid_sampler_2d_backward(
        warped, torch.zeros_like(images), grid, BILINEAR, ZEROS, True, [True, False]
    )
    out = torch.zeros_like(centroids)
    out.index_add_(0, labels, adjoint.reshape(n, height * width))
    return out
