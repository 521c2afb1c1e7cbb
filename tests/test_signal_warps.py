"""Warps of 1-D signals: monotone (no folding back in time) and started from a global shift."""

import pytest
import torch

from skxclust.nn import make_warp_model
from skxclust.nn.monotone import MIN_SLOPE, folds, monotone_steps, warp_slopes
from skxclust.nn.pair_batch import warp_energy
from skxclust.nn.shift_search import (
    off_the_knots,
    shift_energies,
    shift_start,
    translation_params,
)
from skxclust.nn.warp_solver import fit_warps

N = 60
POINTS = torch.linspace(-1, 1, N, dtype=torch.float64)


def bump(center, height=1.0, width=0.08):
    return height * torch.exp(-((POINTS - center) ** 2) / (2 * width * width))


# Pairs whose unconstrained regularised fit folds (measured before the constraint: the
# slope of the fitted warp went down to -0.3 ... -3.3): two events in the other order.
FOLDING_PAIRS = {
    "swapped_heights": (bump(-0.4) + 0.5 * bump(0.4), 0.5 * bump(-0.4) + bump(0.4)),
    "reversed_order": (bump(-0.5) + bump(0.0, 0.5), bump(0.0) + bump(-0.5, 0.5)),
}


@pytest.mark.parametrize("pair", sorted(FOLDING_PAIRS))
@pytest.mark.parametrize("n_landmarks", [36, 64])
@pytest.mark.parametrize("penalty", [1e-4, 1e-2])
@pytest.mark.parametrize("shift_search", [False, True])
def test_fitted_signal_warps_keep_time_order(pair, n_landmarks, penalty, shift_search):
    centroid, sample = FOLDING_PAIRS[pair]
    model = make_warp_model((1, N), n_landmarks, "tps", torch.float64)
    energy, params = fit_warps(sample[None], centroid[None], model, penalty=penalty,
                               n_steps=60, shift_search=shift_search)
    slopes = warp_slopes(model, params.reshape(1, -1))
    assert float(slopes.min()) > 0.5 * MIN_SLOPE
    assert not bool(folds(model, params.reshape(1, -1)).any())
    # the constrained fit still fits: well below the identity's energy
    identity = float(((sample - centroid) ** 2).sum())
    assert float(energy) < 0.9 * identity


@pytest.mark.parametrize("transform", ["tps", "affine", "affine+tps"])
def test_monotone_steps_shorten_only_folding_steps(transform):
    model = make_warp_model((1, 20), 16, transform, torch.float64)
    unit = translation_params(model)
    gentle = 0.1 * unit[None]  # a translation: slopes unchanged
    assert torch.equal(monotone_steps(model, torch.zeros_like(gentle), gentle), gentle)
    reverse = torch.linalg.lstsq(model.basis, -3.0 * model.points).solution.T  # g = -2 p
    short = monotone_steps(model, torch.zeros_like(reverse), reverse)
    assert bool(folds(model, reverse).all()) and not bool(folds(model, short).any())
    assert 0 < float(short.norm() / reverse.norm()) < 1


@pytest.mark.parametrize("keep", [0.5, 0.9])
@pytest.mark.parametrize("start", [0.0, 0.2])
@pytest.mark.parametrize("transform", ["tps", "affine"])
def test_monotone_steps_go_keep_of_the_way_to_the_slope_bound(transform, start, keep):
    # g = -2 p: every slope of the step falls by 3; from a warp of slopes 1 - 3 * start the
    # room to the bound MIN_SLOPE is 1 - 3 * start - MIN_SLOPE, and the shortened step
    # uses the fraction ``keep`` of it, so the slopes end at bound + (1 - keep) * room
    model = make_warp_model((1, 20), 16, transform, torch.float64)
    reverse = torch.linalg.lstsq(model.basis, -3.0 * model.points).solution.T
    flat = start * reverse
    short = monotone_steps(model, flat, reverse, keep=keep)
    room = 1.0 - 3.0 * start - MIN_SLOPE
    torch.testing.assert_close(short, keep * room / 3.0 * reverse)
    slopes = warp_slopes(model, flat + short)
    torch.testing.assert_close(slopes, torch.full_like(slopes, MIN_SLOPE + (1 - keep) * room))


def test_folds_counts_a_flat_stretch_and_reports_one_flag_per_warp():
    # affine warps of 5 samples (4 slopes): slope 1 + a; a = -1 stops time (a fold: the
    # positions do not increase strictly), a = -0.999 does not; 3 warps give 3 flags
    model = make_warp_model((1, 5), n_landmarks=4, transform="affine")
    flat = torch.tensor([[-1.0, 0.0], [-0.999, 0.0], [0.5, 0.3]])
    assert folds(model, flat).tolist() == [True, False, False]


@pytest.mark.parametrize("n_samples", [1, 2, 3, 5])
def test_monotone_steps_shorten_a_reversing_step_on_the_shortest_signals(n_samples):
    # a signal of one sample has no slope: the step stays; from two samples on (one
    # slope) the reversing step (slope 1 - 3) goes 0.9 of the way to MIN_SLOPE
    model = make_warp_model((1, n_samples), n_landmarks=4, transform="affine")
    step = torch.tensor([[-3.0, 0.0]])
    short = monotone_steps(model, torch.zeros_like(step), step)
    expected = step if n_samples == 1 else 0.9 * (1.0 - MIN_SLOPE) / 3.0 * step
    torch.testing.assert_close(short, expected)


@pytest.mark.parametrize("transform", ["tps", "affine"])
def test_monotone_steps_keep_a_zero_step_zero(transform):
    # no slope changes: nothing limits the step (no division by a zero of either sign)
    model = make_warp_model((1, 20), 16, transform, torch.float64)
    flat = 0.1 * translation_params(model)[None].expand(2, -1)
    zero = torch.zeros_like(flat)
    assert torch.equal(monotone_steps(model, flat, zero), zero)


def test_monotone_steps_are_limited_by_the_falling_slopes_only():
    # u = 3 (p + 0.5)^2: the slopes rise by up to 9 near the end and fall by up to 3 near
    # the start, so only the start may shorten the step
    model = make_warp_model((1, 20), 16, "tps", torch.float64)
    bend = 3.0 * (model.points + 0.5) ** 2
    step = torch.linalg.lstsq(model.basis, bend).solution.T
    change = warp_slopes(model, step) - 1.0  # the slopes are affine in the parameters
    assert float(change.max()) > 2 * float(-change.min()) > 0
    short = monotone_steps(model, torch.zeros_like(step), step)
    falling = change < 0
    expected = 0.9 * ((1.0 - MIN_SLOPE) / -change[falling]).min()
    torch.testing.assert_close(short, expected * step)


# n = 17: an FFT of 36 points (5-smooth, above 2n - 1 = 33), 13: of 25 (odd), 2: of 3
@pytest.mark.parametrize("n", [17, 13, 2])
@pytest.mark.parametrize("transform", ["tps", "affine", "affine+tps"])
def test_shift_energies_are_the_energies_of_whole_sample_translations(transform, n):
    generator = torch.Generator().manual_seed(0)
    model = make_warp_model((1, n), 9, transform, torch.float64)
    samples = torch.randn(3, n, generator=generator, dtype=torch.float64)
    centroids = torch.randn(2, n, generator=generator, dtype=torch.float64)
    energies = shift_energies(samples, centroids)  # (K, B, 2n - 1)
    assert energies.shape == (2, 3, 2 * n - 1)
    unit = translation_params(model)
    for shift in sorted({-(n - 1), -n // 3, -1, 0, 1, n // 2, n - 1}):
        params = (shift * 2.0 / (n - 1) * unit).reshape(1, 1, -1, 1).expand(3, 2, -1, 1)
        direct = warp_energy(samples, centroids, model, params.contiguous(), penalty=0.0)
        torch.testing.assert_close(energies[:, :, shift + n - 1].T, direct)


@pytest.mark.parametrize("penalty", [0.0, 0.02, 0.3, 30.0])
@pytest.mark.parametrize("n, transform", [(17, "tps"), (2, "affine")])
def test_shift_start_is_the_whole_shift_of_least_penalised_energy(penalty, n, transform):
    # the penalty of a translation v is v^T G v, computed here directly for every shift
    model = make_warp_model((1, n), 9, transform, torch.float64)
    gram = model.penalty_gram(0.5, 0.5)
    generator = torch.Generator().manual_seed(1)
    samples = torch.randn(4, n, generator=generator, dtype=torch.float64)
    centroids = torch.randn(2, n, generator=generator, dtype=torch.float64)
    weight = penalty * torch.tensor([1.0, 0.5, 2.0, 4.0], dtype=torch.float64)
    start = shift_start(samples, centroids, model, penalty=weight, gram=gram)
    unit = translation_params(model)
    shifts = torch.arange(-(n - 1), n, dtype=torch.float64) * 2.0 / (n - 1)
    translations = shifts[:, None] * unit[None]  # (2n - 1, n_params)
    cost = ((translations @ gram) * translations).sum(-1)  # v^T G v per shift
    total = shift_energies(samples, centroids) + weight[None, :, None] * cost
    expected = translations[total.argmin(-1)].reshape(-1, unit.shape[0])  # (K * B, n_params)
    torch.testing.assert_close(start, expected)


@pytest.mark.parametrize("dtype, nudge", [(torch.float64, 1e-6),
                                          (torch.float32, 1e3 * torch.finfo(torch.float32).eps)])
@pytest.mark.parametrize("n", [2, 9])
def test_off_the_knots_moves_right_by_the_larger_of_1e6_and_1000_eps_of_a_sample(
        dtype, nudge, n):
    model = make_warp_model((1, n), n_landmarks=4, transform="tps", dtype=dtype)
    unit = translation_params(model)
    start = 0.5 * unit[None]
    moved = off_the_knots(start, model)
    samples = float((moved - start)[0].double() @ unit.double() / (unit.double() @ unit.double()))
    assert samples * (n - 1) / 2 == pytest.approx(nudge, rel=1e-3)


def test_shift_start_finds_a_distant_event_that_the_identity_start_misses():
    model = make_warp_model((1, N), 16, "tps", torch.float64)
    # the same peak, 45 % of the signal later: no overlap, so no slope towards it
    centroid, sample = bump(-0.5), bump(0.4)
    kwargs = {"penalty": 0.5 * float(((sample - sample.mean()) ** 2).sum()),
              "bending_weight": 0.5, "affine_weight": 0.5}
    searched, params = fit_warps(sample[None], centroid[None], model, shift_search=True,
                                 **kwargs)
    local, _ = fit_warps(sample[None], centroid[None], model, **kwargs)
    start = shift_start(sample[None], centroid[None], model, penalty=kwargs["penalty"],
                        gram=model.penalty_gram(0.5, 0.5))
    # the centroid is sampled at p + t: its peak at -0.5 lands on 0.4 for t = -0.9
    translation = start @ torch.linalg.pinv(translation_params(model)[None])
    assert float(translation) == pytest.approx(-0.9, abs=2 / (N - 1))
    assert float(searched) < 0.1 * float(local)


def test_shift_search_leaves_image_warps_unchanged():
    generator = torch.Generator().manual_seed(1)
    model = make_warp_model((10, 10), 9, "tps", torch.float64)
    samples = torch.rand(4, 100, generator=generator, dtype=torch.float64)
    centroids = torch.rand(3, 100, generator=generator, dtype=torch.float64)
    plain = fit_warps(samples, centroids, model, penalty=1.0)
    searched = fit_warps(samples, centroids, model, penalty=1.0, shift_search=True)
    for a, b in zip(plain, searched):
        assert torch.equal(a, b)


@pytest.mark.parametrize("n_features, image_shape", [(30, None), (64, (1, 64)), (64, (64, 1))])
def test_signals_get_the_gain_and_offset_per_pair_by_default(n_features, image_shape):
    from skxclust import SpatialTransformerKMeans

    geometry = SpatialTransformerKMeans(image_shape=image_shape)._make_geometry(n_features)
    assert geometry.appearance is not None and geometry.appearance.kind == "intensity"



@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_fit_from_a_whole_shift_does_not_depend_on_the_pairs_beside_it(dtype):
    # A whole shift samples the centroid at its pixels, where linear interpolation has a
    # kink: with the start exactly there, rounding (which the batch's shape and the thread
    # count change) picked the Jacobian's side, and a pair fitted alone ended up to 3e-4
    # (relative) away from the same pair fitted among 24 (1e-3 with one thread).
    points = torch.linspace(-1, 1, 48, dtype=torch.float64)

    def peak(center):
        return torch.exp(-((points - center) ** 2) / (2 * 0.15 ** 2))

    samples = torch.stack([peak(c) for c in (-0.5, -0.3, 0.1, 0.2, 0.4, 0.6)]).to(dtype)
    centroids = torch.stack([peak(c) + 0.3 * peak(-c) for c in (-0.4, 0.0, 0.3, 0.5)])
    centroids = centroids.to(dtype)
    model = make_warp_model((1, 48), 16, "tps", dtype)
    kw = dict(penalty=1e-2, n_steps=8, affine_steps=2, shift_search=True)
    together, _ = fit_warps(samples, centroids, model, **kw)
    alone = torch.stack([torch.stack([
        fit_warps(samples[b:b + 1], centroids[k:k + 1], model, **kw)[0][0, 0]
        for k in range(4)]) for b in range(6)])
    tol = 1e-9 if dtype == torch.float64 else 1e-4
    torch.testing.assert_close(alone, together, rtol=tol, atol=0.0)


@pytest.mark.parametrize("n", [2, 3])
def test_the_translation_of_a_signal_shorter_than_its_basis_is_one_and_the_same(n):
    # fewer samples than basis functions (9 landmarks on 2 or 3 samples): the translation
    # is the minimum-norm one, every time (torch's lstsq gave [1, 0, 1] or [1, 0, 0] at
    # random for 1 x 2, and fits of such signals differed from one run to the next)
    units = []
    for _ in range(20):  # fresh models: the translation is cached per model
        model = make_warp_model((1, n), 9, "tps", torch.float32)
        units.append(translation_params(model))
    basis = model.basis.to(torch.float64)
    expected = torch.linalg.pinv(basis) @ torch.ones(n, dtype=torch.float64)
    for unit in units:
        torch.testing.assert_close(unit, expected.to(torch.float32))
    torch.testing.assert_close(basis @ expected, torch.ones(n, dtype=torch.float64))


@pytest.mark.parametrize("shape, n_landmarks", [((1, 17), 9), ((1, 60), 16)])
def test_the_translation_of_a_dependent_basis_is_the_minimum_norm_one_without_lstsq(
        shape, n_landmarks, monkeypatch):
    # "affine+tps": the TPS part holds the affine one, so the basis has dependent columns
    # (rank 3 of 5, 4 of 6); torch's CPU lstsq then returned a vector that is no
    # translation at all about once in 3,000 calls after other fits (CI failed on it)
    model = make_warp_model(shape, n_landmarks, "affine+tps", torch.float64)
    basis = model.basis
    assert int(torch.linalg.matrix_rank(basis)) < basis.shape[1]

    def unreliable(*args, **kwargs):
        raise AssertionError("lstsq used on a rank-deficient basis")

    monkeypatch.setattr(torch.linalg, "lstsq", unreliable)
    unit = translation_params(model)
    ones = torch.ones(shape[1], dtype=torch.float64)
    torch.testing.assert_close(unit, torch.linalg.pinv(basis) @ ones)
    torch.testing.assert_close(basis @ unit, ones)
