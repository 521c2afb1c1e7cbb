"""Graduated warp fits: from blurred centroids to the sharp one (``centroid_blur``)."""

import numpy as np
import pytest
import torch

from skxclust import SpatialTransformerKMeans
from skxclust.nn import graduated
from skxclust.nn.graduated import (
    BLURRED_CANDIDATES,
    auto_blur_widths,
    blur_images,
    check_blur_widths,
    graduated_fit_warps,
)
from skxclust.nn.pair_batch import warp_energy
from skxclust.nn.tps import pixel_grid
from skxclust.nn.warp_solver import fit_warps
from skxclust.nn.warps import make_warp_model

F64 = torch.float64
SHAPE = (12, 12)


def narrow_blobs(xs, width=0.02):
    p = pixel_grid(SHAPE, 2, F64)
    return torch.stack([torch.exp(-((p - torch.tensor([x, 0.0], dtype=F64)) ** 2).sum(1)
                                  / width) for x in xs])


@pytest.fixture(scope="module")
def model():
    return make_warp_model(SHAPE, 9, "tps", F64)


def test_blur_keeps_the_ink_of_an_interior_dot_and_spreads_it():
    dot = torch.zeros(1, 49, dtype=F64)
    dot[0, 24] = 1.0
    blurred = blur_images(dot, (7, 7), 1.0)
    assert float(blurred.sum()) == pytest.approx(1.0, abs=1e-3)
    assert float(blurred[0, 24]) == pytest.approx(1 / (2 * np.pi), rel=0.05)  # 2-D Gaussian
    assert torch.equal(blur_images(dot, (7, 7), 0.0), dot)


@pytest.mark.parametrize("shape", [(1, 21), (21, 1)])  # a row, and a one-pixel-wide column
def test_blur_of_a_signal_acts_along_its_axis_only(shape):
    spike = torch.zeros(1, 21, dtype=F64)
    spike[0, 10] = 1.0
    blurred = blur_images(spike, shape, 2.0)
    assert float(blurred.sum()) == pytest.approx(1.0, abs=1e-6)
    assert float(blurred[0, 10]) == pytest.approx(1 / (2 * np.sqrt(2 * np.pi)), rel=0.02)


@pytest.mark.parametrize("x", [0.3, 0.4, 0.5, 0.6])
def test_graduated_fit_finds_a_narrow_blob_the_plain_fit_misses(model, x):
    sample, centroid = narrow_blobs([x]), narrow_blobs([0.0])
    plain, _ = fit_warps(sample, centroid, model, penalty=1e-3)
    graduated, _ = graduated_fit_warps(sample, centroid, model, widths=(2.0, 1.0),
                                       penalty=1e-3)
    assert float(graduated) < 0.25 * float(plain)


@pytest.mark.parametrize("weights", [{}, {"bending_weight": 0.3, "affine_weight": 0.05},
                                     {"bending_weight": 4.0, "affine_weight": 0.5}])
def test_graduated_energies_are_those_of_the_sharp_centroids(model, weights):
    # every stage fits under the given penalty weights (each stage's energy is that of its
    # own weights: a stage under other weights would report energies this one differs from)
    samples, centroids = narrow_blobs([0.3, -0.2, 0.1]), narrow_blobs([0.0, 0.25])
    energy, warps = graduated_fit_warps(samples, centroids, model, widths=(2.0, 1.0),
                                        penalty=1e-3, screen_ratio=2.0, **weights)
    assert torch.allclose(energy, warp_energy(samples, centroids, model, warps, 1e-3,
                                              **weights), rtol=1e-10)


def test_no_widths_is_the_plain_fit(model):
    samples, centroids = narrow_blobs([0.3, -0.2]), narrow_blobs([0.0, 0.25])
    plain = fit_warps(samples, centroids, model, penalty=1e-3)
    for a, b in zip(plain, graduated_fit_warps(samples, centroids, model, widths=(),
                                               penalty=1e-3)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("n_centroids, screen, blurred_candidates, expected", [
    (5, {"screen_ratio": 2.0}, BLURRED_CANDIDATES, (None, 3, None)),
    (5, {"screen_ratio": 2.0, "n_candidates": 2}, BLURRED_CANDIDATES, (2, 2, 2)),
    (5, {"n_candidates": 4}, BLURRED_CANDIDATES, (4, 3, 4)),
    (5, {"n_candidates": 4}, None, (4, 4, 4)),
    (5, {}, BLURRED_CANDIDATES, (None, None, None)),  # no screening asked: none added
    (5, {"n_candidates": 5}, BLURRED_CANDIDATES, (5, 5, 5)),  # a cap of K screens nothing
])
def test_later_blurred_stages_fit_only_the_lowest_candidates_where_the_fit_screens(
        model, monkeypatch, n_centroids, screen, blurred_candidates, expected):
    """The blurred stage after the first (width 1) keeps at most BLURRED_CANDIDATES
    candidates per sample where the caller screens; the first (width 2) and the sharp
    stage screen as asked."""
    seen = []

    def spy(solver):
        def spied(samples, centroids, *args, **kwargs):
            seen.append(kwargs.get("n_candidates"))
            return solver(samples, centroids, *args, **kwargs)
        return spied

    monkeypatch.setattr(graduated, "fit_warps", spy(graduated.fit_warps))
    monkeypatch.setattr(graduated, "refit_warps", spy(graduated.refit_warps))
    samples = narrow_blobs([0.3, -0.2])
    centroids = narrow_blobs(np.linspace(-0.5, 0.5, n_centroids))
    energy, _ = graduated_fit_warps(samples, centroids, model, widths=(2.0, 1.0),
                                    penalty=1e-3, screen_steps=2,
                                    blurred_candidates=blurred_candidates, **screen)
    assert tuple(seen) == expected
    assert energy.shape == (2, n_centroids) and torch.isfinite(energy).all()


@pytest.mark.parametrize("widths, coarse_given, expected", [
    ((2.0, 1.0), True, 12), ((1.0,), True, 12), ((0.9, 0.5), True, 2), ((2.0, 1.0), False, 2)])
def test_first_stage_runs_on_the_coarse_level_when_its_blur_is_wide(
        model, monkeypatch, widths, coarse_given, expected):
    coarse = make_warp_model((6, 6), 9, "tps", F64) if coarse_given else None
    seen = []

    def spied(*args, **kwargs):
        seen.append(kwargs["coarse_steps"])
        return fit_warps(*args, **kwargs)

    monkeypatch.setattr(graduated, "fit_warps", spied)
    samples, centroids = narrow_blobs([0.3, -0.2]), narrow_blobs([0.0, 0.25])
    energy, warps = graduated_fit_warps(samples, centroids, model, widths=widths,
                                        penalty=1e-3, n_steps=12, coarse=coarse,
                                        coarse_steps=2)
    assert seen == [expected]
    assert torch.allclose(energy, warp_energy(samples, centroids, model, warps, 1e-3),
                          rtol=1e-10)  # the sharp energies, whatever level the start was on


@pytest.mark.parametrize("widths", [(1.0, 2.0), (0.0,), (-1.0,), (float("nan"),), ("a",), 3])
def test_bad_widths_are_refused_naming_the_parameter(widths):
    with pytest.raises(ValueError, match="centroid_blur must be a sequence of positive"):
        check_blur_widths(widths, "centroid_blur")


@pytest.mark.parametrize("shape, expected", [((28, 28), (2.0, 1.0)), ((8, 8), ()),
                                             ((14, 28), (1.0, 0.5)), ((13, 28), ()),
                                             ((1, 150), ()), ((150, 1), ())])
def test_auto_widths_scale_with_the_shorter_side_and_skip_small_images(shape, expected):
    assert auto_blur_widths(shape) == pytest.approx(expected)


@pytest.mark.parametrize("centroid_blur, n_features, expected", [
    ("auto", 784, (2.0, 1.0)), ("auto", 64, ()), ("auto", 150, ()), (None, 784, ()),
    ((), 64, ()),
    ([1.5, 0.5], 64, (1.5, 0.5))])
def test_estimator_passes_its_blur_to_the_geometry(centroid_blur, n_features, expected):
    st = SpatialTransformerKMeans(3, centroid_blur=centroid_blur)
    assert st._make_geometry(n_features).blur_widths == pytest.approx(expected)


def test_predict_uses_the_graduated_fit():
    """A model whose centroid is a narrow blob: predict's distance is the graduated one
    (the blob two pixels away is matched), and with centroid_blur=None the plain one."""
    X = narrow_blobs([0.0, 0.0, 0.5, 0.6]).numpy()
    distances = {}
    for blur in ((2.0, 1.0), None):
        st = SpatialTransformerKMeans(1, image_shape=SHAPE, n_landmarks=9, centroid_blur=blur,
                                      init=X[:1], max_iter=1, split_merge_moves=0,
                                      appearance="none", affine_penalty=0.5,
                                      warp_penalty=0.5, random_state=0).fit(X[:2])
        distances[blur] = st.transform(X[2:])[:, 0] ** 2
    assert (distances[(2.0, 1.0)] < 0.2 * distances[None]).all()


def test_equal_widths_in_a_row_are_accepted():
    # "decreasing" is not increasing: a width may repeat (one more stage at it)
    assert check_blur_widths((2.0, 2.0, 1.0)) == (2.0, 2.0, 1.0)


def test_blur_refuses_a_negative_width():
    with pytest.raises(ValueError, match="width must be >= 0"):
        blur_images(torch.zeros(1, 144, dtype=F64), SHAPE, -0.5)


def test_every_stage_fits_only_the_allowed_pairs(model):
    # the later (refit) stages keep the restriction of the first
    samples, centroids = narrow_blobs([0.3, -0.2]), narrow_blobs([0.0, 0.1, -0.3])
    allowed = torch.tensor([[True, False, True], [False, True, True]])
    energies, _ = graduated_fit_warps(samples, centroids, model, widths=(2.0, 1.0),
                                      penalty=1e-3, allowed=allowed)
    assert torch.isinf(energies[~allowed]).all() and torch.isfinite(energies[allowed]).all()
