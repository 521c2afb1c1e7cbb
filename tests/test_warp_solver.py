"""The regularised warp fit of ST K-means (skxclust.nn.warp_solver) and its penalty."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _warp_reference import pair_log_volume

from skxclust.nn.pair_batch import Coordinates, PairBatch, warp_energy
from skxclust.nn.tps import (
    control_points,
    grid_size_from_landmarks,
    pixel_grid,
    to_sampling_grid,
    tps_penalty_matrices,
    warp_grid,
)
from skxclust.nn.warp_evidence import warp_log_volume
from skxclust.nn.warp_solver import fit_warps
from skxclust.nn.warps import make_warp_model, warp_grids, warp_images

F64 = torch.float64
MODELS = [((9, 10), "tps", 9), ((9, 10), "affine", 9), ((9, 10), "affine+tps", 9),
          ((1, 15), "tps", 4), ((12, 1), "affine+tps", 9)]


def blob(shape, center=(0.0, 0.0), width=0.35):
    """A Gaussian blob, flattened; 1-D shapes give a bump along their axis."""
    ndim = 1 if min(shape) == 1 else 2
    p = pixel_grid(shape, ndim, F64)
    c = torch.tensor(center[:ndim], dtype=F64)
    return torch.exp(-((p - c) ** 2).sum(1) / (2 * width**2))


def images(shape, n):
    """``n`` blobs at different places and widths (samples) and two centroids."""
    g = torch.Generator().manual_seed(0)
    centers = torch.rand(n, 2, generator=g, dtype=F64) * 0.5 - 0.25
    x = torch.stack([blob(shape, c.tolist(), 0.3 + 0.1 * i / n) for i, c in enumerate(centers)])
    mu = torch.stack([blob(shape), blob(shape, (0.2, -0.1), 0.45)])
    return x, mu


@pytest.mark.parametrize("shape, transform, n_landmarks", MODELS)
def test_normal_equations_are_gauss_newton_of_the_energy(shape, transform, n_landmarks):
    # b is half the gradient of E and A - lambda G is J^T J, J from autograd
    model = make_warp_model(shape, n_landmarks, transform, F64)
    x, mu = images(shape, 1)
    g = torch.Generator().manual_seed(1)
    flat = 0.05 * torch.randn(1, model.n_params, generator=g, dtype=F64)
    gram = model.penalty_gram(0.7, 0.3)
    pairs = PairBatch(mu[:1].reshape(1, 1, *shape), x[None], model, torch.tensor([2.0], dtype=F64),
                   gram)
    _, residual = pairs.energy(flat)
    hess, grad = pairs.normal_system(flat, residual, Coordinates(model))

    v = flat.clone().requires_grad_(True)
    energy, _ = pairs.energy(v)
    (auto_grad,) = torch.autograd.grad(energy.sum(), v)
    torch.testing.assert_close(grad, 0.5 * auto_grad)

    def warped(params):
        return pairs.energy(params)[1].reshape(-1)

    jac = torch.autograd.functional.jacobian(warped, flat).reshape(-1, model.n_params)
    torch.testing.assert_close(hess[0], jac.T @ jac + 2.0 * gram)


@pytest.mark.parametrize("shape, transform, n_landmarks", MODELS)
def test_energy_matches_an_independent_reference(shape, transform, n_landmarks):
    # grid_sample on warp_grid's grids, and the penalty from the landmark displacements
    model = make_warp_model(shape, n_landmarks, transform, F64)
    g = torch.Generator().manual_seed(3)
    n_pixels = shape[0] * shape[1]
    x = torch.rand(4, n_pixels, dtype=F64, generator=g)
    mu = torch.rand(3, n_pixels, dtype=F64, generator=g)
    pen = torch.rand(4, dtype=F64, generator=g)
    params = 0.1 * torch.randn(4, 3, model.n_basis, model.ndim, dtype=F64, generator=g)
    grid = warp_grid(model.points, model.basis, params.reshape(12, model.n_basis, model.ndim))
    src = mu.reshape(3, 1, *shape).repeat(4, 1, 1, 1)  # pair (b, k) -> row 3 b + k
    warped = F.grid_sample(src, to_sampling_grid(grid, shape),
                           align_corners=True).reshape(4, 3, n_pixels)
    centers = control_points(grid_size_from_landmarks(n_landmarks), model.ndim, F64)
    bending, affine, _ = tps_penalty_matrices(centers)
    disp = model.landmark_basis @ params  # (4, 3, L, D)
    size = 0.7 * (disp * (bending @ disp)).sum((-1, -2)) + 0.3 * (disp * (affine @ disp)).sum(
        (-1, -2))
    ref = ((warped - x[:, None]) ** 2).sum(-1) + pen[:, None] * size
    ours = warp_energy(x, mu, model, params, pen, bending_weight=0.7, affine_weight=0.3)
    torch.testing.assert_close(ours, ref)


def test_zero_steps_give_the_plain_squared_distance():
    model = make_warp_model((8, 8), 9, "affine+tps", F64)
    g = torch.Generator().manual_seed(4)
    x, mu = torch.rand(5, 64, dtype=F64, generator=g), torch.rand(4, 64, dtype=F64, generator=g)
    energy, params = fit_warps(x, mu, model, penalty=1.0, n_steps=0)
    torch.testing.assert_close(energy, torch.cdist(x, mu) ** 2)
    assert torch.all(params == 0)


@pytest.mark.parametrize("shape, transform, n_landmarks", MODELS)
def test_fitted_energy_never_exceeds_the_identity_energy(shape, transform, n_landmarks):
    model = make_warp_model(shape, n_landmarks, transform, F64)
    x, mu = images(shape, 5)
    start, _ = fit_warps(x, mu, model, penalty=1.0, n_steps=0)
    energy, params = fit_warps(x, mu, model, penalty=1.0, n_steps=8)
    assert torch.all(energy <= start + 1e-12)
    assert torch.all(energy < start)  # every pair here can do better than the identity
    torch.testing.assert_close(warp_energy(x, mu, model, params, 1.0), energy)


def test_a_known_warp_is_recovered_and_the_fit_is_converged():
    shape = (16, 16)
    model = make_warp_model(shape, 9, "tps", F64)
    mu = blob(shape, (0.0, 0.0), 0.3)[None]
    g = torch.Generator().manual_seed(2)
    true = 0.08 * torch.randn(1, 1, model.n_basis, 2, generator=g, dtype=F64)
    x = warp_images(mu, model, true)[0]
    identity, _ = fit_warps(x, mu, model, penalty=1e-6, n_steps=0)
    energy, params = fit_warps(x, mu, model, penalty=1e-6, n_steps=20)
    assert float(energy) < 1e-4 * float(identity)
    grid_error = (model.basis @ (params[0, 0] - true[0, 0])).abs().max()
    assert float(grid_error) < 0.01  # the warp, not just the image, is recovered
    more, _ = fit_warps(x, mu, model, penalty=1e-6, n_steps=40)
    assert float(energy - more) <= 1e-3 * float(identity)


def test_a_known_translation_is_recovered_with_the_estimator_defaults():
    # 16 landmarks, penalty = contrast, 5 affine + 10 LM steps: as SpatialTransformerKMeans
    shape = (16, 16)
    model = make_warp_model(shape, 16, "tps", F64)
    p = pixel_grid(shape, 2, F64)

    def disc(cx, cy):
        return torch.exp(-((p - torch.tensor([cx, cy], dtype=F64)) ** 2).sum(1) / 0.18)

    centroid, shifted = disc(0.0, 0.0), disc(0.2, -0.1)
    contrast = ((shifted - shifted.mean()) ** 2).sum()
    energy, params = fit_warps(shifted[None], centroid[None], model, penalty=contrast,
                               n_steps=10, affine_steps=5)
    assert float(energy[0, 0]) < 0.1 * float(((shifted - centroid) ** 2).sum())
    # Around the blob, the centroid is sampled 0.2 to the left and 0.1 below.
    shift = torch.tensor([0.2, -0.1], dtype=F64)
    centre = ((model.points - shift) ** 2).sum(1).argmin()
    grid = warp_grids(model, params[:, 0]).reshape(-1, 2)
    torch.testing.assert_close(grid[centre], model.points[centre] - shift, atol=0.02, rtol=0)
    # With a weak penalty the blob is matched almost exactly.
    weak, _ = fit_warps(shifted[None], centroid[None], model, penalty=1e-3, n_steps=10)
    assert float(weak[0, 0]) < 0.01 * float(((shifted - centroid) ** 2).sum())


def test_doubling_the_steps_barely_moves_the_energies():
    shape = (12, 12)
    model = make_warp_model(shape, 16, "tps", F64)
    x, mu = images(shape, 8)
    contrast = ((x - x.mean(1, keepdim=True)) ** 2).sum(1)
    e10, _ = fit_warps(x, mu, model, penalty=contrast, n_steps=10)
    e20, _ = fit_warps(x, mu, model, penalty=contrast, n_steps=20)
    assert torch.all(e20 <= e10 + 1e-12)
    assert float(((e10 - e20) / e10).max()) < 1e-3


def test_the_initial_damping_hardly_changes_the_fit():
    shape = (12, 12)
    model = make_warp_model(shape, 16, "tps", F64)
    x, mu = images(shape, 6)
    a, _ = fit_warps(x, mu, model, penalty=1.0, n_steps=15, damping=1e-3)
    b, _ = fit_warps(x, mu, model, penalty=1.0, n_steps=15, damping=1e-1)
    torch.testing.assert_close(a, b, rtol=1e-3, atol=0)


def test_pairs_are_fitted_independently_of_their_chunk():
    shape = (10, 10)
    model = make_warp_model(shape, 9, "tps", F64)
    x, mu = images(shape, 6)
    energy, params = fit_warps(x, mu, model, penalty=0.5, n_steps=6)
    one, one_params = fit_warps(x[3:4], mu[1:2], model, penalty=0.5, n_steps=6)
    torch.testing.assert_close(one[0, 0], energy[3, 1])
    torch.testing.assert_close(one_params[0, 0], params[3, 1])


def test_screening_keeps_the_fits_of_the_surviving_pairs():
    shape = (10, 10)
    model = make_warp_model(shape, 9, "tps", F64)
    x, _ = images(shape, 6)
    mu = torch.stack([blob(shape, (0.1 * k - 0.2, 0.0), 0.3 + 0.05 * k) for k in range(4)])
    full, _ = fit_warps(x, mu, model, penalty=0.5, n_steps=8)
    screened, _ = fit_warps(x, mu, model, penalty=0.5, n_steps=8, n_candidates=2,
                            screen_steps=2)
    first, _ = fit_warps(x, mu, model, penalty=0.5, n_steps=2)
    kept = first.topk(2, dim=1, largest=False).indices
    rows = torch.arange(x.shape[0])[:, None]
    torch.testing.assert_close(screened[rows, kept], full[rows, kept])
    assert torch.all(screened >= full - 1e-12)  # dropped pairs keep an upper bound


def test_penalty_splits_bending_from_pose_and_means_the_same_at_every_grid():
    bend, pose, plain = [], [], []
    for g in (3, 4, 6):
        c = control_points(g, 2, F64)
        bending, affine, poly = tps_penalty_matrices(c)
        a = torch.tensor([[0.1, -0.05], [0.2, 0.1], [-0.1, 0.3]], dtype=F64)
        delta = poly @ a
        assert float(torch.trace(delta.T @ bending @ delta)) < 1e-10
        torch.testing.assert_close(torch.trace(delta.T @ affine @ delta), (a**2).sum())
        field = torch.stack([0.1 * c[:, 0] ** 2, 0.05 * c[:, 0] * c[:, 1]], 1)
        bend.append(float(torch.trace(field.T @ bending @ field)))
        pose.append(float(torch.trace(delta.T @ affine @ delta)))
        plain.append(float((delta**2).sum()))
    assert max(bend) / min(bend) < 1.3  # converges as the grid is refined
    assert max(pose) / min(pose) < 1 + 1e-9
    assert plain[-1] / plain[0] > 2.5  # a plain ||delta||^2 grows with the landmarks


@pytest.mark.parametrize("shape, transform, n_landmarks", MODELS)
def test_log_volume_is_the_log_determinant_ratio_of_an_autograd_hessian(shape, transform,
                                                                         n_landmarks):
    # Laplace's Occam factor from an independent computation: J by autograd of the
    # public warp, G by autograd of the landmark-displacement penalty (_warp_reference)
    model = make_warp_model(shape, n_landmarks, transform, F64)
    x, mu = images(shape, 4)
    penalty = torch.tensor([0.5, 1.0, 2.0, 30.0], dtype=F64)
    _, params = fit_warps(x, mu[:1], model, penalty=penalty, n_steps=10, bending_weight=0.7,
                          affine_weight=0.3)
    volume = warp_log_volume(x, mu[[0, 0, 0, 0]], model, params[:, 0], penalty, 0.7, 0.3)
    expected = torch.stack([pair_log_volume(x[i], mu[0], model, params[i, 0], penalty[i],
                                            0.7, 0.3) for i in range(4)])
    torch.testing.assert_close(volume, expected, rtol=1e-9, atol=1e-9)


def test_log_volume_grows_with_flexibility():
    shape = (12, 12)
    x, mu = images(shape, 4)
    volumes = []
    for n_landmarks in (4, 9, 16):
        model = make_warp_model(shape, n_landmarks, "tps", F64)
        _, params = fit_warps(x, mu[:1], model, penalty=1.0, n_steps=10)
        volumes.append(warp_log_volume(x, mu[[0, 0, 0, 0]], model, params[:, 0], 1.0))
    assert torch.all(volumes[0] < volumes[1]) and torch.all(volumes[1] < volumes[2])


def test_float32_fits_match_float64():
    shape = (10, 10)
    model64 = make_warp_model(shape, 9, "tps", F64)
    model32 = make_warp_model(shape, 9, "tps", torch.float32)
    x, mu = images(shape, 4)
    e64, _ = fit_warps(x, mu, model64, penalty=1.0, n_steps=10)
    e32, _ = fit_warps(x.float(), mu.float(), model32, penalty=1.0, n_steps=10)
    np.testing.assert_allclose(e32.double().numpy(), e64.numpy(), rtol=1e-3)


@pytest.mark.parametrize("start, after_three", [(1e-3, 1.0), (1e6, 1e7)])
def test_a_step_that_does_not_lower_the_energy_is_rejected_and_raises_the_damping(
        start, after_three):
    # a blank sample and centroid: the identity warp is the optimum, every step is exactly
    # zero and leaves the energy (0) as it was; equal energy is no progress, so the
    # damping rises tenfold a step, up to its cap 1e7
    from skxclust.nn.warp_solver import levenberg_marquardt

    shape = (9, 10)
    model = make_warp_model(shape, 9, "tps", F64)
    blank = torch.zeros(1, shape[0] * shape[1], dtype=F64)
    pairs = PairBatch(blank.reshape(1, 1, *shape), blank[None], model,
                      torch.tensor([2.0], dtype=F64), model.penalty_gram(0.7, 0.3))
    flat = torch.zeros(1, model.n_params, dtype=F64)
    energy, fitted, damping = levenberg_marquardt(pairs, flat, 3, Coordinates(model),
                                                  torch.tensor([start], dtype=F64))
    assert torch.equal(fitted, flat) and float(energy) == 0.0
    assert float(damping) == pytest.approx(after_three, rel=1e-12)


@pytest.mark.parametrize("kind", [None, "intensity", "intensity+thickness"])
@pytest.mark.parametrize("shape, transform, n_landmarks", [((9, 10), "tps", 9),
                                                           ((1, 15), "tps", 4)])
def test_normal_systems_from_the_evaluated_samples_equal_those_sampled_again(
        kind, shape, transform, n_landmarks, monkeypatch):
    # levenberg_marquardt forms each normal system from the grids and warped channels of
    # the evaluation that accepted the warps (for the pairs that moved, when only some
    # did): the fit equals one that samples every centroid again
    from skxclust.nn.appearance import Appearance
    from skxclust.nn.pair_batch import Sampled, pair_images
    from skxclust.nn.warp_solver import levenberg_marquardt

    model = make_warp_model(shape, n_landmarks, transform, F64)
    x, mu = images(shape, 6)
    appearance = None if kind is None else Appearance(kind, 0.3)
    weight = torch.linspace(0.5, 2.0, 12, dtype=F64)
    pairs = PairBatch(pair_images(mu, model, appearance), x[None], model, weight,
                      model.penalty_gram(0.7, 0.3), appearance)
    g = torch.Generator().manual_seed(3)
    flat = 0.1 * torch.randn(12, model.n_params, generator=g, dtype=F64)
    damping = torch.full((12,), 1e-3, dtype=F64)

    subsets = []
    select_sampled = PairBatch.select_sampled
    monkeypatch.setattr(PairBatch, "select_sampled",
                        lambda self, rows, sampled: subsets.append(rows.numel())
                        or select_sampled(self, rows, sampled))
    reused = levenberg_marquardt(pairs, flat, 8, Coordinates(model), damping)
    assert subsets and min(subsets) < 12  # some steps were rejected for some pairs only

    evaluate = PairBatch.evaluate
    monkeypatch.setattr(PairBatch, "evaluate",
                        lambda self, v: (*evaluate(self, v)[:3], Sampled(None, None)))
    again = levenberg_marquardt(pairs, flat, 8, Coordinates(model), damping)
    for a, b in zip(reused, again):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


# -- the damped linear solve of a step ---------------------------------------------------
def test_a_flat_direction_is_solved_without_the_jitter_fallback(monkeypatch):
    # a parameter that moves no pixel and has no penalty (a zero row and column): the
    # floor on the diagonal keeps the system positive definite, one factorisation for all
    from skxclust.nn.warp_solver import _damped_steps

    calls = []
    factorise = torch.linalg.cholesky_ex

    def spy(matrix, *args, **kwargs):
        calls.append(matrix.shape[0])
        return factorise(matrix, *args, **kwargs)

    monkeypatch.setattr(torch.linalg, "cholesky_ex", spy)
    hess = torch.diag_embed(torch.tensor([[2.0, 0.0], [1.0, 3.0]], dtype=F64))
    grad = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=F64)
    step = _damped_steps(hess, grad, torch.full((2,), 0.1, dtype=F64))
    assert calls == [2]
    torch.testing.assert_close(step, torch.tensor([[-1 / 2.2, 0.0], [-1 / 1.1, -1 / 3.3]],
                                                  dtype=F64), rtol=1e-8, atol=0)


def test_a_system_singular_in_float32_falls_back_to_a_jitter_and_steps_finitely():
    from skxclust.nn.warp_solver import _damped_steps

    # [[1, 1], [1, 1]] plus the 1e-9 floor is still singular in float32
    hess = torch.ones(1, 2, 2, dtype=torch.float32)
    grad = torch.tensor([[1.0, 1.0]])
    step = _damped_steps(hess, grad, torch.zeros(1))
    assert bool(torch.isfinite(step).all())
    torch.testing.assert_close(step.sum(), torch.tensor(-1.0), rtol=1e-3, atol=0)
