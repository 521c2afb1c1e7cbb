"""invert_warps and unwarp_images on warps whose inverse is known in closed form."""

import pytest
import torch

from skxclust.nn.warp_inverse import invert_warps
from skxclust.nn.warps import make_warp_model

F64 = torch.float64


@pytest.mark.parametrize("shape", [(1, 9), (7, 8)])
def test_default_inverse_of_an_affine_scaling_is_exact(shape):
    # pins the default iteration count: g(q) = 1.5 q (|grad u| = 0.5) inverts to q / 1.5
    model = make_warp_model(shape, 4, "affine", F64)
    ndim = model.ndim
    params = torch.zeros(1, ndim + 1, ndim, dtype=F64)
    params[0, :ndim, :] = 0.5 * torch.eye(ndim, dtype=F64)  # theta = [[0.5 I], [0]]
    inverse = invert_warps(model, params)
    expected = model.flat_points.reshape(1, *model.shape, 2) / 1.5
    torch.testing.assert_close(inverse, expected, rtol=0, atol=1e-8)


@pytest.mark.parametrize("shape, shift", [((1, 9), [0.5]), ((6, 7), [0.3, -0.2])])
def test_inverse_of_a_translation_is_exact_also_where_it_leaves_the_image(shape, shift):
    # pins the border extension of the displacement field: q - t for every pixel q
    model = make_warp_model(shape, 4, "affine", F64)
    params = torch.zeros(1, model.ndim + 1, model.ndim, dtype=F64)
    params[0, -1] = torch.tensor(shift, dtype=F64)  # the translation row of theta
    grid = model.flat_points.reshape(1, *model.shape, 2)
    expected = grid.clone()
    expected[..., model.axes] -= torch.tensor(shift, dtype=F64)
    torch.testing.assert_close(invert_warps(model, params), expected, rtol=0, atol=1e-12)
