"""How ST K-means schedules its warp fits: the coarse level, screening by energy ratio,
the precision of the solve, the scale of the data, and fits on a subset of many rows."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.metrics import adjusted_rand_score

from skxclust import SpatialTransformerKMeans
from skxclust._validation import make_generators
from skxclust.nn.pair_batch import pair_scale, warp_energy
from skxclust.nn.pyramid import coarse_shape, downsample_images
from skxclust.nn.tps import pixel_grid
from skxclust.nn.warp_solver import fit_warps
from skxclust.nn.warps import make_warp_model

F64 = torch.float64


def strokes(shape, n, seed=0, dtype=F64):
    """``n`` random thin strokes (Gaussian ridges at random angles and offsets)."""
    g = torch.Generator().manual_seed(seed)
    ndim = 1 if min(shape) == 1 else 2
    p = pixel_grid(shape, ndim, F64)
    out = []
    for _ in range(n):
        angle, offset, width = torch.rand(3, generator=g, dtype=F64)
        if ndim == 1:
            out.append(torch.exp(-((p[:, 0] - (offset - 0.5)) ** 2) / (0.02 + 0.05 * width)))
            continue
        normal = torch.stack([torch.cos(3.14 * angle), torch.sin(3.14 * angle)])
        out.append(torch.exp(-((p @ normal - (offset - 0.5)) ** 2) / (0.01 + 0.03 * width)))
    return torch.stack(out).to(dtype)


def contrast(x):
    c = x - x.mean(1, keepdim=True)
    return (c * c).sum(1)


# -- the coarse level ---------------------------------------------------------------------
@pytest.mark.parametrize("shape, expected", [((28, 28), (14, 14)), ((27, 20), (14, 10)),
                                             ((1, 150), (1, 75)), ((40, 1), (20, 1)),
                                             ((8, 8), None), ((28, 18), None)])
def test_coarse_shape_halves_each_axis_or_declines_small_images(shape, expected):
    assert coarse_shape(shape) == expected


@pytest.mark.parametrize("shape", [(28, 28), (27, 20), (1, 41)])
def test_downsampling_keeps_constants_and_the_total_ink(shape):
    coarse = coarse_shape(shape, min_side=2)
    flat = torch.full((1, shape[0] * shape[1]), 2.5, dtype=F64)
    torch.testing.assert_close(downsample_images(flat, shape, coarse),
                               torch.full((1, coarse[0] * coarse[1]), 2.5, dtype=F64))
    x = strokes(shape, 3)
    ratio = (coarse[0] * coarse[1]) / (shape[0] * shape[1])
    # interior ink: each coarse pixel averages its neighbourhood, so the sum scales with
    # the pixel count (the strokes stay clear of the border by their Gaussian tails)
    total = x.sum(1)
    np.testing.assert_allclose(downsample_images(x, shape, coarse).sum(1) / ratio, total,
                               rtol=0.1)


@pytest.mark.parametrize("shape", [(29, 29), (1, 41), (21, 1)])
def test_a_coarse_pixel_samples_the_image_at_its_own_normalised_position(shape):
    # coarse pixel i sits at -1 + 2 i / (m - 1) in normalised coordinates: a linear ramp
    # is kept exactly at the interior coarse pixels (whole tents, here 2 pixels apart)
    coarse = coarse_shape(shape)
    grid = pixel_grid(shape, 2, F64)
    ramp = (0.7 * grid[:, 0] - 0.3 * grid[:, 1])[None]
    out = downsample_images(ramp, shape, coarse).reshape(coarse)
    expected = (0.7 * pixel_grid(coarse, 2, F64)[:, 0]
                - 0.3 * pixel_grid(coarse, 2, F64)[:, 1]).reshape(coarse)
    inner = tuple(slice(None) if side == 1 else slice(1, -1) for side in coarse)
    torch.testing.assert_close(out[inner], expected[inner], rtol=0, atol=1e-12)


@pytest.mark.parametrize("shape, transform", [((28, 28), "tps"), ((24, 22), "affine+tps"),
                                              ((1, 60), "tps"), ((26, 26), "affine")])
@pytest.mark.parametrize("coarse_steps, screen", [(0, None), (3, None), (3, 1.5),
                                                  (2, 1.2), (6, 1.5)])
def test_every_returned_energy_is_the_full_resolution_energy_of_the_returned_warp(
        shape, transform, coarse_steps, screen):
    x, mu = strokes(shape, 5, seed=1), strokes(shape, 3, seed=2)
    model = make_warp_model(shape, 9, transform, F64)
    coarse = make_warp_model(coarse_shape(shape), 9, transform, F64)
    energy, params = fit_warps(x, mu, model, penalty=contrast(x), n_steps=6, affine_steps=3,
                               coarse=coarse, coarse_steps=coarse_steps, screen_steps=2,
                               screen_ratio=screen)
    torch.testing.assert_close(energy, warp_energy(x, mu, model, params, contrast(x)),
                               rtol=1e-12, atol=1e-12)
    identity = warp_energy(x, mu, model, torch.zeros_like(params), contrast(x))
    assert torch.all(energy.min(1).values < identity.min(1).values)


def upsampled_digits(rows, side=24):
    """Rows of scikit-learn's digits, bilinearly upsampled to ``side x side``."""
    X = torch.as_tensor(np.asarray(rows, dtype=np.float64)).reshape(-1, 1, 8, 8)
    return torch.nn.functional.interpolate(X, size=(side, side), mode="bilinear",
                                           align_corners=True).reshape(len(rows), -1)


def test_coarse_fits_reach_the_energy_of_full_resolution_fits():
    d = load_digits()
    x = upsampled_digits(d.data[100:130])
    mu = upsampled_digits([d.data[d.target == k][:20].mean(0) for k in range(10)])
    model = make_warp_model((24, 24), 16, "tps", F64)
    coarse = make_warp_model((12, 12), 16, "tps", F64)
    kw = dict(penalty=contrast(x), n_steps=20, bending_weight=0.5, affine_weight=0.5)
    full, _ = fit_warps(x, mu, model, **kw)
    both, _ = fit_warps(x, mu, model, coarse=coarse, coarse_steps=3, **kw)
    identity = warp_energy(x, mu, model, torch.zeros(30, 10, 16, 2, dtype=F64),
                           contrast(x), 0.5, 0.5)
    # what warping gains over the identity, summed over the pairs: the same (measured
    # 1.0015 of the full-resolution fits); every sample's nearest distance within 2 %
    assert float((identity - both).sum() / (identity - full).sum()) > 0.99
    nearest_full, nearest_both = full.min(1).values, both.min(1).values
    assert float(((nearest_both - nearest_full) / nearest_full).abs().max()) < 0.05
    assert torch.equal(both.argmin(1), full.argmin(1))


# -- screening by the ratio of energies -----------------------------------------------------
# screen_steps=0 (no affine steps): screened on the starting warps, before any step
@pytest.mark.parametrize("screen_steps, affine_steps", [(0, 0), (2, 2)])
def test_screening_keeps_the_centroids_within_the_ratio_and_freezes_the_others(
        screen_steps, affine_steps):
    shape = (12, 12)
    x, mu = strokes(shape, 6, seed=5), strokes(shape, 5, seed=6)
    model = make_warp_model(shape, 9, "tps", F64)
    kw = dict(penalty=contrast(x), affine_steps=affine_steps, screen_steps=screen_steps)
    at_screen, screen_params = fit_warps(x, mu, model, n_steps=screen_steps, **kw)
    full, _ = fit_warps(x, mu, model, n_steps=8, **kw)
    screened, params = fit_warps(x, mu, model, n_steps=8, screen_ratio=1.3, **kw)
    lowest = at_screen.min(1, keepdim=True).values
    kept = at_screen <= 1.3 * lowest
    assert 0 < int(kept.sum()) < kept.numel()  # some pairs dropped, some kept
    # candidates are fitted as without screening, the others keep the warp they had
    torch.testing.assert_close(screened[kept], full[kept], rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(screened[~kept], at_screen[~kept], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(params[~kept], screen_params[~kept])
    torch.testing.assert_close(fit_warps(x, mu, model, n_steps=8, screen_ratio=1e9, **kw)[0],
                               full, rtol=1e-9, atol=1e-12)


def test_a_candidate_cap_and_the_ratio_both_apply():
    shape = (12, 12)
    x, mu = strokes(shape, 6, seed=7), strokes(shape, 5, seed=8)
    model = make_warp_model(shape, 9, "tps", F64)
    kw = dict(penalty=contrast(x), affine_steps=2, screen_steps=1)
    at_screen, _ = fit_warps(x, mu, model, n_steps=1, **kw)
    screened, _ = fit_warps(x, mu, model, n_steps=6, n_candidates=1, screen_ratio=1e9, **kw)
    best = at_screen.argmin(1)
    rows = torch.arange(6)
    others = torch.ones_like(at_screen, dtype=torch.bool)
    others[rows, best] = False
    torch.testing.assert_close(screened[others], at_screen[others], rtol=1e-12, atol=1e-12)
    assert torch.all(screened[rows, best] <= at_screen[rows, best])


# -- scale and precision ------------------------------------------------------------------
@pytest.mark.parametrize("exponent", [-500, -60, 0, 60, 480])
def test_warp_fits_do_not_depend_on_the_scale_of_the_data(exponent):
    shape = (10, 10)
    x, mu = strokes(shape, 3, seed=9), strokes(shape, 2, seed=10)
    model = make_warp_model(shape, 9, "tps", F64)
    energy, params = fit_warps(x, mu, model, penalty=contrast(x), n_steps=6)
    c = 2.0 ** exponent  # a power of two: the scaled fit is the same computation
    scaled, scaled_params = fit_warps(x * c, mu * c, model, penalty=contrast(x) * c * c,
                                      n_steps=6)
    assert torch.equal(scaled_params, params)
    assert torch.equal(scaled, energy * (c * c))


def test_pair_scale_is_a_power_of_two_at_or_above_the_largest_magnitude():
    for largest in (3e-200, 0.3, 1.0, 7.5, 2e250):
        x = torch.tensor([[largest, -largest / 3]], dtype=F64)
        scale = float(pair_scale(x, torch.zeros(1, 2, dtype=F64)))
        assert largest <= scale <= 2 * largest
        assert np.log2(scale) == round(np.log2(scale))
    assert float(pair_scale(torch.zeros(2, 3), torch.zeros(1, 3))) == 1.0


@pytest.fixture(scope="module")
def digits():
    X = load_digits().data[:240]
    return X, X.astype(np.float32)


FAST = dict(n_clusters=4, n_steps=4, max_iter=2, split_merge_moves=0, random_state=0,
            device="cpu")


@pytest.mark.parametrize("warp_dtype", ["float32", "float64"])
def test_float64_data_keeps_float64_outputs_whatever_the_warp_precision(digits, warp_dtype):
    X = digits[0]
    st = SpatialTransformerKMeans(warp_dtype=warp_dtype, **FAST).fit(X)
    D = st.transform(X)
    f = st.decision_function(X)
    R = st.explain(X)
    assert st.cluster_centers_.dtype == D.dtype == f.dtype == R.dtype == np.float64
    np.testing.assert_array_equal(st.labels_, st.predict(X))
    np.testing.assert_array_equal(D.argmin(1), st.labels_)
    # relevance conserves the float64 evidence to float64 precision
    np.testing.assert_allclose(R.sum(1), f.max(1), rtol=1e-10, atol=1e-10 * np.abs(f).max())
    d2 = D**2
    for c in range(4):
        others = np.delete(d2, c, axis=1).min(1)
        np.testing.assert_allclose(f[:, c], others - d2[:, c], rtol=1e-9,
                                   atol=1e-9 * d2.max())


@pytest.mark.parametrize("appearance", ["none", "intensity"])
def test_float32_warps_give_the_float64_model_up_to_rounding(digits, appearance):
    # 4 clusters of 10 digits: near-equal optima exist (measured ARI 0.99 without an
    # appearance transformation, 0.88 with intensity; distortions within 0.4 %)
    X = digits[0]
    a = SpatialTransformerKMeans(warp_dtype="float32", appearance=appearance, **FAST).fit(X)
    b = SpatialTransformerKMeans(warp_dtype="float64", appearance=appearance, **FAST).fit(X)
    assert adjusted_rand_score(a.labels_, b.labels_) > 0.85
    np.testing.assert_allclose(a.inertia_, b.inertia_, rtol=0.02)


def test_a_float64_solve_of_float32_data_returns_float32(digits):
    X32 = digits[1]
    st = SpatialTransformerKMeans(warp_dtype="float64", **FAST).fit(X32)
    assert st.cluster_centers_.dtype == st.transform(X32).dtype == np.float32
    np.testing.assert_array_equal(st.labels_, st.predict(X32))


@pytest.mark.parametrize("scale", [2.0**-480, 1e-150, 1e120])
def test_the_float32_solve_fits_data_of_any_float64_scale(digits, scale):
    X = digits[0]
    ref = SpatialTransformerKMeans(**FAST).fit(X)
    scaled = SpatialTransformerKMeans(**FAST).fit(X * scale)
    if np.log2(scale) == round(np.log2(scale)):  # the same computation, exactly
        np.testing.assert_array_equal(scaled.labels_, ref.labels_)
        assert scaled.inertia_ == ref.inertia_ * scale**2
    # otherwise the Euclidean initialisation may number the same clusters differently
    assert adjusted_rand_score(scaled.labels_, ref.labels_) == 1.0
    np.testing.assert_allclose(scaled.inertia_, ref.inertia_ * scale**2, rtol=1e-5)


def test_small_images_have_no_coarse_level(digits):
    X = digits[0]
    a = SpatialTransformerKMeans(coarse_steps=3, **FAST).fit(X)
    b = SpatialTransformerKMeans(coarse_steps=None, **FAST).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)


# -- fits on a subset of many rows --------------------------------------------------------
def _subset_rows(n_samples, subsample, random_state):
    """The rows a fit with ``subsample`` draws (the second generator of random_state)."""
    generator = make_generators(random_state, 2)[1]
    return torch.randperm(n_samples, generator=generator)[:subsample].sort().values.numpy()


def test_above_subsample_rows_the_fit_runs_on_a_subset_then_assigns_every_row(digits):
    X = digits[0]
    st = SpatialTransformerKMeans(subsample=120, **FAST).fit(X)
    assert st.labels_.shape == (240,)
    np.testing.assert_array_equal(st.labels_, st.predict(X))
    np.testing.assert_allclose(st.inertia_, -np.sum(-st.transform(X).min(1) ** 2),
                               rtol=1e-9)
    on_subset = SpatialTransformerKMeans(subsample=120, **{**FAST, "max_iter": 1}).fit(X)
    assert on_subset.n_iter_ == 1  # the subset's iteration; the pass over every row moves
    # no centroid: refitting on the subset's rows alone gives the same centroids
    rows = _subset_rows(240, 120, FAST["random_state"])
    alone = SpatialTransformerKMeans(subsample=None, **FAST).fit(X[rows])
    np.testing.assert_allclose(st.cluster_centers_, alone.cluster_centers_, rtol=1e-6,
                               atol=1e-9)


def test_at_or_below_subsample_rows_the_fit_is_the_full_fit(digits):
    X = digits[0]
    a = SpatialTransformerKMeans(subsample=240, **FAST).fit(X)
    b = SpatialTransformerKMeans(subsample=None, **FAST).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.labels_, b.labels_)


def test_the_subset_is_drawn_with_random_state(digits):
    X = digits[0]
    a = SpatialTransformerKMeans(subsample=100, **FAST).fit(X)
    b = SpatialTransformerKMeans(subsample=100, **FAST).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)


# -- threads ------------------------------------------------------------------------------
def test_results_do_not_depend_on_the_number_of_torch_threads(digits):
    X = digits[0]
    before = torch.get_num_threads()
    try:
        fits = []
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            st = SpatialTransformerKMeans(batch_size=16, **FAST).fit(X)
            fits.append((st.cluster_centers_, st.labels_, st.transform(X[:50]),
                         st.explain(X[:50])))
    finally:
        torch.set_num_threads(before)
    for other in fits[1:]:
        for a, b in zip(fits[0][:3], other[:3]):
            np.testing.assert_array_equal(a, b)
        # relevance: equal but for the last bit of some float64 energies (seen: 2e-13 of
        # ~1e3) when torch was configured with another thread count before the call
        np.testing.assert_allclose(other[3], fits[0][3], rtol=1e-12,
                                   atol=1e-12 * np.abs(fits[0][3]).max())


def test_a_chunk_of_one_row_is_screened_like_any_other():
    shape = (12, 12)
    x, mu = strokes(shape, 1, seed=11), strokes(shape, 4, seed=12)
    model = make_warp_model(shape, 9, "tps", F64)
    kw = dict(penalty=contrast(x), n_steps=5, affine_steps=2, screen_steps=1)
    alone, _ = fit_warps(x, mu, model, screen_ratio=1.2, **kw)
    together, _ = fit_warps(torch.cat([x, strokes(shape, 3, seed=13)]), mu, model,
                            screen_ratio=1.2, **{**kw, "penalty": contrast(torch.cat(
                                [x, strokes(shape, 3, seed=13)]))})
    torch.testing.assert_close(alone[0], together[0], rtol=1e-9, atol=1e-12)
