"""The damped Gauss-Newton step of the warp solver: exact on the directions the energy
sees, zero along a flat one, and finite where the Hessian is singular."""

import pytest
import torch

from skxclust.nn.warp_solver import _damped_steps

F64 = torch.float64


def spd(n_pairs, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    B = torch.randn(n_pairs, n, n, generator=g, dtype=F64)
    return B @ B.transpose(1, 2) + n * torch.eye(n, dtype=F64)


@pytest.mark.parametrize("damping", [0.0, 0.3])
def test_a_flat_direction_gets_no_step_and_barely_moves_the_others(damping):
    """A parameter without image gradient or penalty (a zero row and column) keeps the
    system solvable through a floor of 1e-9 of the mean diagonal; the other parameters
    take the exact damped step to that precision (the 1e-6 jitter meant for singular
    systems would move them by about 1e-6)."""
    A = spd(3, 5)
    hess = torch.zeros(3, 6, 6, dtype=F64)
    hess[:, :5, :5] = A
    grad = torch.zeros(3, 6, dtype=F64)
    grad[:, :5] = torch.randn(3, 5, generator=torch.Generator().manual_seed(1), dtype=F64)
    step = _damped_steps(hess, grad, torch.full((3,), damping, dtype=F64))
    damped = A + damping * torch.diag_embed(A.diagonal(dim1=1, dim2=2))
    exact = -torch.linalg.solve(damped, grad[:, :5])
    torch.testing.assert_close(step[:, :5], exact, rtol=1e-7, atol=0)
    assert torch.equal(step[:, 5].abs(), torch.zeros(3, dtype=F64))


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_a_singular_hessian_still_gives_a_finite_descent_step(dtype):
    """A rank-one Gauss-Newton Hessian is singular beyond the 1e-9 floor's reach: the
    Cholesky factorisation fails and the jittered retry gives a finite step that lowers
    the quadratic model of the energy."""
    g = torch.Generator().manual_seed(2)
    v = torch.randn(4, 8, 1, generator=g, dtype=F64)
    hess = (v @ v.transpose(1, 2)).to(dtype)
    grad = torch.randn(4, 8, generator=g, dtype=F64).to(dtype)
    step = _damped_steps(hess, grad, torch.zeros(4, dtype=dtype))
    assert torch.isfinite(step).all()
    model = (grad * step).sum(1) + 0.5 * (step[:, None, :] @ hess @ step[:, :, None])[:, 0, 0]
    assert (model < 0).all()


def test_only_the_pairs_whose_factorisation_fails_are_jittered():
    """A well-posed pair beside a singular one (all ones: in float32 the 1e-9 floor is
    lost in rounding, so its factorisation fails) takes its exact step."""
    A = spd(1, 4)[0].float()
    hess = torch.stack([A, torch.ones(4, 4)])
    grad = torch.randn(2, 4, generator=torch.Generator().manual_seed(4))
    step = _damped_steps(hess, grad, torch.zeros(2))
    assert torch.linalg.cholesky_ex(hess[1] + 1e-9 * torch.eye(4))[1] > 0
    torch.testing.assert_close(step[0], -torch.linalg.solve(A, grad[0]), rtol=1e-5, atol=0)
    assert torch.isfinite(step[1]).all()
