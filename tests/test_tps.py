"""Thin-plate splines, warp operators and the centroid update for fixed warps (skxclust.nn).

The warp fits themselves are tested in test_warp_solver.py.
"""

import ast
import pathlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from skxclust.nn.centroid_update import solve_centroids
from skxclust.nn.pair_batch import warp_energy
from skxclust.nn.tps import (
    affine_basis,
    control_points,
    grid_size_from_landmarks,
    pixel_grid,
    to_sampling_grid,
    tps_bending_energy_matrix,
    tps_interpolation_matrix,
    tps_kernel_matrix,
    warp_grid,
)
from skxclust.nn.warp_inverse import invert_warps, unwarp_images
from skxclust.nn.warps import (
    make_warp_model,
    warp_adjoint,
    warp_grids,
    warp_images,
    warp_normal,
)

F64 = torch.float64
SHAPES_TRANSFORMS = [
    ((6, 7), "tps"), ((6, 7), "affine"), ((6, 7), "affine+tps"),
    ((1, 11), "tps"), ((1, 11), "affine+tps"), ((9, 1), "tps"),
]


def blob(shape=(16, 16), center=(0.0, 0.0), width=0.3, dtype=F64):
    """A Gaussian blob image, flattened; centre in normalised (x, y) coordinates."""
    p = pixel_grid(shape, 2, dtype)
    r2 = ((p - torch.tensor(center, dtype=dtype)) ** 2).sum(1)
    return torch.exp(-r2 / (2 * width**2))


def test_tps_interpolation_matrix_reproduces_affine_maps():
    c = control_points(4, 2, F64)
    p = pixel_grid((9, 11), 2, F64)
    M = tps_interpolation_matrix(p, c)
    A = torch.tensor([[1.1, 0.2], [-0.3, 0.9]], dtype=F64)
    b = torch.tensor([0.05, -0.1], dtype=F64)
    torch.testing.assert_close(M @ (c @ A.T + b), p @ A.T + b)


def test_tps_interpolation_matrix_is_identity_at_the_control_points():
    c = control_points(3, 2, F64)
    torch.testing.assert_close(tps_interpolation_matrix(c, c), torch.eye(9, dtype=F64))


def test_tps_interpolation_matrix_is_cast_back_to_the_input_dtype():
    c = control_points(3, 2, torch.float32)
    assert tps_interpolation_matrix(pixel_grid((5, 5)), c).dtype == torch.float32


def test_one_dimensional_spline_reproduces_lines_and_interpolates_knots():
    knots = control_points(4, 1, F64)
    x = pixel_grid((1, 30), 1, F64)
    M = tps_interpolation_matrix(x, knots)
    torch.testing.assert_close(M @ (2 * knots - 0.5), 2 * x - 0.5)
    torch.testing.assert_close(tps_interpolation_matrix(knots, knots), torch.eye(4, dtype=F64))


def test_tps_kernel_is_zero_on_the_diagonal_and_r2_log_r2_elsewhere():
    c = control_points(2, 2, F64)
    K = tps_kernel_matrix(c, c)
    assert torch.all(K.diagonal() == 0)
    r2 = 4.0  # neighbours on the 2x2 grid of [-1, 1]^2 are 2 apart
    assert float(K[0, 1]) == pytest.approx(r2 * np.log(r2))


def test_bending_energy_vanishes_exactly_on_affine_landmark_moves():
    c = control_points(4, 2, F64)
    E = tps_bending_energy_matrix(c)
    affine = affine_basis(c)
    torch.testing.assert_close(E @ affine, torch.zeros_like(affine), atol=1e-10, rtol=0)
    wiggle = torch.randn(16, 2, dtype=F64, generator=torch.Generator().manual_seed(0))
    assert float((wiggle * (E @ wiggle)).sum()) > 0


def test_warp_grid_of_zero_params_is_the_pixel_grid():
    p = pixel_grid((5, 4), 2, F64)
    M = tps_interpolation_matrix(p, control_points(3, 2, F64))
    grid = warp_grid(p, M, torch.zeros(3, 9, 2, dtype=F64))
    torch.testing.assert_close(grid, p.expand(3, -1, -1))
    assert to_sampling_grid(grid, (5, 4)).shape == (3, 5, 4, 2)


@pytest.mark.parametrize("shape, transform", SHAPES_TRANSFORMS)
def test_identity_warp_reproduces_the_image(shape, transform):
    model = make_warp_model(shape, 9, transform, F64)
    img = torch.rand(2, shape[0] * shape[1], dtype=F64)
    out = warp_images(img, model, torch.zeros(2, 3, model.n_basis, model.ndim, dtype=F64))
    torch.testing.assert_close(out, img[:, None].expand(-1, 3, -1))


@pytest.mark.parametrize("n_landmarks", [0, 1, 2, 3, 5, 8, 15, 17])
def test_n_landmarks_must_be_a_perfect_square_of_at_least_4(n_landmarks):
    with pytest.raises(ValueError, match="n_landmarks"):
        grid_size_from_landmarks(n_landmarks)


def test_unknown_transform_is_refused_with_its_name():
    with pytest.raises(ValueError, match="transform='similarity'"):
        make_warp_model((5, 5), 4, "similarity")


@pytest.mark.parametrize("shape, transform", SHAPES_TRANSFORMS)
def test_adjoint_is_the_transpose_of_the_warp(shape, transform):
    model = make_warp_model(shape, 9, transform, F64)
    g = torch.Generator().manual_seed(2)
    n_pixels = shape[0] * shape[1]
    params = 0.2 * torch.randn(5, model.n_basis, model.ndim, dtype=F64, generator=g)
    labels = torch.tensor([0, 2, 2, 1, 0])
    mu = torch.rand(3, n_pixels, dtype=F64, generator=g)
    v = torch.rand(5, n_pixels, dtype=F64, generator=g)
    w = torch.rand(5, dtype=F64, generator=g)
    s_mu = torch.stack([warp_images(mu[labels[i]][None], model, params[i][None, None])[0, 0]
                        for i in range(5)])
    splat, cover = warp_adjoint(v, model, params, labels, 3, w)
    assert float((w[:, None] * s_mu * v).sum()) == pytest.approx(float((mu * splat).sum()))
    _, cover_ones = warp_adjoint(torch.ones_like(v), model, params, labels, 3, w)
    torch.testing.assert_close(cover, cover_ones)
    normal = warp_normal(mu, model, params, labels, w)
    assert float((mu * normal).sum()) == pytest.approx(float((w[:, None] * s_mu**2).sum()))


def test_solve_centroids_reaches_the_least_squares_optimum():
    model = make_warp_model((6, 6), 4, "tps", F64)
    g = torch.Generator().manual_seed(6)
    n = 30
    X = torch.rand(n, 36, dtype=F64, generator=g)
    labels = torch.arange(n) % 2
    params = 0.2 * torch.randn(n, 4, 2, dtype=F64, generator=g)
    # Dense S_i matrices by warping the basis images.
    eye = torch.eye(36, dtype=F64)
    S = torch.stack([warp_images(eye, model, params[i].expand(36, 1, 4, 2))[:, 0].T
                     for i in range(n)])
    start = torch.rand(2, 36, dtype=F64, generator=g)
    mu = solve_centroids(X, model, params, labels, start, n_iter=60, batch_size=7)
    for k in range(2):
        A = sum(S[i].T @ S[i] for i in range(n) if labels[i] == k)
        b = sum(S[i].T @ X[i] for i in range(n) if labels[i] == k)
        torch.testing.assert_close(A @ mu[k], b, atol=1e-8, rtol=0)


def test_solve_centroids_never_increases_the_distortion():
    model = make_warp_model((6, 6), 9, "tps", F64)
    g = torch.Generator().manual_seed(7)
    X = torch.rand(20, 36, dtype=F64, generator=g)
    labels = torch.arange(20) % 3
    params = 0.3 * torch.randn(20, 9, 2, dtype=F64, generator=g)

    def distortion(mu):
        return float(warp_energy(X, mu, model, params[:, None].expand(-1, 3, -1, -1), 0.0)
                     .gather(1, labels[:, None]).sum())

    start = torch.rand(3, 36, dtype=F64, generator=g)
    values = [distortion(start)] + [
        distortion(solve_centroids(X, model, params, labels, start, n_iter=it))
        for it in (0, 1, 3, 10)
    ]
    assert all(b <= a + 1e-9 for a, b in zip(values, values[1:]))


def test_inverse_warp_composes_to_the_identity():
    model = make_warp_model((20, 20), 9, "tps", F64)
    params = 0.08 * torch.randn(3, 9, 2, dtype=F64, generator=torch.Generator().manual_seed(8))
    forward = warp_grids(model, params)  # (3, H, W, 2)
    inverse = invert_warps(model, params)
    # g(h(q)) = q: sample the forward grid at the inverse grid.
    composed = F.grid_sample(forward.permute(0, 3, 1, 2), inverse, align_corners=True,
                             padding_mode="border").permute(0, 2, 3, 1)
    identity = model.flat_points.reshape(1, 20, 20, 2)
    interior = (identity.abs() < 0.7).all(-1).expand(3, -1, -1)
    torch.testing.assert_close(composed[interior], identity.expand(3, -1, -1, -1)[interior],
                               atol=2e-3, rtol=0)


def test_unwarping_a_warped_image_gives_the_original_back():
    model = make_warp_model((24, 24), 9, "tps", F64)
    image = blob((24, 24), width=0.25)
    params = 0.1 * torch.randn(1, 9, 2, dtype=F64, generator=torch.Generator().manual_seed(9))
    warped = warp_images(image[None], model, params[None])[0]
    back = unwarp_images(warped, model, params)
    assert float(((back - image) ** 2).sum()) < 0.1 * float(((warped - image) ** 2).sum())


NN_DIR = pathlib.Path(__file__).parents[1] / "skxclust" / "nn"


@pytest.mark.parametrize("module", sorted(p.name for p in NN_DIR.glob("*.py")))
def test_nn_modules_import_neither_sklearn_nor_skxclust_outside_nn(module):
    tree = ast.parse((NN_DIR / module).read_text())
    names = [a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
             for a in node.names]
    names += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not any(n.split(".")[0] == "sklearn" for n in names)
    assert not any(node.level > 1 for node in ast.walk(tree)
                   if isinstance(node, ast.ImportFrom))  # no "from .." out of nn
    assert all(n == "skxclust.nn" or n.startswith("skxclust.nn.") for n in names
               if n.split(".")[0] == "skxclust")
