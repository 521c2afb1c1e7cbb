"""The TPS bending and affine penalties against independent definitions (skxclust.nn.tps)."""

import pytest
import torch

from skxclust.nn.tps import (
    control_points,
    tps_bending_energy_matrix,
    tps_kernel_matrix,
    tps_penalty_matrices,
    tps_system_matrix,
)

F64 = torch.float64


@pytest.mark.parametrize("grid, ndim", [(3, 2), (4, 2), (5, 1)])
def test_bending_energy_is_the_kernel_energy_of_the_spline_weights(grid, ndim):
    # pins v^T E v = w^T K w, w the spline weights solved from the block system
    centers = control_points(grid, ndim, F64)
    n = centers.shape[0]
    values = torch.randn(n, 2, dtype=F64, generator=torch.Generator().manual_seed(grid))
    rhs = torch.cat([values, torch.zeros(ndim + 1, 2, dtype=F64)])
    weights = torch.linalg.solve(tps_system_matrix(centers), rhs)[:n]
    kernel_energy = torch.trace(weights.T @ tps_kernel_matrix(centers, centers) @ weights)
    energy = torch.trace(values.T @ tps_bending_energy_matrix(centers) @ values)
    torch.testing.assert_close(energy, kernel_energy, rtol=1e-9, atol=1e-12)
    bending, _, _ = tps_penalty_matrices(centers)
    torch.testing.assert_close(bending, tps_bending_energy_matrix(centers), rtol=0, atol=0)


@pytest.mark.parametrize("ndim", [1, 2])
def test_affine_penalty_of_a_translation_is_its_squared_length(ndim):
    # pins the translation row of the affine part: every landmark moved by t costs ||t||^2
    centers = control_points(4, ndim, F64)
    _, affine, poly = tps_penalty_matrices(centers)
    t = torch.tensor([0.3, -0.4][:ndim], dtype=F64)
    delta = torch.ones(centers.shape[0], 1, dtype=F64) * t
    torch.testing.assert_close(torch.trace(delta.T @ affine @ delta), (t * t).sum())
    torch.testing.assert_close(poly[:, 0], torch.ones(centers.shape[0], dtype=F64))
    torch.testing.assert_close(poly[:, 1:], centers)


def test_control_points_refuses_a_grid_of_fewer_than_two_points():
    # pins the lower bound of control_points: one point per axis is no grid
    with pytest.raises(ValueError, match="grid_size"):
        control_points(1, 2)
    assert control_points(2, 2).shape == (4, 2)
