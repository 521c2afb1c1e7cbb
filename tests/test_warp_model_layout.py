"""Layout of a WarpModel: channels of a signal, the affine sub-family, flat image rows."""

import pytest
import torch

from skxclust.nn.tps import affine_basis
from skxclust.nn.warp_inverse import unwarp_images
from skxclust.nn.warps import channel_rows, make_warp_model, warp_images

F64 = torch.float64


@pytest.mark.parametrize("transform", ["tps", "affine+tps"])
def test_two_channel_model_warps_each_channel_along_time_as_a_one_channel_model(transform):
    # pins the channel layout at the smallest count, C == 2 (time axis, own row per channel)
    length = 12
    model = make_warp_model((2, 1, length), 4, transform, F64)
    single = make_warp_model((1, length), 4, transform, F64)
    assert model.input_shape == (2, 1, length) and model.axes == [0]
    generator = torch.Generator().manual_seed(3)
    mu = torch.randn(1, 2 * length, dtype=F64, generator=generator)
    params = 0.2 * torch.randn(1, 3, single.n_basis, 1, dtype=F64, generator=generator)
    warped = warp_images(mu, model, params).reshape(3, 2, length)
    for c in range(2):
        expected = warp_images(mu.reshape(2, length)[c][None], single, params)[0]
        torch.testing.assert_close(warped[:, c], expected, rtol=0, atol=1e-12)
    back = unwarp_images(warped.reshape(3, 2 * length), model, params[0]).reshape(3, 2, length)
    for c in range(2):
        expected = unwarp_images(warped[:, c], single, params[0])
        torch.testing.assert_close(back[:, c], expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("shape", [(5, 7), (1, 9)])
@pytest.mark.parametrize("transform", ["tps", "affine+tps"])
def test_affine_rows_span_exactly_the_affine_warps(shape, transform):
    # pins affine_rows: D + 1 independent rows whose warps are the affine maps [p, 1]
    model = make_warp_model(shape, 9 if shape[0] > 1 else 4, transform, F64)
    rows = model.affine_rows
    assert rows.shape == (model.n_basis, model.ndim + 1)
    moves = model.basis @ rows  # (P, D + 1): the displacement of each affine row
    target = affine_basis(model.points)
    for a, b in ((moves, target), (target, moves)):  # each column space holds the other
        fit = torch.linalg.lstsq(a, b).solution
        torch.testing.assert_close(a @ fit, b, rtol=0, atol=1e-9)
    assert torch.linalg.matrix_rank(moves) == model.ndim + 1


def test_affine_model_has_no_separate_affine_rows():
    # pins affine_rows is None when every warp of the family is affine
    assert make_warp_model((5, 7), 9, "affine", F64).affine_rows is None


@pytest.mark.parametrize("shape", [(4, 6), (1, 10), (7, 1)])
def test_channel_rows_leaves_an_image_shape_as_height_then_width(shape):
    # pins channel_rows on a 2-entry shape: images unchanged, (H, W) in that order
    images = torch.arange(2.0 * shape[0] * shape[1]).reshape(2, -1)
    rows, out_shape = channel_rows(images, shape)
    assert rows is images and out_shape == shape


def test_channel_rows_splits_a_two_channel_signal_into_one_row_per_channel():
    # pins channel_rows on (C, 1, L): row c of sample n is channel c, shape (1, L)
    images = torch.arange(12.0).reshape(2, 6)
    rows, out_shape = channel_rows(images, (2, 1, 3))
    assert out_shape == (1, 3)
    torch.testing.assert_close(rows, images.reshape(4, 3))


@pytest.mark.parametrize("shape, n_landmarks", [((3, 3), 9), ((4, 4), 16), ((1, 4), 16)])
@pytest.mark.parametrize("transform", ["tps", "affine", "affine+tps"])
def test_landmark_basis_is_the_basis_at_the_control_points(shape, n_landmarks, transform):
    # pins landmark_basis: on a g x g image (g knots) the pixels are the landmarks
    model = make_warp_model(shape, n_landmarks, transform, F64)
    torch.testing.assert_close(model.landmark_basis, model.basis, rtol=0, atol=1e-10)
