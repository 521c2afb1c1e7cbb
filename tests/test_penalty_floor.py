"""The floor of a row's warp penalty (skxclust.nn.warp_evidence.penalty_scale): a
constant row keeps a regularised warp and a score on the scale of the other rows', and
rows above the floor fit and score as without it. Under noise="contrast" a nearly
constant row's noise scale is that floored penalty scale, and its weight at most 100."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from test_appearance import _channels, _profiled

import skxclust._warp_geometry as warp_geometry
from skxclust import SpatialTransformerKMeans
from skxclust._noise import NOISE_FLOOR, contrast_weights
from skxclust.nn.warp_evidence import PENALTY_FLOOR, penalty_scale, row_contrast
from skxclust.nn.warps import warp_images

F64 = torch.float64


def digits():
    X = load_digits().data
    return X[:120], X[120:200]


def blank_rows(n=2):
    return np.full((n, 64), 5.0)


def fitted(n_landmarks):
    return SpatialTransformerKMeans(4, n_landmarks=n_landmarks, random_state=0,
                                    max_iter=3).fit(digits()[0])


@pytest.fixture(scope="module")
def models():
    return {n_landmarks: fitted(n_landmarks) for n_landmarks in (4, 9)}


def without_floor(monkeypatch):
    monkeypatch.setattr(warp_geometry, "penalty_scale",
                        lambda X, centers: penalty_scale(X, centers, floor=0.0))


def test_penalty_scale_is_the_contrast_above_the_floor_and_the_floor_below():
    g = torch.Generator().manual_seed(0)
    centers = torch.randn(3, 12, generator=g, dtype=F64)
    floor = PENALTY_FLOOR * float(row_contrast(centers).mean())
    X = torch.randn(4, 12, generator=g, dtype=F64)
    X[1] = 7.0  # constant: contrast 0
    X[2] = 3.0 + 1e-3 * X[3]  # below the floor, not zero
    got = penalty_scale(X, centers)
    expected = row_contrast(X)
    assert float(expected[2]) < floor < float(expected[[0, 3]].min())
    expected[1:3] = floor
    torch.testing.assert_close(got, expected, rtol=1e-15, atol=0.0)
    assert PENALTY_FLOOR == 1e-2
    torch.testing.assert_close(penalty_scale(X, centers, floor=0.0), row_contrast(X))


@pytest.mark.parametrize("scale, offset", [(2.0**-30, 0.0), (3.0, -5.0), (1e6, 1e3)])
def test_penalty_scale_scales_as_the_square_of_the_data_and_ignores_its_offset(scale, offset):
    # the penalties stay invariant to the unit and offset of the data at the floor too
    g = torch.Generator().manual_seed(1)
    centers = torch.randn(3, 10, generator=g, dtype=F64)
    X = torch.randn(3, 10, generator=g, dtype=F64)
    X[0] = 1.0
    torch.testing.assert_close(penalty_scale(scale * X + offset, scale * centers + offset),
                               scale**2 * penalty_scale(X, centers), rtol=1e-9, atol=0.0)


def test_rows_above_the_floor_fit_and_score_as_without_it(models, monkeypatch):
    # no digit is near the floor (the least contrast is 0.85 of the centroids' mean)
    without_floor(monkeypatch)
    plain = fitted(4)
    np.testing.assert_array_equal(plain.cluster_centers_, models[4].cluster_centers_)
    np.testing.assert_array_equal(plain.labels_, models[4].labels_)
    X_test = digits()[1]
    assert plain.score(X_test) == models[4].score(X_test)


@pytest.mark.parametrize("n_landmarks", [4, 9])
def test_a_blank_row_scores_on_the_scale_of_the_digits_not_thousands_below(models,
                                                                          n_landmarks):
    # without the floor its warp was free and the flat prior's Occam volume cost its
    # score about 2,800 (4 landmarks) and 6,300 (9 landmarks) more than a digit's
    model = models[n_landmarks]
    digit_scores = [model.score(row[None]) for row in digits()[1][:10]]
    blank = model.score(blank_rows(1))
    assert np.isfinite(blank)
    assert min(digit_scores) - 50.0 < blank < max(digit_scores) + 50.0


def test_blank_rows_leave_the_ranking_of_n_landmarks_by_score(models):
    # two blank rows among 80 held-out digits reversed the ranking without the floor,
    # so a GridSearchCV over n_landmarks picked the other model
    X_test = digits()[1]
    with_blank = np.vstack([X_test, blank_rows()])
    clean = [models[n].score(X_test) for n in (4, 9)]
    blank = [models[n].score(with_blank) for n in (4, 9)]
    assert clean[1] > clean[0]
    assert blank[1] > blank[0]


def test_a_blank_rows_warp_pays_its_floored_penalty(models, monkeypatch):
    # its distance to each centroid lies between the unpenalised optimum (the fit without
    # the floor, which warps the ink away) and the energy at the identity (where the
    # solver starts, and its steps never raise the energy)
    model = models[4]
    blank = blank_rows(1)
    floored = model.transform(blank)[0] ** 2
    without_floor(monkeypatch)
    free = model.transform(blank)[0] ** 2
    identity = ((blank - model.cluster_centers_) ** 2).sum(1)
    assert (free < floored).all()
    assert (floored <= identity * (1 + 1e-9)).all()


@pytest.mark.parametrize("n_landmarks", [4, 9])
def test_relevance_of_a_blank_row_sums_to_its_evidence(models, n_landmarks):
    # a constant row: no pixel stands out, and the rules still conserve (no 0 / 0)
    model = models[n_landmarks]
    rows = np.vstack([blank_rows(1), digits()[1][:2]])
    f = model.decision_function(rows).max(1)
    R = model.explain(rows)
    np.testing.assert_allclose(R.sum(1), f, rtol=0, atol=1e-6 * np.abs(f).max())


def test_appearance_coefficients_of_a_blank_row_minimise_its_floored_energy(models):
    # the effective centroids (explain) and the assignment's fits (the centroid update,
    # align) take the gain and offset of least energy under the floored penalty, as the
    # warp fit does: unpenalised, a blank row's gain would be 0
    model = models[4]
    x = torch.as_tensor(np.vstack([blank_rows(1), digits()[1][:1]]))
    centers = torch.as_tensor(model.cluster_centers_)
    geometry = model._make_geometry(x.shape[1])
    warp_model = geometry.model(x)
    _, warps = geometry.pair_warps(x, centers)
    effective = geometry.effective_centroids(x, centers, warps)
    fit = geometry.assign(x, centers)
    scale = penalty_scale(x, centers)
    assert float(scale[0]) > 0.0
    for i, k in np.ndindex(*warps.shape[:2]):
        _, coef = _profiled(model.appearance, model.appearance_penalty, x[i], centers[k],
                            warp_model, warps[i, k].reshape(-1), float(scale[i]))
        warped = warp_images(_channels(model.appearance, centers[k], warp_model.shape),
                             warp_model, warps[i, k][None, None].expand(1, 1, -1, -1))[:, 0]
        torch.testing.assert_close(effective[i, k], coef[:-1] @ warped + coef[-1])
        if k == int(fit.labels[i]):
            torch.testing.assert_close(fit.state.coef[i], coef[:-1])
            torch.testing.assert_close(fit.state.offset[i], coef[-1])
    assert abs(float(fit.state.coef[0, 0])) > 1e-3


def faint_rows(n=2):
    # nearly constant rows (a blank page with a little sensor noise): contrast ~6e-5, a
    # hundred-thousandth of a digit's
    return 5.0 + 1e-3 * np.random.default_rng(0).standard_normal((n, 64))


@pytest.fixture(scope="module")
def contrast_models():
    return {n: SpatialTransformerKMeans(4, n_landmarks=n, random_state=0, max_iter=3,
                                        noise="contrast").fit(digits()[0]) for n in (4, 9)}


@pytest.mark.parametrize("noise", ["constant", "contrast"])
def test_a_faint_row_scores_on_the_scale_of_the_digits_under_either_noise_model(
        models, contrast_models, noise):
    # with noise="contrast" its variance was sigma^2 c(x) while its energy held penalties
    # on another scale: -3e5 per row (and -4e7 once the penalties were floored, until the
    # noise scale followed them); with "constant", -320 for a digit's -140 to -180. Under
    # "contrast" its variance is floored at a tenth of the centroids' mean contrast, so its
    # density may exceed a typical digit's by the normaliser, P/2 log 10 = 74 nats (it does:
    # -75 for the digits' -147 to -180)
    model = (models if noise == "constant" else contrast_models)[4]
    digit_scores = [model.score(row[None]) for row in digits()[1][:10]]
    above = 0.0 if noise == "constant" else 32 * np.log(1.0 / NOISE_FLOOR)
    for row in faint_rows():
        assert min(digit_scores) - 50.0 < model.score(row[None]) < max(digit_scores) + \
            above + 50.0


def test_faint_rows_leave_the_ranking_of_n_landmarks_by_score_under_contrast_noise(
        contrast_models):
    X_test = digits()[1]
    with_faint = np.vstack([X_test, faint_rows()])
    clean = [contrast_models[n].score(X_test) for n in (4, 9)]
    faint = [contrast_models[n].score(with_faint) for n in (4, 9)]
    assert (clean[1] > clean[0]) == (faint[1] > faint[0])
    assert abs((faint[1] - faint[0]) - (clean[1] - clean[0])) < 0.1 * abs(clean[1] - clean[0])


def test_a_faint_row_weighs_at_most_ten_rows_under_contrast_noise():
    # its noise variance is floored at that of a row with a tenth of the mean contrast
    # (was ~1e5 rows without a floor, 100 with the penalties' 1 %)
    X = np.vstack([digits()[0][:20], faint_rows()])
    weights, scale = contrast_weights(X, np.ones(22))
    c = row_contrast(torch.as_tensor(X)).numpy()
    assert scale == pytest.approx(c.mean(), rel=1e-12)
    assert NOISE_FLOOR == 0.1
    np.testing.assert_allclose(weights[:20], scale / c[:20], rtol=1e-12)
    np.testing.assert_allclose(weights[20:], 1.0 / NOISE_FLOOR, rtol=1e-12)


def test_rows_above_the_noise_floor_weigh_the_mean_contrast_over_theirs():
    # a row at a fifth of the mean contrast is above the floor: unfloored weight 5
    X = np.vstack([digits()[0][:20], faint_rows()])
    c = row_contrast(torch.as_tensor(X)).numpy()
    faint = X[20] - X[20].mean()
    X[20] = X[20].mean() + faint * np.sqrt(0.2 * c.mean() / c[20])  # contrast 0.2 c-bar
    weights, scale = contrast_weights(X, np.ones(22))
    assert weights[20] == pytest.approx(scale / float(row_contrast(torch.as_tensor(X[20:21]))[0]),
                                        rel=1e-9)
    assert 4.0 < weights[20] < 6.0


@pytest.mark.parametrize("noise", ["constant", "contrast"])
def test_the_noise_scale_is_the_contrast_floored_at_a_tenth_of_the_centroids(noise):
    geometry = SpatialTransformerKMeans(3, noise=noise)._make_geometry(64)
    X = torch.as_tensor(np.vstack([digits()[1][:3], faint_rows()]), dtype=torch.float32)
    centers = torch.as_tensor(digits()[0][:3], dtype=torch.float32)
    scale = geometry.noise_scale(X, centers)
    if noise == "constant":
        assert scale is None
        return
    assert scale.dtype == F64
    floor = NOISE_FLOOR * float(row_contrast(centers.double()).mean())
    expected = row_contrast(X.double()).clamp_min(floor)
    torch.testing.assert_close(scale, expected, rtol=1e-12, atol=0.0)
    torch.testing.assert_close(scale[3:], torch.full((2,), floor, dtype=F64), rtol=1e-12,
                               atol=0.0)  # the faint rows sit on the floor
