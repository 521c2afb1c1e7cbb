"""Numbers of skxclust.nn.warp_evidence: the Occam volume of fitted warps at its edges (a
float32 model, inputs that require grad, a weak bending prior, a zero penalty) and the
Laplace log-evidence, its noise variance and the rows' contrast, against closed forms."""

import math

import numpy as np
import pytest
import torch
from _warp_reference import pair_log_volume
from sklearn.datasets import load_digits
from test_warp_solver import images

from skxclust import SpatialTransformerKMeans
from skxclust.nn.pair_batch import coordinates
from skxclust.nn.tps import control_points
from skxclust.nn.warp_evidence import (
    float64_model,
    laplace_log_evidence,
    pixel_noise_variance,
    row_contrast,
    warp_log_volume,
)
from skxclust.nn.warps import WarpModel, make_warp_model

F64 = torch.float64
SHAPE = (9, 10)


def small_warps(model, n, seed=0):
    """``n`` small random warps (n, n_basis, D): the volume holds at any warp, fitted or
    not, so the tests need no fit."""
    g = torch.Generator().manual_seed(seed)
    return 0.05 * torch.randn(n, model.n_basis, model.ndim, generator=g, dtype=F64)


@pytest.mark.parametrize("weights", [(0.7, 0.3), (0.5, 5.0)])
@pytest.mark.parametrize("shape, transform", [
    (SHAPE, "tps"), ((1, 15), "tps"), ((1, 15), "affine+tps"), (SHAPE, "affine+tps")])
def test_log_volume_of_a_float32_model_is_that_of_the_float64_model(shape, transform,
                                                                  weights):
    # A cast of the float32 model's G kept its rounding, which lifts the null space of
    # "affine+tps" on images (the affine maps held twice) to ~1e-9 of its largest
    # eigenvalue, above the floor: six directions too many were counted, 0.665 nats off
    # at weights (0.7, 0.3), 4-22 at (0.5, 5).
    # the determinant is taken in float64 whatever the model's dtype: a float32 model
    # (its basis rounded to float32) gives the float64 model's volume to float32 rounding
    n_landmarks = 4 if shape[0] == 1 else 9
    model64 = make_warp_model(shape, n_landmarks, transform, F64)
    model32 = make_warp_model(shape, n_landmarks, transform, torch.float32)
    x, mu = images(shape, 3)
    params = small_warps(model64, 3)
    penalty = torch.tensor([0.5, 1.0, 4.0], dtype=F64)
    v64 = warp_log_volume(x, mu[[0, 1, 0]], model64, params, penalty, *weights)
    v32 = warp_log_volume(x.float(), mu[[0, 1, 0]].float(), model32, params.float(),
                          penalty.float(), *weights)
    assert v32.dtype == F64
    torch.testing.assert_close(v32, v64, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("needs_grad", ["samples", "images", "params"])
def test_log_volume_of_inputs_that_require_grad_is_that_of_plain_inputs(needs_grad):
    # the volume is a constant of the fit: inputs that carry a graph are read as values,
    # and the result carries none
    model = make_warp_model(SHAPE, 9, "tps", F64)
    x, mu = images(SHAPE, 3)
    args = {"samples": x, "images": mu[[0, 1, 1]], "params": small_warps(model, 3)}
    plain = warp_log_volume(args["samples"], args["images"], model, args["params"], 2.0)
    args[needs_grad] = args[needs_grad].clone().requires_grad_(True)
    got = warp_log_volume(args["samples"], args["images"], model, args["params"], 2.0)
    assert not got.requires_grad
    torch.testing.assert_close(got, plain, rtol=0, atol=0)


@pytest.mark.parametrize("transform", ["tps", "affine+tps"])
@pytest.mark.parametrize("bending_weight", [1e-3, 1e-7])
def test_log_volume_counts_the_directions_of_a_weak_bending_prior(transform, bending_weight):
    # a bending weight 1e-7 of the affine weight puts the bending eigenvalues of G some
    # 1e-8 below its largest: still warp directions (the reference keeps them), only the
    # exact null space of "affine+tps" (1e-16) is left out
    model = make_warp_model(SHAPE, 9, transform, F64)
    x, mu = images(SHAPE, 2)
    params = small_warps(model, 2, seed=1)
    penalty = torch.tensor([1.0, 20.0], dtype=F64)
    volume = warp_log_volume(x, mu, model, params, penalty, bending_weight, 1.0)
    expected = torch.stack([pair_log_volume(x[i], mu[i], model, params[i], penalty[i],
                                            bending_weight, 1.0) for i in range(2)])
    torch.testing.assert_close(volume, expected, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("centroid", ["blob", "blank"])
def test_log_volume_of_a_zero_penalty_is_that_of_the_smallest_positive_one(centroid):
    # a constant row has zero contrast, so the estimator gives it a zero penalty; its
    # volume is that of the smallest positive penalty: a (large) number where pixels move,
    # 0 where none does (a blank centroid: J = 0, the posterior is the prior at any
    # penalty)
    model = make_warp_model(SHAPE, 9, "tps", F64)
    x, mu = images(SHAPE, 2)
    if centroid == "blank":
        mu = torch.zeros_like(mu)
    volume = warp_log_volume(x, mu, model, small_warps(model, 2), 0.0)
    assert torch.isfinite(volume).all()
    if centroid == "blank":
        torch.testing.assert_close(volume, torch.zeros(2, dtype=F64), rtol=0, atol=1e-9)
    else:
        assert (volume > warp_log_volume(x, mu, model, small_warps(model, 2), 1.0)).all()


@pytest.mark.parametrize("penalty", [1e-20, 1e-3, 1.0, 1e3])
def test_log_volume_where_no_pixel_moves_is_zero(penalty):
    # a blank centroid: J = 0, so the posterior is the prior and the ratio of their
    # determinants is 1
    model = make_warp_model(SHAPE, 9, "affine+tps", F64)
    x, _ = images(SHAPE, 2)
    blank = torch.zeros_like(x)
    volume = warp_log_volume(x, blank, model, small_warps(model, 2), penalty, 0.7, 0.3)
    torch.testing.assert_close(volume, torch.zeros(2, dtype=F64), rtol=0, atol=1e-9)


@pytest.mark.parametrize("shape, transform", [(SHAPE, "affine+tps"), ((3, 1, 12), "tps"),
                                              ((1, 15), "affine")])
def test_the_float64_model_of_a_float32_one_is_built_in_float64(shape, transform):
    """Every tensor equals that of a float64 build (a cast would keep float32 rounding);
    the float32 model and its cache are left alone; a float64 model is used as it is."""
    model = make_warp_model(shape, 9 if len(shape) == 2 and min(shape) > 1 else 4,
                            transform, torch.float32)
    assert coordinates(model, False).basis.dtype == torch.float32  # now cached
    built = float64_model(model)
    direct = make_warp_model(shape, model.n_landmarks, transform, F64)
    for name in ("points", "basis", "landmark_basis", "bending_gram", "affine_gram",
                 "flat_basis"):
        assert torch.equal(getattr(built, name), getattr(direct, name)), name
    assert built.cache == {} and coordinates(built, False).basis.dtype == F64
    assert coordinates(model, False).basis.dtype == torch.float32
    assert float64_model(direct) is direct
    assert float64_model(model) is built  # built once per model


def test_a_float32_model_not_built_by_make_warp_model_is_refused_naming_the_cause():
    made = make_warp_model(SHAPE, 9, "tps", torch.float32)
    bare = WarpModel(made.shape, "tps", made.points, made.basis, made.landmark_basis,
                     control_points(3, 2, torch.float32))
    with pytest.raises(ValueError, match="make_warp_model"):
        float64_model(bare)


def brute_contrast(X):
    X = np.asarray(X, dtype=np.float64)
    return np.array([sum((v - sum(row) / len(row)) ** 2 for v in row) for row in X])


def test_row_contrast_is_the_squared_distance_of_each_row_from_its_mean():
    X = torch.tensor([[1.0, -2.0, 4.0, 0.5], [3.0, 3.0, 3.0, 3.0], [-1.0, 0.0, 0.0, 5.0]],
                     dtype=F64)
    np.testing.assert_allclose(row_contrast(X).numpy(), brute_contrast(X), rtol=1e-12)
    # a gain scales it by its square, an offset leaves it
    np.testing.assert_allclose(row_contrast(-3.0 * X + 7.0).numpy(),
                               9.0 * brute_contrast(X), rtol=1e-12)


@pytest.mark.parametrize("energy, n_rows, n_pixels, expected", [
    (12.0, 3, 4, 1.0), (3.0, 1, 6, 0.5), (1e-6, 1, 1, 1e-6), (1e-290, 2, 5, 1e-291),
    (0.0, 5, 7, 1e-300)])
def test_pixel_noise_variance_is_the_mean_energy_per_row_and_pixel_at_least_1e300(
        energy, n_rows, n_pixels, expected):
    got = pixel_noise_variance(energy, n_rows, n_pixels)
    assert got == pytest.approx(expected, rel=1e-12, abs=0)


def test_laplace_log_evidence_of_rows_fitted_exactly_is_finite():
    # zero energies: the maximum-likelihood variance is floored at 1e-300, not 0 (which
    # would give 0 / 0 and log 0); the rows then differ by their volumes alone
    volume = torch.tensor([1.0, 3.0], dtype=F64)
    got = laplace_log_evidence(torch.zeros(2, dtype=F64), volume, 4)
    assert torch.isfinite(got).all()
    assert float(got[0] - got[1]) == pytest.approx(1.0, rel=1e-12)
    assert float(got[0]) == pytest.approx(-0.5 - 2 * math.log(2 * math.pi * 1e-300), rel=1e-12)


def brute_evidence(energy, volume, n_pixels, s2, scale):
    """The Laplace log-evidence of each row written out, for noise variance s2 * scale."""
    return np.array([-e / (2 * s2 * c) - v / 2 - n_pixels / 2 * math.log(2 * math.pi * s2 * c)
                     for e, v, c in zip(energy, volume, scale)])


def evidence_inputs():
    g = torch.Generator().manual_seed(3)
    energy = 5.0 * torch.rand(6, generator=g, dtype=F64)
    volume = 10.0 * torch.randn(6, generator=g, dtype=F64)
    scale = 0.2 + 3.0 * torch.rand(6, generator=g, dtype=F64)
    return energy, volume, scale


@pytest.mark.parametrize("scaled", [False, True])
@pytest.mark.parametrize("s2", [0.3, 2.5])
def test_laplace_log_evidence_is_the_gaussian_closed_form(scaled, s2):
    energy, volume, scale = evidence_inputs()
    got = laplace_log_evidence(energy, volume, 7, s2, scale if scaled else None)
    c = scale.numpy() if scaled else np.ones(6)
    assert got.dtype == F64
    np.testing.assert_allclose(got.numpy(), brute_evidence(energy.numpy(), volume.numpy(),
                                                           7, s2, c), rtol=1e-12)


@pytest.mark.parametrize("scaled", [False, True])
def test_laplace_log_evidence_without_a_variance_takes_the_one_that_maximises_it(scaled):
    # None: the maximum-likelihood variance of these rows, sum(E / c) / (n P); the summed
    # evidence is the largest there (its derivative in s2 vanishes)
    energy, volume, scale = evidence_inputs()
    c = scale if scaled else None
    ml = float((energy / (scale if scaled else 1.0)).sum()) / (6 * 7)
    got = laplace_log_evidence(energy, volume, 7, None, c)
    torch.testing.assert_close(got, laplace_log_evidence(energy, volume, 7, ml, c),
                               rtol=1e-12, atol=0)
    total = float(got.sum())
    for factor in (0.9, 0.99, 1.01, 1.1):
        assert float(laplace_log_evidence(energy, volume, 7, ml * factor, c).sum()) < total


def test_laplace_log_evidence_keeps_the_float64_precision_of_the_energies():
    # energies apart by less than float32 resolves, over a small variance: the evidence
    # is computed in float64 (float32 input gives float64 output too)
    energy = torch.tensor([1.0, 1.0 + 1e-10, 1.0 / 3.0], dtype=F64)
    got = laplace_log_evidence(energy, torch.zeros(3, dtype=torch.float32), 3, 1e-6)
    expected = brute_evidence(energy.numpy(), np.zeros(3), 3, 1e-6, np.ones(3))
    assert got.dtype == F64
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-14)
    assert float(got[0] - got[1]) == pytest.approx(1e-10 / 2e-6, rel=1e-5)
    assert laplace_log_evidence(energy.float(), torch.zeros(3), 3, 1e-6).dtype == F64


@pytest.mark.parametrize("shape, transform", [(SHAPE, "tps"), (SHAPE, "affine+tps"),
                                              ((1, 15), "tps")])
@pytest.mark.parametrize("scale", [1e-3, 1e-6, 1e-9, 1e6])
def test_log_volume_does_not_depend_on_the_scale_of_the_data(shape, transform, scale):
    """Samples and images times c and the penalty times c^2 (as the estimator's contrast
    penalty scales) leave the volume as it is: the posterior's eigenvalue floor follows the
    weight. With a floor fixed to G's scale, the volume grew by 20 nats at 1e-6 and 180 at
    1e-8."""
    n_landmarks = 4 if shape[0] == 1 else 9
    model = make_warp_model(shape, n_landmarks, transform, F64)
    x, mu = images(shape, 3)
    params = small_warps(model, 3)
    penalty = torch.tensor([0.5, 1.0, 4.0], dtype=F64)
    plain = warp_log_volume(x, mu[[0, 1, 0]], model, params, penalty)
    scaled = warp_log_volume(x * scale, mu[[0, 1, 0]] * scale, model, params,
                             penalty * scale**2)
    torch.testing.assert_close(scaled, plain, rtol=1e-9, atol=1e-9)


def test_score_ranks_warp_families_the_same_in_any_unit_of_the_data():
    """Scaling the data by a power of two fits the same warps and centroids, so every
    row's score moves by the same constant (the Gaussian's normaliser) for every
    n_landmarks. At 2**-30 the volume's fixed floor moved the scores by thousands (and
    on 150 digits reversed the ranking of n_landmarks 4 and 9)."""
    X = load_digits().data[:80]
    c = 2.0**-30
    shifts, at_one = [], []
    for n_landmarks in (4, 9):
        scores = [SpatialTransformerKMeans(3, n_landmarks=n_landmarks, random_state=0,
                                           max_iter=2).fit(X * s).score(X * s)
                  for s in (1.0, c)]
        at_one.append(scores[0])
        shifts.append(scores[1] - scores[0])
    # the Gaussian's normaliser: -P log c per row, summed over the rows
    np.testing.assert_allclose(shifts, [-X.size * np.log(c)] * 2, rtol=1e-9)
    assert at_one[0] != at_one[1]
