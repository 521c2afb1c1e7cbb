"""noise="contrast": a row's pixel noise variance scales with its contrast ||x - mean(x)||^2."""

import dask.array as da
import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_digits

from skxclust import SpatialTransformerKMeans
from skxclust._noise import NOISE_FLOOR, contrast_weights
from skxclust.nn.warp_evidence import laplace_log_evidence, row_contrast

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FAST = dict(max_iter=2, split_merge_moves=0, n_steps=6, affine_steps=2, random_state=0)


@pytest.fixture(scope="module")
def digits():
    X = load_digits().data[:240]
    gain = np.random.default_rng(0).uniform(0.3, 3.0, (len(X), 1))
    return X * gain  # contrasts spread over a factor of 100


def contrast(X):
    return ((X - X.mean(1, keepdims=True)) ** 2).sum(1)


def floored(c, scale):
    """The contrasts ``c`` floored at NOISE_FLOOR times ``scale`` (a row's noise scale)."""
    return np.maximum(c, NOISE_FLOOR * scale)


@pytest.mark.parametrize("appearance", ["none", "intensity"])
def test_contrast_noise_fits_as_the_constant_model_with_rows_weighed_by_mean_over_contrast(
        digits, appearance):
    c = contrast(digits)
    ours = SpatialTransformerKMeans(6, appearance=appearance, noise="contrast", **FAST)
    ours.fit(digits)
    weighted = SpatialTransformerKMeans(6, appearance=appearance, **FAST)
    weighted.fit(digits, sample_weight=c.mean() / floored(c, c.mean()))
    # (the same weights up to rounding: their mean is taken in another order)
    np.testing.assert_allclose(ours.cluster_centers_, weighted.cluster_centers_, rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_array_equal(ours.labels_, weighted.labels_)
    assert ours.inertia_ == pytest.approx(weighted.inertia_, rel=1e-10)
    plain = SpatialTransformerKMeans(6, appearance=appearance, **FAST).fit(digits)
    assert not np.array_equal(plain.cluster_centers_, ours.cluster_centers_)


def test_contrast_weights_multiply_the_sample_weights_and_are_relative_to_their_mean(digits):
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(digits))
    weights, scale = contrast_weights(digits, w)
    c = contrast(digits)
    assert scale == pytest.approx(w @ c / w.sum())
    assert 0 < np.sum(c < NOISE_FLOOR * scale) < len(c) // 4  # its faintest rows: floored
    np.testing.assert_allclose(weights, w * scale / floored(c, scale))
    # a dask array and a torch tensor give the same weights
    np.testing.assert_allclose(contrast_weights(da.from_array(digits, chunks=50), w)[0], weights)
    np.testing.assert_allclose(contrast_weights(torch.as_tensor(digits), w)[0], weights)


def test_the_noise_model_changes_the_centroids_never_the_assignment_to_them(digits):
    est = SpatialTransformerKMeans(6, noise="contrast", **FAST).fit(digits)
    constant = clone(est).set_params(noise="constant")
    constant.__dict__.update({k: v for k, v in est.__dict__.items() if k.endswith("_")})
    np.testing.assert_array_equal(constant.predict(digits), est.predict(digits))
    np.testing.assert_array_equal(constant.transform(digits), est.transform(digits))


def test_contrast_noise_variance_is_the_mean_distance_per_pixel_and_unit_of_contrast(digits):
    est = SpatialTransformerKMeans(6, noise="contrast", **FAST).fit(digits)
    energy = est.transform(digits).min(1) ** 2  # all 240 rows are the statistics' rows
    scale = floored(contrast(digits), contrast(est.cluster_centers_).mean())
    expected = np.mean(energy / scale) / digits.shape[1]
    assert est.noise_variance_ == pytest.approx(expected, rel=1e-4)


def test_contrast_noise_scores_each_row_with_a_variance_proportional_to_its_contrast(digits):
    est = SpatialTransformerKMeans(6, noise="contrast", **FAST).fit(digits)
    constant = clone(est).set_params(noise="constant")
    constant.__dict__.update({k: v for k, v in est.__dict__.items() if k.endswith("_")})
    rows = digits[:40]
    # the same fits (same volumes): the score differs by the noise terms alone
    energy = torch.as_tensor(est.transform(rows).min(1) ** 2)
    c = row_contrast(torch.as_tensor(rows))
    s2, P = est.noise_variance_, rows.shape[1]
    zero = torch.zeros(len(rows), dtype=torch.float64)
    difference = (laplace_log_evidence(energy, zero, P, s2, c)
                  - laplace_log_evidence(energy, zero, P, s2)).sum()
    assert est.score(rows) - constant.score(rows) == pytest.approx(float(difference), rel=1e-6)


def held_out_scores(X, n_clusters):
    return {noise: SpatialTransformerKMeans(n_clusters, noise=noise, **FAST).fit(
        X[::2]).score(X[1::2]) for noise in ("constant", "contrast")}


def test_score_prefers_contrast_noise_on_digits_of_random_contrast():
    X = load_digits().data[:300]
    rng = np.random.default_rng(0)
    X = X * rng.uniform(0.4, 1.0, (len(X), 1)) + rng.uniform(0.0, 4.0, (len(X), 1))
    scores = held_out_scores(X, 10)
    assert scores["contrast"] > scores["constant"] + 300  # measured: 714


def test_score_prefers_constant_noise_where_the_noise_does_not_follow_the_contrast():
    t = np.linspace(-1, 1, 8)
    bump = np.exp(-((t[:, None] + 0.3) ** 2 + (t - 0.2) ** 2) / 0.2).ravel()
    rng = np.random.default_rng(0)
    gain = rng.uniform(0.5, 2.0, (120, 1))
    X = gain * bump + rng.normal(0.0, 0.05, (120, 64))  # contrasts 0.25x to 4x, one noise
    scores = held_out_scores(X, 1)
    assert scores["constant"] > scores["contrast"] + 300  # measured: 723


def test_contrast_noise_refuses_a_constant_row_naming_the_parameter_and_the_row(digits):
    X = digits.copy()
    X[3] = 7.0
    est = SpatialTransformerKMeans(6, noise="contrast", **FAST)
    with pytest.raises(ValueError, match=r"noise='contrast'.*\(the first: row 3\)"):
        est.fit(X)
    assert not hasattr(est, "cluster_centers_")
    est.fit(digits)
    with pytest.raises(ValueError, match=r"noise='contrast'.*row 0"):
        est.score(X[3:5])


def test_partial_fit_weighs_later_chunks_relative_to_the_first_chunks_mean_contrast(digits):
    first, second = digits[:120], digits[120:] * 4.0  # the second chunk is 16x the contrast
    est = SpatialTransformerKMeans(6, noise="contrast", **FAST)
    est.partial_fit(first)
    scale = est._row_weight_scale
    assert scale == pytest.approx(contrast(first).mean())
    reference = SpatialTransformerKMeans(6, **FAST)
    reference.partial_fit(first, sample_weight=scale / floored(contrast(first), scale))
    est.partial_fit(second)
    reference.partial_fit(second, sample_weight=scale / floored(contrast(second), scale))
    assert est._row_weight_scale == scale
    np.testing.assert_allclose(est.cluster_centers_, reference.cluster_centers_, rtol=1e-10)


def test_a_dask_fit_weighs_the_rows_as_the_in_memory_fit(digits):
    X = da.from_array(digits, chunks=80)
    c = contrast(digits)
    ours = SpatialTransformerKMeans(6, noise="contrast", **FAST).fit(X)
    weighted = SpatialTransformerKMeans(6, **FAST).fit(X, sample_weight=c.mean() /
                                                        floored(c, c.mean()))
    np.testing.assert_allclose(ours.cluster_centers_, weighted.cluster_centers_, rtol=1e-10)


@pytest.mark.parametrize("kind", ["numpy", "numpy_read_only", "torch", "dask"])
def test_input_contrast_is_every_rows_contrast_whatever_the_blocks(monkeypatch, digits, kind):
    # numpy rows go through in blocks of _CHUNK_ROWS (here 7, so 240 rows make 35 blocks,
    # the last one short), dask by its own blocks
    from skxclust import _noise

    monkeypatch.setattr(_noise, "_CHUNK_ROWS", 7)
    X = {"numpy": digits, "numpy_read_only": digits.copy(), "torch": torch.as_tensor(digits),
         "dask": da.from_array(digits, chunks=50)}[kind]
    if kind == "numpy_read_only":
        X.setflags(write=False)
    got = _noise.input_contrast(X)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, contrast(digits), rtol=1e-12)
