"""Appearance transformations of ST K-means (skxclust.nn.appearance): gain, offset,
stroke thickness, fitted per pair next to the warp."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from test_spatial import FAST, deformed_dataset
from test_warp_solver import MODELS, blob, images

from skxclust import SpatialTransformerKMeans
from skxclust._merge_init import merge_init
from skxclust.nn.appearance import (
    Appearance,
    intensity_rows,
    thickness_channel,
    warp_channels,
)
from skxclust.nn.pair_batch import Coordinates, PairBatch, pair_images, warp_energy
from skxclust.nn.warp_evidence import warp_log_volume
from skxclust.nn.warp_solver import fit_warps
from skxclust.nn.warps import make_warp_model, warp_images

F64 = torch.float64
KINDS = ["intensity", "intensity+thickness"]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _channels(kind, centroid, shape):
    return Appearance(kind, 1.0).channels(centroid[None], shape)[0]


def _profiled(kind, penalty, sample, centroid, model, flat, weight):
    """The energy of one pair written out: the channels warped by the public warp, the
    coefficients and offset by least squares on rows scaled by the prior (an independent
    route to the same ridge regression)."""
    channels = _channels(kind, centroid, model.shape)
    warped = warp_images(channels, model, flat.reshape(1, 1, model.n_basis, model.ndim)
                         .expand(channels.shape[0], 1, -1, -1))[:, 0]  # (C, P)
    n_channels, n_pixels = warped.shape
    design = torch.cat([warped.T, torch.ones(n_pixels, 1, dtype=F64)], dim=1)
    prior = torch.cat([torch.full((n_channels,), float(penalty * weight)),
                       torch.tensor([penalty * n_pixels])]).to(F64)
    target = torch.cat([sample, torch.sqrt(prior[:1]), torch.zeros(n_channels)])
    rows = torch.cat([design, torch.diag(torch.sqrt(prior))], dim=0)
    coef = torch.linalg.lstsq(rows, target[:, None]).solution[:, 0]
    residual = rows @ coef - target
    return (residual * residual).sum(), coef


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape, transform, n_landmarks", MODELS)
def test_the_energy_is_the_minimum_over_the_appearance_coefficients(
        kind, shape, transform, n_landmarks):
    model = make_warp_model(shape, n_landmarks, transform, F64)
    x, mu = images(shape, 1)
    sample = 1.7 * x[0] + 0.2
    flat = 0.05 * torch.randn(1, model.n_params, generator=torch.Generator().manual_seed(1),
                              dtype=F64)
    appearance = Appearance(kind, 0.3)
    pairs = PairBatch(pair_images(mu[:1], model, appearance), sample[None, None], model,
                      torch.tensor([2.0], dtype=F64), 0.0 * model.penalty_gram(), appearance)
    energy, _ = pairs.energy(flat)
    expected, coef = _profiled(kind, 0.3, sample, mu[0], model, flat, 2.0)
    torch.testing.assert_close(energy[0], expected)
    torch.testing.assert_close(pairs.coefficients(flat)[0, 0], coef[:-1])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape, transform, n_landmarks", MODELS)
def test_the_solver_steps_along_the_gradient_of_the_profiled_energy(
        kind, shape, transform, n_landmarks):
    # envelope theorem: b = J^T r with J the Jacobian of the transformed centroid is half
    # the gradient of the energy minimised over the coefficients (a Jacobian without the
    # coefficients, i.e. of the plain warped centroid, is not)
    model = make_warp_model(shape, n_landmarks, transform, F64)
    x, mu = images(shape, 1)
    sample = 2.5 * x[0] - 0.3
    flat = 0.05 * torch.randn(1, model.n_params, generator=torch.Generator().manual_seed(1),
                              dtype=F64)
    appearance = Appearance(kind, 0.1)
    pairs = PairBatch(pair_images(mu[:1], model, appearance), sample[None, None], model,
                      torch.tensor([2.0], dtype=F64), model.penalty_gram(0.7, 0.3), appearance)
    _, residual = pairs.energy(flat)
    _, grad = pairs.normal_system(flat, residual, Coordinates(model))
    v = flat.clone().requires_grad_(True)
    energy, _ = pairs.energy(v)
    (auto_grad,) = torch.autograd.grad(energy.sum(), v)
    torch.testing.assert_close(grad, 0.5 * auto_grad)


@pytest.mark.parametrize("gain, offset", [(0.4, 0.0), (1.8, 0.0), (1.0, 0.3), (0.6, -0.2)])
def test_a_fainter_or_brighter_moved_copy_is_matched_by_the_intensity_transform(gain, offset):
    shape = (12, 12)
    model = make_warp_model(shape, 9, "tps", F64)
    mu = blob(shape, (0.0, 0.0), 0.3)
    x = gain * blob(shape, (0.15, -0.1), 0.3) + offset
    contrast = ((x - x.mean()) ** 2).sum()
    plain, _ = fit_warps(x[None], mu[None], model, penalty=0.05 * contrast, n_steps=30)
    fitted, _ = fit_warps(x[None], mu[None], model, penalty=0.05 * contrast, n_steps=30,
                          appearance=Appearance("intensity", 1e-3))
    assert float(fitted) < 0.02 * float(plain)
    assert float(fitted) < 0.01 * float(contrast)


def test_a_bolder_stroke_is_matched_by_the_thickness_channel():
    # a stroke three pixels wide against a centroid one pixel wide: the gain alone cannot
    # widen it, the thickness channel (a first-order dilation) can
    shape = (16, 16)
    yy = torch.arange(16, dtype=F64)[:, None].expand(16, 16)
    stroke = lambda width: torch.exp(-((yy - 7.5) ** 2) / (2 * width**2)).reshape(-1)  # noqa: E731
    mu, x = stroke(0.8), stroke(1.6)
    model = make_warp_model(shape, 9, "affine", F64)
    contrast = ((x - x.mean()) ** 2).sum()
    energies = [float(fit_warps(x[None], mu[None], model, penalty=0.5 * contrast, n_steps=20,
                                appearance=None if kind is None else Appearance(kind, 0.01))[0])
                for kind in (None, "intensity", "intensity+thickness")]
    assert energies[2] < 0.3 * energies[1] and energies[1] < energies[0]


def test_thickness_channel_is_half_the_morphological_gradient():
    img = torch.zeros(1, 5, 5, dtype=F64)
    img[0, 2, 2] = 1.0
    out = thickness_channel(img.reshape(1, -1), (5, 5)).reshape(5, 5)
    expected = torch.zeros(5, 5, dtype=F64)
    expected[1:4, 1:4] = 0.5
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("shape", [(2, 3), (3, 2), (2, 2)])
def test_thickness_channel_of_two_pixel_sides_spans_both(shape):
    # a side of two pixels still takes the 3-pixel window (edges replicated): one lit
    # pixel lights the whole image, at half its value
    img = torch.zeros(shape, dtype=F64)
    img[0, 0] = 1.0
    out = thickness_channel(img.reshape(1, -1), shape).reshape(shape)
    expected = torch.full(shape, 0.5, dtype=F64)
    if shape[1] == 3:
        expected[:, 2] = 0.0  # two columns away along the 3-pixel side
    if shape[0] == 3:
        expected[2] = 0.0
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("kind", KINDS)
def test_warp_energy_with_an_appearance_never_exceeds_the_plain_one(kind):
    # the identity transformation (gain 1, no thickness, offset 0) costs no penalty
    shape = (9, 10)
    model = make_warp_model(shape, 9, "tps", F64)
    x, mu = images(shape, 4)
    params = 0.05 * torch.randn(4, 2, model.n_basis, 2,
                                generator=torch.Generator().manual_seed(3), dtype=F64)
    plain = warp_energy(x, mu, model, params, 0.5)
    transformed = warp_energy(x, mu, model, params, 0.5, appearance=Appearance(kind, 0.5))
    assert bool((transformed <= plain + 1e-12).all())
    assert bool((transformed < plain - 1e-6).any())


def _reference_log_volume(kind, penalty, sample, centroid, model, params, weight):
    """log det of the full Gauss-Newton Hessian in (warp, coefficients, offset) on the
    range of the prior, minus that of the prior: Jacobian by autograd of the transformed
    centroid as a function of all the parameters."""
    channels = _channels(kind, centroid, model.shape)
    n_channels, n_pixels = channels.shape
    _, coef = _profiled(kind, penalty, sample, centroid, model, params.reshape(1, -1), weight)
    n_warp = model.n_params

    def transformed(theta):
        v = theta[:n_warp].reshape(1, 1, model.n_basis, model.ndim)
        warped = warp_images(channels, model, v.expand(n_channels, 1, -1, -1))[:, 0]
        return (theta[n_warp:n_warp + n_channels, None] * warped).sum(0) + theta[-1]

    theta = torch.cat([params.reshape(-1), coef])
    jac = torch.autograd.functional.jacobian(transformed, theta)
    gram = model.penalty_gram().to(F64)
    eig, vectors = torch.linalg.eigh(gram)
    keep = vectors[:, eig > 1e-9 * eig.max()]
    rows = torch.block_diag(keep, torch.eye(n_channels + 1, dtype=F64))
    prior = torch.block_diag(weight * gram, torch.diag(torch.cat([
        torch.full((n_channels,), penalty * weight, dtype=F64),
        torch.tensor([penalty * n_pixels], dtype=F64)])))
    prior_r = rows.T @ prior @ rows
    return torch.logdet(rows.T @ (jac.T @ jac) @ rows + prior_r) - torch.logdet(prior_r)


@pytest.mark.parametrize("kind", KINDS)
def test_log_volume_counts_the_appearance_parameters_and_their_coupling(kind):
    shape = (9, 10)
    model = make_warp_model(shape, 9, "tps", F64)
    x, mu = images(shape, 2)
    sample = 1.3 * x[1] + 0.1
    appearance = Appearance(kind, 0.4)
    _, params = fit_warps(sample[None], mu[:1], model, penalty=2.0, n_steps=10,
                          appearance=appearance)
    got = warp_log_volume(sample[None], mu[:1], model, params[:, 0], 2.0, appearance=appearance)
    expected = _reference_log_volume(kind, 0.4, sample, mu[0], model, params[0, 0], 2.0)
    torch.testing.assert_close(got[0], expected)
    plain = warp_log_volume(sample[None], mu[:1], model, params[:, 0], 2.0)
    assert float(got[0]) > float(plain[0])


def test_intensity_rows_make_the_update_see_the_transformation():
    # sum_i w_i ||x_i - g_i y - o_i||^2 and sum_i w'_i ||x'_i - y||^2 differ by a constant
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(5, 7, generator=g, dtype=F64), torch.randn(2, 7, generator=g, dtype=F64)
    gain = torch.tensor([0.5, 1.0, 2.0, -1.0, 1.5], dtype=F64)
    offset = torch.randn(5, generator=g, dtype=F64)
    w = torch.rand(5, generator=g, dtype=F64)
    rows, w2 = intensity_rows(X, gain, offset, w)
    direct = [(w[:, None] * (X - gain[:, None] * yy - offset[:, None]) ** 2).sum() for yy in y]
    moved = [(w2[:, None] * (rows - yy) ** 2).sum() for yy in y]
    torch.testing.assert_close(direct[0] - direct[1], moved[0] - moved[1])


@pytest.mark.parametrize("gain, divisor", [(1e-9, 1e-6), (-1e-9, -1e-6), (0.0, 1e-6), (5e-7, 1e-6),
                                           (1.5e-6, 1.5e-6), (-1.5e-6, -1.5e-6)])
def test_intensity_rows_divide_by_a_gain_below_1e6_as_by_1e6_of_its_sign(gain, divisor):
    # such a row weighs g^2 w, nothing; its division stays finite and keeps the sign
    X, offset, w = torch.tensor([[3.0, 5.0]], dtype=F64), torch.tensor([1.0], dtype=F64), \
        torch.tensor([2.0], dtype=F64)
    rows, w2 = intensity_rows(X, torch.tensor([gain], dtype=F64), offset, w)
    torch.testing.assert_close(rows, (X - 1.0) / divisor)
    torch.testing.assert_close(w2, w * gain * gain)


@pytest.mark.parametrize("n", [2, 3])
def test_the_small_spd_solvers_match_a_dense_solve(n):
    from skxclust.nn.appearance import _solve_spd, spd_inverse

    g = torch.Generator().manual_seed(n)
    A = torch.randn(4, n, 2 * n, generator=g, dtype=F64)
    matrix, rhs = A @ A.mT, torch.randn(4, n, generator=g, dtype=F64)
    torch.testing.assert_close(spd_inverse(matrix), torch.linalg.inv(matrix))
    torch.testing.assert_close(_solve_spd(matrix, rhs),
                               torch.linalg.solve(matrix, rhs[..., None])[..., 0])


def test_bad_appearance_arguments_are_refused():
    with pytest.raises(ValueError, match="kind must be one of"):
        Appearance("colour", 1.0)
    with pytest.raises(ValueError, match="penalty must be > 0, got 0"):
        Appearance("intensity", 0)


# -- the estimator ----------------------------------------------------------------------
def _varied_dataset(seed=0):
    """The deformed shapes of test_spatial with a random gain (0.5-1.5) and offset per row."""
    X, y = deformed_dataset(n_per_class=8, seed=seed)
    rng = np.random.default_rng(seed)
    return X * rng.uniform(0.5, 1.5, (len(X), 1)) + rng.uniform(-0.1, 0.1, (len(X), 1)), y


@pytest.fixture(scope="module", params=KINDS)
def fitted_appearance(request):
    X, y = _varied_dataset()
    st = SpatialTransformerKMeans(3, n_landmarks=9, n_steps=10, max_iter=5, random_state=0,
                                  appearance=request.param, appearance_penalty=0.3).fit(X)
    return st, X, y


def test_labels_predict_evidence_and_transform_agree_with_an_appearance(fitted_appearance):
    st, X, _ = fitted_appearance
    labels = st.predict(X)
    np.testing.assert_array_equal(labels, st.labels_)
    np.testing.assert_array_equal(st.decision_function(X).argmax(1), labels)
    np.testing.assert_array_equal(st.transform(X).argmin(1), labels)


@pytest.mark.parametrize("target", [None, 1])
def test_relevance_sums_to_the_evidence_with_an_appearance(fitted_appearance, target):
    st, X, _ = fitted_appearance
    relevance = st.explain(X[:10], target=target)
    evidence = st.decision_function(X[:10])
    expected = evidence.max(1) if target is None else evidence[:, target]
    np.testing.assert_allclose(relevance.sum(1), expected, rtol=1e-6, atol=1e-8)


def test_align_undoes_the_gain_and_offset_of_a_sample():
    # with a weak prior the fitted gain and offset absorb any brightness change of a row
    X, _ = _varied_dataset()
    st = SpatialTransformerKMeans(3, random_state=0, appearance="intensity",
                                  appearance_penalty=1e-4, **FAST).fit(X)
    x = X[:4]
    aligned = st.align(np.concatenate([x, 1.6 * x + 0.05]))
    np.testing.assert_allclose(aligned[:4], aligned[4:], atol=0.01 * np.abs(x).max())


def test_rows_with_random_gains_cluster_by_shape_with_an_appearance(fitted_appearance):
    from sklearn.metrics import adjusted_rand_score

    st, _, y = fitted_appearance
    assert adjusted_rand_score(y, st.labels_) == 1.0


def test_score_prefers_the_intensity_transform_on_rows_with_random_gains():
    X, _ = _varied_dataset(seed=1)
    held, _ = _varied_dataset(seed=2)
    scores = {kind: SpatialTransformerKMeans(3, random_state=0, appearance=kind, **FAST)
              .fit(X).score(held) for kind in ("none", "intensity")}
    assert scores["intensity"] > scores["none"]


def test_explanations_compare_rows_with_the_transformed_centroids(fitted_appearance):
    # NEON's effective centroid is the warped centroid with its fitted appearance: closer
    # to the row than the plain warped centroid (rows with gains far from 1), and what is
    # left of the distance is the penalty of the warp and the appearance (>= 0)
    st, X, _ = fitted_appearance
    Xt, centers = torch.as_tensor(X[:12]), torch.as_tensor(st.cluster_centers_)
    geometry = st._make_geometry(X.shape[1])
    losses, warps = geometry.pair_warps(Xt, centers)
    effective = geometry.effective_centroids(Xt, centers, warps)
    plain = warp_images(centers, geometry.model(Xt), warps.transpose(0, 1)).transpose(0, 1)
    residual = ((Xt[:, None] - effective) ** 2).sum(-1)
    assert bool((losses - residual >= -1e-9).all())
    assert bool((residual < ((Xt[:, None] - plain) ** 2).sum(-1) - 1e-6).all())


def test_effective_centroids_take_the_coefficients_that_minimise_the_pairs_energy(
        fitted_appearance):
    # the warped channels at the coefficients and offset of least penalised energy, the
    # prior weighted by the row's contrast (the independent least-squares route above)
    st, X, _ = fitted_appearance
    Xt, centers = torch.as_tensor(X[:3]), torch.as_tensor(st.cluster_centers_)
    geometry = st._make_geometry(X.shape[1])
    model = geometry.model(Xt)
    _, warps = geometry.pair_warps(Xt, centers)
    effective = geometry.effective_centroids(Xt, centers, warps)
    for i, k in np.ndindex(3, centers.shape[0]):
        contrast = float(((Xt[i] - Xt[i].mean()) ** 2).sum())
        _, coef = _profiled(st.appearance, st.appearance_penalty, Xt[i], centers[k], model,
                            warps[i, k].reshape(-1), contrast)
        channels = _channels(st.appearance, centers[k], model.shape)
        warped = warp_images(channels, model, warps[i, k][None, None].expand(
            channels.shape[0], 1, -1, -1))[:, 0]
        torch.testing.assert_close(effective[i, k], coef[:-1] @ warped + coef[-1])


def test_member_rows_scaled_back_with_the_offset_and_thickness_share_are_the_samples(
        fitted_appearance):
    # the update sees (x - o - sum_j u_j S b_j(mu)) / g with weight w g^2
    st, X, _ = fitted_appearance
    Xt, centers = torch.as_tensor(X), torch.as_tensor(st.cluster_centers_)
    geometry = st._make_geometry(X.shape[1])
    assignment = geometry.assign(Xt, centers)
    weight = torch.linspace(0.5, 2.0, Xt.shape[0], dtype=F64)
    rows, row_weight = geometry.member_rows(Xt, centers, assignment, weight)
    fit = assignment.state
    warped = warp_channels(geometry.appearance, centers[assignment.labels],
                           geometry.model(Xt), fit.warps[None])[0]  # (n, C, P)
    shares = (fit.coef[:, 1:, None] * warped[:, 1:]).sum(1)
    torch.testing.assert_close(fit.coef[:, :1] * rows + fit.offset[:, None] + shares, Xt)
    torch.testing.assert_close(row_weight, weight * fit.coef[:, 0] ** 2)
    if st.appearance == "intensity+thickness":  # the share is there to be removed
        assert float(shares.abs().max()) > 1e-3


def test_the_update_is_the_least_squares_centroid_for_the_fitted_gains_and_offsets():
    # identity warps (n_steps=0): the centroid minimising sum_i ||x_i - g_i mu - o_i||^2
    # for the fitted g_i, o_i is sum_i g_i (x_i - o_i) / sum_i g_i^2, pixel by pixel
    g = torch.Generator().manual_seed(0)
    template = torch.rand(36, generator=g, dtype=F64)
    gains = torch.linspace(0.5, 1.5, 9, dtype=F64)
    X = gains[:, None] * template + 0.1 * torch.randn(9, 1, generator=g, dtype=F64) \
        + 0.01 * torch.randn(9, 36, generator=g, dtype=F64)
    geometry = SpatialTransformerKMeans(1, n_steps=0, appearance="intensity",
                                        appearance_penalty=0.1)._make_geometry(36)
    centers = 0.8 * template[None]
    assignment = geometry.assign(X, centers)
    new, _ = geometry.update(X, centers, assignment, torch.ones(9, dtype=F64))
    gain, offset = assignment.state.coef[:, 0], assignment.state.offset
    expected = (gain[:, None] * (X - offset[:, None])).sum(0) / (gain**2).sum()
    torch.testing.assert_close(new[0], expected)


def test_the_update_steps_reach_the_centroid_of_least_distortion_for_fitted_warps_and_gains():
    # with update_steps, conjugate gradients on sum_i w_i ||x_i - g_i S_i mu - o_i||^2 for
    # the fitted warps S_i, gains g_i and offsets o_i: its gradient vanishes there (the
    # normal operator weighs each row by w_i g_i^2)
    X, _ = _varied_dataset()
    params = dict(n_landmarks=9, n_steps=10, appearance="intensity", appearance_penalty=0.3)
    st = SpatialTransformerKMeans(3, max_iter=5, random_state=0, **params).fit(X)
    Xt, centers = torch.as_tensor(X), torch.as_tensor(st.cluster_centers_)
    geometry = SpatialTransformerKMeans(3, update_steps=20, **params)._make_geometry(X.shape[1])
    fit = geometry.assign(Xt, centers)
    weight = torch.linspace(0.5, 2.0, Xt.shape[0], dtype=F64)
    new, _ = geometry.update(Xt, centers, fit, weight)
    gain, offset = fit.state.coef[:, :1], fit.state.offset[:, None]

    def gradient(mu):
        mu = mu.clone().requires_grad_()
        warped = warp_images(mu[fit.labels], geometry.model(Xt), fit.state.warps[:, None])
        (weight * ((Xt - gain * warped[:, 0] - offset) ** 2).sum(1)).sum().backward()
        return mu.grad

    assert float(gradient(new).norm()) < 1e-6 * float(gradient(centers).norm())


@pytest.mark.parametrize("appearance", ["intensity", "intensity+thickness"])
def test_merge_init_places_and_merges_by_the_warp_alone(appearance):
    # a curriculum: the over-segments are placed and merged without the appearance
    # transformation (with a gain per pair, one over-segment covers two classes and the
    # merge joins them), and the estimator's geometry keeps its own
    X = torch.as_tensor(load_digits().data[:200])
    weight = torch.ones(200, dtype=X.dtype)
    with_appearance = SpatialTransformerKMeans(n_clusters=4, appearance=appearance
                                               )._make_geometry(64)
    warp_alone = SpatialTransformerKMeans(n_clusters=4, appearance="none")._make_geometry(64)
    a = merge_init(X, weight, torch.Generator().manual_seed(0), 4, with_appearance)
    b = merge_init(X, weight, torch.Generator().manual_seed(0), 4, warp_alone)
    assert torch.equal(a, b)
    assert with_appearance.appearance is not None


def test_align_undoes_a_bolder_stroke_with_the_thickness_channel_of_the_rows_centroid():
    # each row is a centroid with a bolder stroke (0.3 of its own thickness channel):
    # aligned, it is that centroid again, which takes the channel of the row's centroid,
    # not another's (measured: 2.4e-4 of the largest pixel, the rows are 0.14 away)
    side = 16
    yy, xx = np.mgrid[0:side, 0:side]
    blob = np.exp(-((yy - 6.5) ** 2 + (xx - 6.0) ** 2) / (2 * 1.5**2)).ravel()
    ring = np.exp(-((np.hypot(yy - 7.5, xx - 7.5) - 4) ** 2)).ravel()
    templates = np.stack([blob, ring])
    st = SpatialTransformerKMeans(2, init=templates, n_init=1, max_iter=1, warp="affine",
                                  appearance="intensity+thickness", appearance_penalty=1e-4,
                                  affine_penalty=0.0, n_candidates=None, screen_ratio=None,
                                  warp_dtype="float64", device="cpu").fit(templates)
    centers = st.cluster_centers_
    rows = centers + 0.3 * thickness_channel(torch.as_tensor(centers), (side, side)).numpy()
    np.testing.assert_array_equal(st.predict(rows), [0, 1])
    np.testing.assert_allclose(st.align(rows), centers, rtol=0, atol=1e-3)
