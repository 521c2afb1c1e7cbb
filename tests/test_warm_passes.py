"""The passes of an ST Lloyd run after the first continue each pair's warp from the previous
pass (``refit_warps``); the run's final assignment fits afresh, as ``predict`` does."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

import skxclust._spatial_explain as spatial_explain
import skxclust._warp_geometry as warp_geometry
from skxclust import SpatialTransformerKMeans
from skxclust._warp_geometry import FIRST_PASS_CANDIDATES
from skxclust.nn.graduated import graduated_fit_warps
from skxclust.nn.pair_batch import warp_energy
from skxclust.nn.tps import pixel_grid
from skxclust.nn.warp_refit import refit_warps
from skxclust.nn.warp_solver import fit_warps
from skxclust.nn.warps import make_warp_model

F64 = torch.float64
SHAPE = (12, 12)


def blobs(centres, width=0.08):
    p = pixel_grid(SHAPE, 2, F64)
    return torch.stack([torch.exp(-((p - torch.tensor(c, dtype=F64)) ** 2).sum(1) / width)
                        for c in centres])


@pytest.fixture(scope="module")
def pairs():
    """Samples, centroids, a model and a short first fit of every pair (its warps)."""
    g = torch.Generator().manual_seed(0)
    samples = blobs((torch.rand(6, 2, generator=g, dtype=F64) * 0.6 - 0.3).tolist())
    centroids = blobs([(0.0, 0.0), (0.2, -0.1), (-0.25, 0.2)])
    model = make_warp_model(SHAPE, 9, "tps", F64)
    _, warps = fit_warps(samples, centroids, model, penalty=1e-2, n_steps=2)
    return samples, centroids, model, warps


def start_energy(pairs):
    samples, centroids, model, warps = pairs
    return warp_energy(samples, centroids, model, warps, 1e-2)


@pytest.mark.parametrize("screen", [{}, {"screen_ratio": 1.5}, {"n_candidates": 1}])
def test_refit_never_raises_a_pairs_energy_above_its_start(pairs, screen):
    samples, centroids, model, warps = pairs
    energy, _ = refit_warps(samples, centroids, model, warps, penalty=1e-2, n_steps=4,
                            **screen)
    assert bool((energy <= start_energy(pairs) * (1 + 1e-12)).all())


# n_steps=1 runs exactly one step, not none
@pytest.mark.parametrize("n_steps, factor, at_least", [(6, 0.95, 4), (1, 0.99, 2)])
def test_refit_lowers_the_energy_of_an_unconverged_start(pairs, n_steps, factor, at_least):
    samples, centroids, model, warps = pairs
    energy, _ = refit_warps(samples, centroids, model, warps, penalty=1e-2, n_steps=n_steps)
    # (some pairs are far apart and stay where they are; the near ones move on)
    assert int((energy < factor * start_energy(pairs)).sum()) >= at_least


def test_refit_returns_the_energy_of_the_warps_it_returns(pairs):
    samples, centroids, model, warps = pairs
    energy, params = refit_warps(samples, centroids, model, warps, penalty=1e-2, n_steps=3,
                                 screen_ratio=2.0)
    torch.testing.assert_close(energy, warp_energy(samples, centroids, model, params, 1e-2))


def test_refit_screens_on_the_starting_energies_and_keeps_the_others_start(pairs):
    samples, centroids, model, warps = pairs
    start = start_energy(pairs)
    _, params = refit_warps(samples, centroids, model, warps, penalty=1e-2, n_steps=3,
                            screen_ratio=1.2)
    lowest = start.min(dim=1, keepdim=True).values
    dropped = start > lowest + 0.2 * lowest.abs()
    assert bool(dropped.any()) and bool((~dropped).any())
    torch.testing.assert_close(params[dropped], warps[dropped], rtol=0, atol=0)
    assert not torch.equal(params[~dropped], warps[~dropped])


def test_refit_with_no_steps_evaluates_its_start(pairs):
    samples, centroids, model, warps = pairs
    energy, params = refit_warps(samples, centroids, model, warps, penalty=1e-2, n_steps=0)
    torch.testing.assert_close(params, warps, rtol=0, atol=0)
    torch.testing.assert_close(energy, start_energy(pairs))


def test_refit_refuses_start_warps_of_another_shape(pairs):
    samples, centroids, model, warps = pairs
    with pytest.raises(ValueError, match="K"):
        refit_warps(samples, centroids[:2], model, warps, penalty=1e-2)


def test_refit_defaults_to_five_steps_from_a_damping_of_1e_2(pairs):
    # the documented defaults: n_steps=5, damping=1e-2
    samples, centroids, model, warps = pairs
    energy, params = refit_warps(samples, centroids, model, warps, penalty=1e-2)
    again, same = refit_warps(samples, centroids, model, warps, penalty=1e-2, n_steps=5,
                              damping=1e-2)
    torch.testing.assert_close(energy, again, rtol=0, atol=0)
    torch.testing.assert_close(params, same, rtol=0, atol=0)


def test_refit_penalises_bending_and_affine_parts_with_their_own_weights(pairs):
    # bending_weight and affine_weight reach the energy each in its own role
    samples, centroids, model, warps = pairs
    energy, params = refit_warps(samples, centroids, model, warps, penalty=1e-1, n_steps=2,
                                 bending_weight=3.0, affine_weight=0.25)
    torch.testing.assert_close(energy, warp_energy(samples, centroids, model, params, 1e-1,
                                                   bending_weight=3.0, affine_weight=0.25))


def test_refit_caps_the_candidates_below_the_centroid_count_with_fewer_samples(pairs):
    # n_candidates < K screens even when n_candidates >= the number of samples
    samples, centroids, model, warps = pairs
    start = start_energy(pairs)[:2]
    _, params = refit_warps(samples[:2], centroids, model, warps[:2], penalty=1e-2,
                            n_steps=3, n_candidates=2)
    worst = start.argmax(dim=1)
    kept = torch.arange(2)
    torch.testing.assert_close(params[kept, worst], warps[kept, worst], rtol=0, atol=0)
    assert not torch.equal(params, warps[:2])


def test_refit_never_fits_a_pair_outside_allowed_when_the_cap_exceeds_them(pairs):
    # pairs left out by allowed keep an infinite energy and their start, whatever the cap
    samples, centroids, model, warps = pairs
    allowed = torch.ones(6, 3, dtype=torch.bool)
    allowed[:, 1:] = False
    energy, params = refit_warps(samples, centroids, model, warps, penalty=1e-2, n_steps=2,
                                 n_candidates=2, allowed=allowed)
    assert bool(torch.isinf(energy[~allowed]).all()) and bool(energy[allowed].isfinite().all())
    torch.testing.assert_close(params[~allowed], warps[~allowed], rtol=0, atol=0)


def test_refit_accepts_start_warps_that_require_grad(pairs):
    # the start is taken as data: a tensor that requires grad is detached, not refused
    samples, centroids, model, warps = pairs
    energy, params = refit_warps(samples, centroids, model, warps.clone().requires_grad_(),
                                 penalty=1e-2, n_steps=2)
    again, same = refit_warps(samples, centroids, model, warps, penalty=1e-2, n_steps=2)
    assert not params.requires_grad
    torch.testing.assert_close(params, same, rtol=0, atol=0)


# -- within a Lloyd run ---------------------------------------------------------------
@pytest.fixture(scope="module")
def digits():
    X = torch.as_tensor(load_digits().data[:120], dtype=F64)
    est = SpatialTransformerKMeans(4, n_landmarks=9, random_state=0)
    geometry = est._make_geometry(64)
    return X, X[[0, 30, 60, 90]], geometry


def counting(monkeypatch):
    """Count the calls of graduated_fit_warps (fresh) and refit_warps (continued) of the
    geometry."""
    calls = {"fresh": 0, "continued": 0}

    def wrap(name, fn):
        def counted(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return counted

    monkeypatch.setattr(warp_geometry, "graduated_fit_warps",
                        wrap("fresh", warp_geometry.graduated_fit_warps))
    monkeypatch.setattr(warp_geometry, "refit_warps",
                        wrap("continued", warp_geometry.refit_warps))
    return calls


def test_a_runs_first_pass_is_fresh_and_the_next_ones_continue(digits, monkeypatch):
    X, C, geometry = digits
    run = geometry.for_rows(X, torch.ones(X.shape[0], dtype=F64))
    calls = counting(monkeypatch)
    first = run.assign(X, C)
    assert calls == {"fresh": 2, "continued": 0}  # two chunks of 64 rows
    run.assign(X, C + 0.1)
    assert calls == {"fresh": 2, "continued": 2}
    # the geometry outside the run, and a run's other rows, fit afresh
    geometry.assign(X, C)
    run.assign(X[:50], C)
    assert calls == {"fresh": 5, "continued": 2}
    assert first.labels.shape == (X.shape[0],)


def test_a_runs_first_pass_fits_at_most_three_candidates(
        digits, monkeypatch):
    X, C, geometry = digits
    seen = []

    def recording(*args, **kwargs):
        seen.append(kwargs["n_candidates"])
        return graduated_fit_warps(*args, **kwargs)

    continued = []

    def recording_continued(*args, **kwargs):
        continued.append(kwargs["n_candidates"])
        return refit_warps(*args, **kwargs)

    monkeypatch.setattr(warp_geometry, "graduated_fit_warps", recording)
    monkeypatch.setattr(warp_geometry, "refit_warps", recording_continued)
    run = geometry.for_rows(X, torch.ones(X.shape[0], dtype=F64))
    run.assign(X, C)
    assert seen == [FIRST_PASS_CANDIDATES] * 2  # two chunks of 64 rows
    geometry.assign(X, C)  # outside a run (predict): every candidate
    assert seen[2:] == [None] * 2
    run.assign(X, C)  # the run's next pass continues, uncapped: refit_warps
    assert len(seen) == 4 and continued == [None] * 2
    eight = torch.cat([C, C + 1.0])  # any number of centroids (the initialisation's 2K)
    geometry.for_rows(X, torch.ones(X.shape[0], dtype=F64)).assign(X, eight)
    assert seen[4:] == [FIRST_PASS_CANDIDATES] * 4  # chunks of 64 * 4 // 8 = 32 rows
    # the user's n_candidates below the cap is predict's: the run's first pass uses it
    fewer = SpatialTransformerKMeans(4, n_landmarks=9, n_candidates=2, random_state=0)
    fewer._make_geometry(64).for_rows(X, torch.ones(X.shape[0], dtype=F64)).assign(X, C)
    assert seen[8:] == [2] * 2
    # and one above the cap (4 of 8 centroids): the cap, the fewer of the two
    more = SpatialTransformerKMeans(4, n_landmarks=9, n_candidates=4, random_state=0)
    more._make_geometry(64).for_rows(X, torch.ones(X.shape[0], dtype=F64)).assign(X, eight)
    assert seen[10:] == [FIRST_PASS_CANDIDATES] * 4
    # a dropped pair keeps the energy it had when dropped: an upper bound (to the float32
    # rounding of the solve, whose steps never raise the energy); without the centroid
    # blur, whose stages screen anew (a dropped pair can rejoin from another warp)
    plain = SpatialTransformerKMeans(4, n_landmarks=9, centroid_blur=None)._make_geometry(64)
    capped = plain.for_rows(X, torch.ones(X.shape[0], dtype=F64)).assign(X, C)
    fresh = plain.assign(X, C)
    slack = 1e-5 * fresh.pairwise.abs() + 1e-9
    assert bool((capped.pairwise >= fresh.pairwise - slack).all())
    assert bool((capped.pairwise > fresh.pairwise + slack).any())


def test_a_runs_refine_assigns_afresh_after_continued_passes(digits):
    X, C, geometry = digits
    run = geometry.for_rows(X, torch.ones(X.shape[0], dtype=F64))
    first = run.assign(X, C)
    # the first pass over 4 centroids was capped at 3 candidates: refit
    assert FIRST_PASS_CANDIDATES < C.shape[0]
    refined = run.refine(X, C, first)
    assert refined is not first
    torch.testing.assert_close(refined.distances, geometry.assign(X, C).distances,
                               rtol=0, atol=0)
    # over 3 of them the cap drops none: that first pass fitted as predict does, kept
    fewer = geometry.for_rows(X, torch.ones(X.shape[0], dtype=F64))
    uncapped = fewer.assign(X, C[:3])
    assert fewer.refine(X, C[:3], uncapped) is uncapped
    # nor when the user's n_candidates is at most the cap: predict fits as few
    est = SpatialTransformerKMeans(4, n_landmarks=9, n_candidates=FIRST_PASS_CANDIDATES,
                                   random_state=0)
    own = est._make_geometry(64).for_rows(X, torch.ones(X.shape[0], dtype=F64))
    as_predict = own.assign(X, C)
    assert own.refine(X, C, as_predict) is as_predict
    moved = C * 0.9 + 0.1 * X[[1, 31, 61, 91]]
    continued = run.assign(X, moved)
    final = run.refine(X, moved, continued)
    fresh = geometry.assign(X, moved)
    torch.testing.assert_close(final.labels, fresh.labels, rtol=0, atol=0)
    torch.testing.assert_close(final.distances, fresh.distances, rtol=0, atol=0)
    torch.testing.assert_close(final.pairwise, fresh.pairwise, rtol=0, atol=0)
    # the continued pass reached lower energies from its better start on most rows
    assert float(continued.distances.sum()) <= float(fresh.distances.sum()) * 1.001


def test_a_fit_continues_its_lloyd_passes(monkeypatch):
    X = load_digits().data[:150]
    calls = counting(monkeypatch)
    SpatialTransformerKMeans(4, n_landmarks=9, max_iter=3, split_merge_moves=0,
                             init=X[[0, 40, 80, 120]], appearance="none", affine_penalty=0.5,
                             random_state=0).fit(X)
    # (the affine penalty given: "auto" first aligns the rows once per candidate)
    # 3 Lloyd iterations: 3 continued passes of 3 chunks of 64 rows; from the identity the
    # first pass and the final assignment (3 chunks each), whose distances the statistics
    # of beta_ reuse (with the warp alone: with the default intensity transform this
    # fit's labels repeat after one iteration)
    assert calls == {"continued": 9, "fresh": 6}


def reused_distances(monkeypatch):
    """Record whether the statistics of beta_ and noise_variance_ are given distances,
    and check that those are what a fresh alignment of their rows gives, bit for bit."""
    given = []
    sums = spatial_explain.warp_sums

    def checking(X, labels, centers, geometry, distances=None):
        given.append(distances is not None)
        if distances is not None:
            torch.testing.assert_close(distances, geometry.pairwise(X, centers),
                                       rtol=0, atol=0)
        return sums(X, labels, centers, geometry, distances)

    monkeypatch.setattr(spatial_explain, "warp_sums", checking)
    return given


@pytest.mark.parametrize("moves", [0, 2])
@pytest.mark.parametrize("shape", [(8, 8), (1, 64)])
def test_the_statistics_reuse_the_final_distances_of_a_fit(monkeypatch, moves, shape):
    X = load_digits().data[:90]
    given = reused_distances(monkeypatch)
    # (seed 1: with moves, one is kept on either shape, so the distances come from the
    # Lloyd run after it)
    st = SpatialTransformerKMeans(4, n_landmarks=9, max_iter=3, split_merge_moves=moves,
                                  image_shape=shape, random_state=1).fit(X)
    assert given == [True]
    st.partial_fit(X[:40])  # its step's assignment is fresh too
    assert given == [True, True]
    # above the 512 statistics rows, the subset is aligned on its own
    SpatialTransformerKMeans(2, n_landmarks=4, n_steps=1, affine_steps=0, max_iter=1,
                             split_merge_moves=0, random_state=0).fit(
        np.tile(X[:60], (9, 1)))
    assert given == [True, True, False]


@pytest.mark.parametrize("moves", [0, 2])
def test_inertia_and_labels_are_those_of_the_fresh_assignment(moves):
    X = load_digits().data[:200]
    st = SpatialTransformerKMeans(5, n_landmarks=9, max_iter=4, split_merge_moves=moves,
                                  random_state=0).fit(X)
    distances = st.transform(X) ** 2
    np.testing.assert_array_equal(st.labels_, st.predict(X))
    np.testing.assert_array_equal(st.labels_, distances.argmin(1))
    assert st.inertia_ == pytest.approx(float(distances.min(1).sum()), rel=1e-9)


@pytest.mark.parametrize("max_iter", [3, 5])
def test_a_split_merge_moves_fit_runs_twice_max_iter(max_iter):
    # the move's fit starts with two new centroids far from convergence (see _fit_plan)
    plan = SpatialTransformerKMeans(4, max_iter=max_iter)._fit_plan(64)
    assert plan.refine.max_iter == 2 * max_iter

