"""1-D signals share calls more than images: chunks of ``SIGNAL_CHUNK_SCALE`` times the
rows, and grouped warp fits (rows fitted to their own group's centroids only: ``allowed``
pairs of the solvers, ``WarpGeometry.grouped``), which the split-merge moves' two-cluster
fits of signals use (``_grouped_two_means``)."""

import pytest
import torch
from sklearn.datasets import load_digits

import skxclust._split_merge as split_merge
import skxclust._warp_geometry as warp_geometry
from skxclust import SpatialTransformerKMeans
from skxclust._lloyd import best_restart, lloyd
from skxclust._relocation import relocate_in_groups
from skxclust._split_merge import _grouped_two_means, _split_gains
from skxclust._threads import SIGNAL_CHUNK_SCALE
from skxclust.nn import make_warp_model
from skxclust.nn.graduated import graduated_fit_warps
from skxclust.nn.warp_refit import refit_warps
from skxclust.nn.warp_solver import fit_warps

F64 = torch.float64
N = 48
POINTS = torch.linspace(-1, 1, N, dtype=F64)


def bump(center, width=0.15):
    return torch.exp(-((POINTS - center) ** 2) / (2 * width * width))


@pytest.fixture(scope="module")
def signals():
    """Six signals, four centroids, two groups: rows 0-2 with centroids 0-1, rows 3-5 with
    centroids 2-3."""
    samples = torch.stack([bump(c) for c in (-0.5, -0.3, 0.1, 0.2, 0.4, 0.6)])
    centroids = torch.stack([bump(c) + 0.3 * bump(-c) for c in (-0.4, 0.0, 0.3, 0.5)])
    allowed = torch.zeros(6, 4, dtype=torch.bool)
    allowed[:3, :2] = allowed[3:, 2:] = True
    return samples, centroids, allowed, make_warp_model((1, N), 16, "tps", F64)


@pytest.mark.parametrize("screen", [{}, {"screen_ratio": 1.5, "screen_steps": 2}])
def test_a_restricted_fit_fits_the_allowed_pairs_as_their_own_fits_do(signals, screen):
    samples, centroids, allowed, model = signals
    kw = dict(penalty=1e-2, n_steps=8, affine_steps=2, shift_search=True, **screen)
    energy, warps = fit_warps(samples, centroids, model, allowed=allowed, **kw)
    assert bool(torch.isinf(energy[~allowed]).all())
    for rows, cols in ((slice(0, 3), slice(0, 2)), (slice(3, 6), slice(2, 4))):
        own, own_warps = fit_warps(samples[rows], centroids[cols], model, **kw)
        torch.testing.assert_close(energy[rows, cols], own, rtol=1e-9, atol=1e-12)
        torch.testing.assert_close(warps[rows, cols], own_warps, rtol=1e-7, atol=1e-9)
    # a continued fit keeps the restriction too, and continues the allowed pairs alike
    again, _ = refit_warps(samples, centroids, model, warps, penalty=1e-2, n_steps=3,
                           allowed=allowed)
    assert bool(torch.isinf(again[~allowed]).all())
    own, _ = refit_warps(samples[:3], centroids[:2], model, warps[:3, :2], penalty=1e-2,
                         n_steps=3)
    torch.testing.assert_close(again[:3, :2], own, rtol=1e-9, atol=1e-12)


def test_a_chunk_of_signals_holds_signal_chunk_scale_times_the_rows(monkeypatch):
    assert SIGNAL_CHUNK_SCALE == 8
    image = SpatialTransformerKMeans(4, batch_size=16)._make_geometry(64)
    signal = SpatialTransformerKMeans(4, batch_size=16, image_shape=(1, 64))._make_geometry(64)
    for n_centers in (None, 2, 4, 8):
        assert signal._chunk_rows(n_centers) == SIGNAL_CHUNK_SCALE * image._chunk_rows(n_centers)
    assert image._chunk_rows(4) == 16 and image._chunk_rows(8) == 8
    X = torch.as_tensor(load_digits().data[:200], dtype=F64)
    sizes = []

    def counting(X, *args, **kwargs):
        sizes.append(X.shape[0])
        return graduated_fit_warps(X, *args, **kwargs)

    monkeypatch.setattr(warp_geometry, "graduated_fit_warps", counting)
    signal.assign(X, X[:4])
    assert sizes == [128, 72]


def test_only_signals_have_a_grouped_geometry():
    groups = torch.tensor([0, 0, 1]), torch.tensor([0, 0, 1, 1])
    image = SpatialTransformerKMeans(4)._make_geometry(64)
    assert image.grouped(*groups) is None
    signal = SpatialTransformerKMeans(4, image_shape=(1, 64))._make_geometry(64)
    grouped = signal.grouped(*groups)
    assert grouped is not None and grouped.groups[2] == 2 and signal.groups is None
    # a chunk counts a row's own centroids: as many rows as a two-centroid pass
    assert grouped._chunk_rows(4) == signal._chunk_rows(2)


def test_a_grouped_assignment_stays_within_each_group(signals):
    samples, centroids, allowed, _ = signals
    geometry = SpatialTransformerKMeans(4, image_shape=(1, N))._make_geometry(N)
    row_groups, center_groups = torch.tensor([0, 0, 0, 1, 1, 1]), torch.tensor([0, 0, 1, 1])
    grouped = geometry.grouped(row_groups, center_groups)
    out = grouped.assign(samples, centroids)
    assert bool((center_groups[out.labels] == row_groups).all())
    assert bool(torch.isinf(out.pairwise[~allowed]).all())
    assert bool(torch.isfinite(out.pairwise[allowed]).all())
    # the first pass of a run, capped, and the continued one keep to the groups too
    run = grouped.for_rows(samples, torch.ones(6, dtype=F64))
    for _ in range(2):
        passed = run.assign(samples, centroids)
        assert bool(torch.isinf(passed.pairwise[~allowed]).all())


def test_an_empty_centroid_moves_to_its_own_groups_farthest_row():
    X = torch.arange(12, dtype=F64).reshape(6, 2)
    centers = torch.zeros(1, 4, 2, dtype=F64)
    weight = torch.tensor([[2.0, 1.0, 3.0, 0.0]])
    distances = torch.tensor([[9.0, 1.0, 1.0, 1.0, 5.0, 2.0]])  # row 0 farthest overall
    relocate_in_groups(X, centers, weight, distances, torch.tensor([0, 0, 0, 1, 1, 1]),
                       torch.tensor([0, 0, 1, 1]))
    torch.testing.assert_close(centers[0, 3], X[4])  # group 1's farthest row
    assert bool((centers[0, :3] == 0).all())


@pytest.mark.parametrize("weighted", [False, True])
def test_the_split_gains_of_signals_come_from_one_grouped_run(monkeypatch, weighted):
    X = torch.as_tensor(load_digits().data[:120], dtype=F64)
    geometry = SpatialTransformerKMeans(4, n_landmarks=9, image_shape=(1, 64),
                                        random_state=0)._make_geometry(64)
    weight = torch.ones(X.shape[0], dtype=F64)
    if weighted:  # rows of weight 0.25 and 4 in turn: a weight on the wrong side shows
        weight[1::2] = 4.0
        weight[::2] = 0.25
    centers = X[[0, 30, 60, 90]]
    start = geometry.assign(X, centers)
    nearest = start.distances
    generator = torch.Generator().manual_seed(0)
    runs = []

    def counting(X, centers, *args, **kwargs):
        runs.append(centers.shape[1])
        return lloyd(X, centers, *args, **kwargs)

    monkeypatch.setattr(split_merge, "lloyd", counting)
    gains, halves = _split_gains(X, weight, start.labels, nearest, geometry, generator,
                                 lambda Xc, k, w, g: (Xc[:k], None))
    assert runs == [8]  # one run, two centroids per cluster
    # each cluster's gain is its members' distortion before minus after its own two
    # centroids (their rows' own distances in the grouped run)
    jobs = [(c, torch.nonzero(start.labels == c)[:, 0]) for c in range(4)]
    jobs = [(c, m, X[m], weight[m], 1.0, X[m][:2]) for c, m in jobs]
    fits = _grouped_two_means(jobs, geometry)
    for (c, members, *_), (inertia, two) in zip(jobs, fits):
        torch.testing.assert_close(halves[c], two)
        before = float((nearest[members] * weight[members]).sum())
        assert float(gains[c]) == pytest.approx(before - inertia)
        alone = best_restart(lloyd(X[members], X[members][:2][None], geometry,
                                   weight[members], max_iter=2, tol=0.0))
        # the same fit as the cluster's own run, to the rounding of the shared calls and
        # the run's common stop
        assert inertia == pytest.approx(alone.inertia, rel=0.05)
