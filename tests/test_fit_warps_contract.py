"""What fit_warps promises around its schedule: the identity without steps, scale
invariance, one step, and the pair bookkeeping of screening and allowed pairs."""

import pytest
import torch
from test_warp_solver import blob

from skxclust.nn import warp_solver
from skxclust.nn.appearance import Appearance
from skxclust.nn.pair_batch import warp_energy
from skxclust.nn.pyramid import downsample_images
from skxclust.nn.tps import pixel_grid
from skxclust.nn.warp_solver import (
    PairLevel,
    _schedule,
    allowed_pairs,
    fit_warps,
    restricted,
    screen_pairs,
    screening,
)
from skxclust.nn.warps import make_warp_model, warp_grids

F64 = torch.float64


def bumps(shape, centers, width=0.3, dtype=F64):
    """Gaussian blobs at ``(c, -c)`` for each ``c`` of ``centers`` (1-D shapes: at ``c``
    along their axis), flattened, in ``dtype``."""
    return torch.stack([blob(shape, (c, -c), width) for c in centers]).to(dtype)


def test_a_signal_with_shift_search_and_no_steps_keeps_the_identity():
    """``n_steps=0`` means no warping: the shift search does not start the pairs either."""
    shape = (1, 40)
    x, mu = bumps(shape, [0.3, -0.2]), bumps(shape, [0.0])
    model = make_warp_model(shape, 4, "tps", F64)
    energy, params = fit_warps(x, mu, model, penalty=1e-3, n_steps=0, shift_search=True)
    assert torch.equal(params, torch.zeros_like(params))
    torch.testing.assert_close(energy, ((x - mu) ** 2).sum(1, keepdim=True), rtol=1e-10,
                               atol=0)


def test_a_single_step_fits_and_lowers_the_energy():
    shape = (10, 10)
    x, mu = bumps(shape, [0.15, -0.1]), bumps(shape, [0.0])
    model = make_warp_model(shape, 9, "tps", F64)
    energy, params = fit_warps(x, mu, model, penalty=1e-3, n_steps=1, affine_steps=1)
    torch.testing.assert_close(energy, warp_energy(x, mu, model, params, 1e-3), rtol=1e-10,
                               atol=0)
    assert torch.all(energy[:, 0] < ((x - mu) ** 2).sum(1))


@pytest.mark.parametrize("dtype, exponent", [(torch.float32, -60), (torch.float32, 50),
                                             (F64, -530), (F64, 480)])
def test_fits_are_invariant_to_a_power_of_two_scale_of_the_images(dtype, exponent):
    """The images run at magnitude ~1 (divided by a power of two, an exact division): data
    and penalty scaled by 2**e and 2**(2e) fit exactly as unscaled, the energies times
    2**(2e), even where the unscaled products would fall below the normal range or
    overflow."""
    shape = (10, 10)
    x, mu = bumps(shape, [0.15, -0.1], dtype=dtype), bumps(shape, [0.0, 0.1], dtype=dtype)
    model = make_warp_model(shape, 9, "tps", dtype)
    energy, params = fit_warps(x, mu, model, penalty=2.0**-10, n_steps=4)
    factor = 2.0**exponent
    scaled, scaled_params = fit_warps(x * factor, mu * factor, model,
                                      penalty=2.0**-10 * factor**2, n_steps=4)
    assert torch.equal(scaled_params, params)
    # the energies in the caller's scale, rounded there (subnormal at the smallest scales)
    assert torch.equal(scaled, (energy.double() * factor**2).to(dtype))


def test_more_coarse_steps_than_steps_fit_as_all_steps_coarse():
    shape = (28, 28)
    x, mu = bumps(shape, [0.15, -0.1]), bumps(shape, [0.0])
    model = make_warp_model(shape, 9, "tps", F64)
    coarse = make_warp_model((14, 14), 9, "tps", F64)
    kw = dict(penalty=1e-3, n_steps=3, coarse=coarse)
    capped = fit_warps(x, mu, model, coarse_steps=3, **kw)
    beyond = fit_warps(x, mu, model, coarse_steps=8, **kw)
    for a, b in zip(capped, beyond):
        assert torch.equal(a, b)


# -- the pair bookkeeping ---------------------------------------------------------------------
def test_screening_by_ratio_keeps_each_samples_lowest_even_when_it_is_negative():
    """Rows are image-major (k * B + b). A ratio of 1 keeps exactly each sample's lowest;
    with negative energies the margin is measured from the lowest's magnitude."""
    energy = torch.tensor([[1.0, -4.0, 3.0],
                           [2.0, -3.0, 3.0],
                           [1.5, -1.0, 9.0]], dtype=F64)  # (K=3, B=3)
    assert screen_pairs(energy, None, 1.0).tolist() == [0, 1, 2, 5]
    # ratio 1.5: within 0.5 |lowest| of the lowest: -4 + 2 = -2 keeps -4 and -3
    assert screen_pairs(energy, None, 1.5).tolist() == [0, 1, 2, 4, 5, 6]


@pytest.mark.parametrize("n_candidates, expected", [(1, [0, 1, 5]), (2, [0, 1, 4, 5, 6, 8]),
                                                    (3, list(range(9)))])
def test_screening_by_count_keeps_the_lowest_of_each_sample(n_candidates, expected):
    energy = torch.tensor([[1.0, -4.0, 3.0],
                           [2.0, -3.0, 1.0],
                           [1.5, -1.0, 2.0]], dtype=F64)
    assert screen_pairs(energy, n_candidates, None).tolist() == expected


def test_allowed_pairs_are_numbered_image_major():
    allowed = torch.tensor([[True, False, True],
                            [False, False, True]])  # (B=2, K=3)
    # pair (b, k) is row k * B + b
    assert allowed_pairs(allowed).tolist() == [0, 4, 5]
    assert allowed_pairs(None) is None


def test_restricted_keeps_the_screened_pairs_that_are_allowed():
    energy = torch.zeros(6, dtype=F64)
    assert restricted(energy, torch.tensor([0, 2, 5]), torch.tensor([1, 2, 3, 5])).tolist() \
        == [2, 5]
    assert restricted(energy, None, torch.tensor([1, 4])).tolist() == [1, 4]
    assert restricted(energy, torch.tensor([3]), None).tolist() == [3]


@pytest.mark.parametrize("n_candidates, ratio, expected", [
    (None, None, False), (3, None, False), (4, None, False), (2, None, True),
    (None, 1.5, True), (3, 1.5, True)])
def test_screening_drops_pairs_only_with_a_ratio_or_fewer_candidates_than_centroids(
        n_candidates, ratio, expected):
    assert screening(n_candidates, ratio, 3) is expected


@pytest.mark.parametrize("n_steps, switch, screen_at, expected", [
    (10, 0, None, [(0, 10, False)]),
    (10, 4, None, [(0, 4, True), (4, 10, False)]),
    (10, 4, 2, [(0, 2, True), (2, 4, True), (4, 10, False)]),
    (10, 4, 6, [(0, 4, True), (4, 6, False), (6, 10, False)]),
    (10, 4, 4, [(0, 4, True), (4, 10, False)]),
])
def test_the_schedule_cuts_at_the_coarse_switch_and_at_screening(n_steps, switch, screen_at,
                                                                 expected):
    assert _schedule(n_steps, switch, screen_at) == expected


# -- one resolution's steps (PairLevel) -------------------------------------------------------
def level_of(transform="affine+tps", shape=(10, 10)):
    x = bumps(shape, [0.15, -0.1, 0.05])
    mu = torch.stack([bumps(shape, [0.0])[0], bumps(shape, [0.1], width=0.4)[0]])
    model = make_warp_model(shape, 9, transform, F64)
    return PairLevel.scaled(x, mu, model, 1e-3, 1.0, 1.0), x, mu, model


def test_affine_steps_move_every_pair_by_an_affine_warp_only():
    level, x, mu, model = level_of()
    n_pairs = 6
    flat = torch.zeros(n_pairs, model.n_params, dtype=F64)
    _, fitted, _ = level.steps(flat, torch.full((n_pairs,), 1e-2, dtype=F64), 3, affine=True)
    grids = warp_grids(model, fitted.reshape(n_pairs, model.n_basis, model.ndim))
    points = grids.reshape(n_pairs, -1, 2)
    base = pixel_grid((10, 10), 2, F64)
    design = torch.cat([base, torch.ones(len(base), 1, dtype=F64)], 1)
    coef = torch.linalg.lstsq(design.expand(n_pairs, -1, -1), points).solution
    assert float((design @ coef - points).abs().max()) < 1e-10
    assert float((points - base).abs().max()) > 1e-3  # and it did move


def test_steps_on_some_pairs_leave_the_others_and_update_their_own_damping():
    level, x, mu, model = level_of("tps")
    n_pairs = 6
    flat = torch.zeros(n_pairs, model.n_params, dtype=F64)
    damping = torch.full((n_pairs,), 1e-2, dtype=F64)
    energy = torch.arange(n_pairs, dtype=F64)
    rows = torch.tensor([0, 4])
    out_energy, out_flat, out_damping = level.steps(flat, damping, 2, rows, energy)
    every = level.steps(flat, damping, 2)
    others = torch.tensor([1, 2, 3, 5])
    for out, full, before in ((out_energy, every[0], energy), (out_flat, every[1], flat),
                              (out_damping, every[2], damping)):
        torch.testing.assert_close(out[rows], full[rows], rtol=1e-9, atol=1e-12)
        assert torch.equal(out[others], before[others])
    assert not torch.equal(out_damping[rows], damping[rows])
    assert torch.equal(energy, torch.arange(n_pairs, dtype=F64))  # not mutated


def test_updated_energy_recomputes_only_the_given_pairs():
    level, x, mu, model = level_of("tps")
    flat = 0.01 * torch.randn(6, model.n_params, generator=torch.Generator().manual_seed(0),
                              dtype=F64)
    stale = torch.full((6,), -1.0, dtype=F64)
    rows = torch.tensor([1, 5])
    fresh = level.updated_energy(flat, rows, stale)
    every = level.energy(flat)
    assert torch.equal(fresh[rows], level.energy(flat, rows))
    torch.testing.assert_close(fresh[rows], every[rows], rtol=1e-10, atol=0)
    assert torch.equal(fresh[torch.tensor([0, 2, 3, 4])], stale[:4])
    assert torch.equal(stale, torch.full((6,), -1.0, dtype=F64))
    assert torch.equal(level.updated_energy(flat, None, None), every)


def test_the_affine_steps_run_first_then_the_full_steps():
    level, x, mu, model = level_of()
    n_pairs = 6
    flat = torch.zeros(n_pairs, model.n_params, dtype=F64)
    damping = torch.full((n_pairs,), 1e-2, dtype=F64)
    _, flat, damping = level.steps(flat, damping, 3, affine=True)
    energy, flat, _ = level.steps(flat, damping, 2)
    expected = level.per_sample(energy, flat)
    got = fit_warps(x, mu, model, penalty=1e-3, n_steps=2, affine_steps=3)
    for a, b in zip(got, expected):
        assert torch.equal(a, b)


@pytest.mark.parametrize("screen_ratio, n_candidates", [(None, None), (1.2, None), (None, 2)])
def test_pairs_not_allowed_keep_an_infinite_energy_through_coarse_steps_and_screening(
        screen_ratio, n_candidates):
    """With a cap of 2 candidates among 3 centroids, a sample allowed only one keeps it
    alone: the screening stays within the allowed pairs."""
    shape = (28, 28)
    x = bumps(shape, [0.15, -0.1, 0.05])
    mu = torch.stack([bumps(shape, [0.0])[0], bumps(shape, [0.1], width=0.4)[0],
                      bumps(shape, [-0.1])[0]])
    model = make_warp_model(shape, 9, "tps", F64)
    coarse = make_warp_model((14, 14), 9, "tps", F64)
    allowed = torch.tensor([[True, False, False], [True, True, True], [False, True, False]])
    energy, params = fit_warps(x, mu, model, penalty=1e-3, n_steps=3, coarse=coarse,
                               coarse_steps=3, allowed=allowed, screen_ratio=screen_ratio,
                               n_candidates=n_candidates, screen_steps=1)
    assert torch.isinf(energy[~allowed]).all()
    assert torch.isfinite(energy[allowed]).all()
    assert torch.equal(params[~allowed], torch.zeros_like(params[~allowed]))


def test_the_coarse_level_downsamples_every_appearance_channel_of_the_fine_one():
    """The thickness channel of the coarse level is the fine one downsampled, not derived
    again from the downsampled centroid, so the appearance coefficients mean the same at
    both levels."""
    shape = (28, 28)
    x, mu = bumps(shape, [0.1], width=0.15), bumps(shape, [0.0, 0.2], width=0.15)
    model = make_warp_model(shape, 9, "tps", F64)
    coarse = make_warp_model((14, 14), 9, "tps", F64)
    level = PairLevel.scaled(x, mu, model, 1e-3, 1.0, 1.0,
                             Appearance("intensity+thickness", 0.1))
    low = level.coarser(coarse)
    expected = downsample_images(level.images.reshape(4, -1), shape, (14, 14))
    assert torch.equal(low.images, expected.reshape(2, 2, 14, 14))


def test_a_warp_costs_the_same_share_of_the_energy_at_both_levels():
    """The coarse level sums a quarter of the pixels, and its penalty is scaled by that
    ratio: a smooth pair's energy at a given warp is a quarter of the fine one, image term
    and penalty alike."""
    shape = (28, 28)
    x, mu = bumps(shape, [0.1], width=0.4), bumps(shape, [0.0], width=0.4)
    model = make_warp_model(shape, 9, "tps", F64)
    coarse = make_warp_model((14, 14), 9, "tps", F64)
    level = PairLevel.scaled(x, mu, model, 1e4, 1.0, 1.0)  # the penalty term dominates
    flat = 0.05 * torch.randn(1, model.n_params, generator=torch.Generator().manual_seed(0),
                              dtype=F64)
    ratio = level.coarser(coarse).energy(flat) / level.energy(flat)
    torch.testing.assert_close(ratio, torch.full_like(ratio, 0.25), rtol=0.1, atol=0)


def test_screening_after_coarse_steps_ranks_full_resolution_energies(monkeypatch):
    """The coarse level's energies are about a quarter of the fine ones and rank the pairs
    differently at times: the screen re-evaluates the warps reached at full resolution."""
    shape = (28, 28)
    x = bumps(shape, [0.15, -0.1, 0.05])
    mu = torch.stack([bumps(shape, [0.0])[0], bumps(shape, [0.1], width=0.4)[0]])
    model = make_warp_model(shape, 9, "tps", F64)
    coarse = make_warp_model((14, 14), 9, "tps", F64)
    kw = dict(penalty=1e-3, coarse=coarse, coarse_steps=2, affine_steps=0)
    at_screen, _ = fit_warps(x, mu, model, n_steps=2, **kw)  # fine energies after 2 steps
    seen = []

    def spy(energy, n_candidates, screen_ratio):
        seen.append(energy.clone())
        return original(energy, n_candidates, screen_ratio)

    original = warp_solver.screen_pairs
    monkeypatch.setattr(warp_solver, "screen_pairs", spy)
    fit_warps(x, mu, model, n_steps=3, screen_ratio=1.5, screen_steps=2, **kw)
    assert len(seen) == 1
    torch.testing.assert_close(seen[0], at_screen.T, rtol=1e-10, atol=0)
