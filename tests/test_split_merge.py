"""The estimate that picks a split–merge move (skxclust._split_merge)."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from skxclust import SpatialTransformerKMeans
from skxclust._split_merge import _HALF_ROWS_NEAREST, _best_move, _to_halves

F64 = torch.float64


@pytest.fixture(scope="module")
def digits():
    X = torch.as_tensor(load_digits().data[:150], dtype=F64)
    geometry = SpatialTransformerKMeans(5, n_landmarks=9, random_state=0)._make_geometry(64)
    centers = X[[0, 30, 60, 90, 120]]
    return X, centers, geometry, geometry.pairwise(X, centers)


@pytest.mark.parametrize("split", [0, 3])
def test_the_halves_are_aligned_to_the_rows_with_the_split_centroid_among_their_3_nearest(
        digits, split):
    X, centers, geometry, distances = digits
    halves = torch.stack([centers[split] * 0.9, 0.5 * (centers[split] + X[split * 30 + 1])])
    out = _to_halves(X, distances, [split], {split: halves}, geometry)[split]
    rank = distances.argsort(dim=1).argsort(dim=1)[:, split]
    near = rank < _HALF_ROWS_NEAREST
    assert _HALF_ROWS_NEAREST == 3
    assert bool((rank == 2).any()) and bool((~near).any())  # both kinds of rows present
    # the others keep the centroids they have: not counted as moving to a half
    assert bool(torch.isinf(out[~near]).all())
    torch.testing.assert_close(out[near], geometry.pairwise(X[near], halves), rtol=0, atol=0)


def test_the_halves_of_several_signal_clusters_are_aligned_in_one_grouped_call_as_alone(
        monkeypatch):
    from skxclust import _warp_geometry

    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 60)
    X = torch.as_tensor(np.concatenate([np.sin(2 * np.pi * (f * t + rng.uniform(0, 1, (20, 1))))
                                        for f in (1, 2, 3)]), dtype=F64)
    # 4 knots and float64 warps: with 8 knots (the signals' default), or with float32
    # warps since the solver reuses each accepted step's samples, one of these 120 periodic
    # pairs ends in another of its optima when its rounding changes (10-26 % apart), not a
    # grouping matter
    geometry = SpatialTransformerKMeans(3, n_landmarks=16, random_state=0,
                                        warp_dtype="float64")._make_geometry(60, 0.5)
    centers = X[[0, 20, 40]]
    distances = geometry.pairwise(X, centers)
    halves = {c: torch.stack([X[20 * c + 1], X[20 * c + 2]]) for c in range(3)}
    calls = []
    monkeypatch.setattr(_warp_geometry.WarpGeometry, "pair_warps", spy_calls(
        _warp_geometry.WarpGeometry.pair_warps, calls))
    together = _to_halves(X, distances, [2, 0], halves, geometry)
    assert len(calls) == 1  # one grouped assignment (one chunk: 60 rows)
    for c in (2, 0):
        alone = _to_halves(X, distances, [c], halves, geometry)[c]
        assert torch.equal(torch.isfinite(together[c]), torch.isfinite(alone))
        # the same fits up to the path of the solver: a 1-D fit that starts from a whole
        # shift and takes its affine steps on the coarse level depends on the pairs beside
        # it by rounding (here up to 1.2 %)
        torch.testing.assert_close(together[c], alone, rtol=0.05, atol=1e-9)
    assert len(calls) == 3


def spy_calls(method, calls):
    def spy(*args, **kwargs):
        calls.append(1)
        return method(*args, **kwargs)
    return spy


# -- which move is tried, and the one-iteration probe -----------------------------------
# Five clusters on a line; cluster 1 holds two groups (at 8 and 12), clusters 3 and 4 two
# close ones (at 29.8 and 30.2): splitting 1 and removing 3 or 4 is the only good move.
LINE = torch.cat([torch.full((10,), v, dtype=F64) for v in (0.0, 8.0, 12.0, 20.0, 29.8,
                                                               30.2)])[:, None]
LINE_CENTERS = torch.tensor([[0.0], [10.0], [20.0], [29.8], [30.2]], dtype=F64)


class SquaredEuclidean:
    """The geometry methods the estimate of a move calls."""

    @staticmethod
    def pairwise(X, centers):
        return torch.cdist(X, centers) ** 2

    @staticmethod
    def grouped(row_groups, center_groups):
        return None  # no grouped form: one pairwise per cluster


@pytest.mark.parametrize("rank, chosen", [(1, True), (2, True), (3, False)])
def test_the_move_tried_is_the_best_estimated_of_the_three_largest_split_gains(rank, chosen):
    distances = SquaredEuclidean.pairwise(LINE, LINE_CENTERS)
    useless = LINE_CENTERS[[0, 0]].clone()  # a "split" into two copies of one centroid
    halves = [LINE_CENTERS[[c, c]].clone() for c in range(5)]
    halves[1] = torch.tensor([[8.0], [12.0]], dtype=F64)
    order = [c for c in (0, 2, 3, 4) if c != 1]
    order.insert(rank, 1)  # cluster 1's gain is the (rank + 1)-th largest
    gains = torch.zeros(5, dtype=F64)
    gains[torch.tensor(order)] = torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0], dtype=F64)
    halves[0] = useless
    split, removed, estimate = _best_move(LINE, torch.ones(60, dtype=F64), distances, gains,
                                          halves, SquaredEuclidean)
    inertia = float(distances.min(dim=1).values.sum())
    if chosen:
        assert (split, removed in (3, 4)) == (1, True)
        assert estimate < 0.1 * inertia  # 8 and 12 exact, 29.8 and 30.2 0.4 apart
    else:
        assert split != 1 and estimate > inertia


def _line_fit():
    from skxclust._euclidean import EuclideanGeometry
    from skxclust._lloyd import best_restart, lloyd

    geometry = EuclideanGeometry()
    weight = torch.ones(LINE.shape[0], dtype=F64)
    return geometry, weight, best_restart(lloyd(LINE, LINE_CENTERS[None], geometry, weight,
                                                10, 0.0))


def _spied_moves(monkeypatch, estimate_ratio):
    """A SplitMerge on the line, every move estimated at ``estimate_ratio`` times the
    distortion; returns (fit after the moves, max_iter of each Lloyd run of a move)."""
    import functools

    from skxclust import _lloyd, _split_merge
    from skxclust._merge_init import euclidean_kmeans

    geometry, weight, fit = _line_fit()
    runs = []

    def spy(X, centers, geometry, sample_weight, max_iter, tol, **kwargs):
        runs.append(max_iter)
        return _lloyd.lloyd(X, centers, geometry, sample_weight, max_iter, tol, **kwargs)

    def best_move(*args):
        split, removed, _ = _best_move(*args)
        return split, removed, estimate_ratio * fit.inertia

    monkeypatch.setattr(_split_merge, "lloyd", spy)
    monkeypatch.setattr(_split_merge, "_best_move", best_move)
    moves = _split_merge.SplitMerge(max_moves=1, max_iter=6,
                                    seed_centers=functools.partial(euclidean_kmeans, n_runs=3))
    after = moves(LINE, weight, fit, geometry=geometry, tol=0.0,
                  generator=torch.Generator().manual_seed(0))
    return fit, after, [r for r in runs if r != 2]  # 2: the two-cluster fits of the gains


@pytest.mark.parametrize("ratio, tried", [(1.04, True), (1.06, False)])
def test_a_move_estimated_up_to_5_percent_above_the_distortion_is_tried(monkeypatch, ratio,
                                                                        tried):
    fit, after, runs = _spied_moves(monkeypatch, ratio)
    assert bool(runs) == tried
    if tried:  # the line's good move: 8 and 12 separated, 29.8 and 30.2 together
        assert after.inertia < 0.1 * fit.inertia


def test_a_move_runs_past_its_first_iteration_only_when_that_lowers_the_distortion(
        monkeypatch):
    from skxclust import _split_merge

    fit, after, runs = _spied_moves(monkeypatch, 1.0)
    assert runs == [1, 5]  # the probe, then the rest of the move's 6 iterations
    assert after.inertia < fit.inertia and after.n_iter > fit.n_iter
    # a move estimated below the distortion runs its 6 iterations at once
    assert _spied_moves(monkeypatch, 0.99)[2] == [6]

    # a move that makes things worse: its halves are two copies of a far-away point
    def far_halves(X, sample_weight, labels, nearest, geometry, generator, seed_centers):
        gains = torch.arange(5, dtype=F64)
        return gains, [torch.full((2, 1), 1e3, dtype=F64)] * 5

    monkeypatch.setattr(_split_merge, "_split_gains", far_halves)
    fit, after, runs = _spied_moves(monkeypatch, 1.0)
    assert runs == [1]  # the probe only
    assert after.inertia == fit.inertia and after.n_iter == fit.n_iter
    torch.testing.assert_close(after.centers, fit.centers)


def _steps(n=20, length=80, seed=0):
    """Four shapes of a step at a random time (up, pulse, overshoot, ramp), z-normalised."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, length)
    parts = []
    for k in range(4):
        tau = rng.uniform(0.25, 0.75, (n, 1))
        step = (t > tau).astype(float)
        step = [step, step * (t < tau + 0.15), step + 1.5 * np.exp(-((t - tau) / 0.03) ** 2),
                np.clip((t - tau) / 0.2, 0, 1)][k]
        parts.append(step + 0.1 * rng.standard_normal((n, length)))
    X = np.concatenate(parts)
    return (X - X.mean(1, keepdims=True)) / X.std(1, keepdims=True)


@pytest.mark.parametrize("random_state", [0, 1])
def test_more_restarts_never_end_at_a_higher_distortion_than_the_first_alone(random_state):
    # the restart was chosen before the split-merge moves: 3 restarts ended at 762.6 and
    # 733.2 where the first alone ended at 704.4 and 730.3
    X = _steps()
    one = SpatialTransformerKMeans(4, random_state=random_state, n_init=1).fit(X)
    three = SpatialTransformerKMeans(4, random_state=random_state, n_init=3).fit(X)
    assert three.inertia_ <= one.inertia_ * (1 + 1e-9)


def test_every_restart_is_refined_with_its_own_generator_and_the_lowest_refined_is_kept(
        monkeypatch):
    from skxclust import _split_merge

    calls = []

    def fake_moves(self, X, sample_weight, fit, *, geometry, tol, generator, distances=None):
        calls.append((float(fit.inertia), generator))
        index = len(calls) - 1  # refined inertia: the second restart becomes the lowest
        return fit._replace(inertia=[3.0, 1.0, 2.0][index], n_iter=100 + index)

    monkeypatch.setattr(_split_merge.SplitMerge, "__call__", fake_moves)
    st = SpatialTransformerKMeans(4, random_state=0, n_init=3, max_iter=1, n_steps=2)
    st.fit(_steps(n=6))
    assert len(calls) == 3 and len({id(g) for _, g in calls}) == 3
    assert st.n_iter_ == 101


def test_only_clusters_of_at_least_4_rows_are_split():
    from skxclust._euclidean import EuclideanGeometry
    from skxclust._split_merge import _split_gains

    X = torch.tensor([0.0, 1.0, 2.0, 10.0, 11.0, 13.0, 14.0], dtype=F64)[:, None]
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 1])  # 3 rows, 4 rows
    nearest = torch.ones(7, dtype=F64)
    gains, halves = _split_gains(X, torch.ones(7, dtype=F64), labels, nearest,
                                 EuclideanGeometry(), torch.Generator().manual_seed(0),
                                 _first_and_last)
    assert halves[0] is None and float(gains[0]) == -np.inf
    assert halves[1] is not None and np.isfinite(float(gains[1]))


# -- the numbers the ranking and the estimate are made of --------------------------------
def _first_and_last(Xc, k, sample_weight, generator):
    return Xc[[0, -1]], None  # deterministic 2-means seeds: the same for repeated rows


def _signal_geometry():
    return SpatialTransformerKMeans(3, n_landmarks=16, warp_dtype="float64", n_steps=6,
                                    affine_steps=2, random_state=0)._make_geometry(40, 0.5)


@pytest.mark.parametrize("kind", ["euclidean", "signals, grouped"])
def test_split_gains_count_an_integer_weight_as_repeated_rows(kind):
    from skxclust._euclidean import EuclideanGeometry
    from skxclust._split_merge import _split_gains

    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 40)
    # three clusters of 10 rows, each of two shapes (the halves a split finds)
    X = np.concatenate([np.sin(2 * np.pi * (f * t + rng.choice([0.0, 0.3], (10, 1))))
                        + 0.05 * rng.standard_normal((10, 40)) for f in (1, 2, 3)])
    labels = np.repeat(np.arange(3), 10)
    nearest = rng.uniform(1.0, 3.0, 30)  # the rows' distances to their centroids
    weight = rng.integers(1, 4, 30)
    geometry = EuclideanGeometry() if kind == "euclidean" else _signal_geometry()
    # the rows of each cluster in order, each repeated as often as its weight (at most 30
    # rows a cluster: no subset is drawn)
    rep = np.repeat(np.arange(30), weight)

    def gains_of(rows, w):
        return _split_gains(torch.as_tensor(X[rows], dtype=F64), torch.as_tensor(w, dtype=F64),
                            torch.as_tensor(labels[rows]), torch.as_tensor(nearest[rows]),
                            geometry, torch.Generator().manual_seed(0), _first_and_last)

    weighted, halves_w = gains_of(np.arange(30), weight.astype(float))
    repeated, halves_r = gains_of(rep, np.ones(len(rep)))
    assert bool((weighted > 0).all())
    torch.testing.assert_close(weighted, repeated, rtol=1e-6, atol=1e-9)
    for a, b in zip(halves_w, halves_r):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_a_split_gain_from_a_subset_of_rows_is_scaled_to_the_whole_cluster(monkeypatch):
    from skxclust import _split_merge
    from skxclust._euclidean import EuclideanGeometry

    monkeypatch.setattr(_split_merge, "_SPLIT_ROWS", 8)
    # one cluster of 30 rows: exact copies of two points, every row 1.0 from its centroid;
    # the two-cluster fit of any subset ends at zero distortion, so the whole cluster's gain
    # is its weighted distortion, 30 * 2.0
    X = torch.tensor([[-1.0], [1.0]], dtype=F64).repeat(15, 1)
    gains, _ = _split_merge._split_gains(
        X, torch.full((30,), 2.0, dtype=F64), torch.zeros(30, dtype=torch.long),
        torch.ones(30, dtype=F64), EuclideanGeometry(), torch.Generator().manual_seed(0),
        lambda Xc, k, w, g: (torch.tensor([[-1.0], [1.0]], dtype=F64), None))
    assert float(gains[0]) == pytest.approx(60.0)


def _estimate(distances, to_halves, weight, split, removed):
    """Each row to its nearest centroid left (without ``split`` and ``removed``, with the
    halves where the row has them), summed with its weight: the move's estimate."""
    options = torch.cat([distances, to_halves], 1)
    keep = torch.ones(options.shape[1], dtype=torch.bool)
    keep[[split, removed]] = False
    return float((weight * options[:, keep].min(dim=1).values).sum())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_move_is_the_split_and_removal_of_least_distortion_with_every_row_re_assigned(
        seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(60, 2, generator=g, dtype=F64) * 3
    centers = torch.randn(6, 2, generator=g, dtype=F64) * 3
    weight = torch.rand(60, generator=g, dtype=F64) + 0.5
    distances = SquaredEuclidean.pairwise(X, centers)
    halves = [centers[[c, c]] + torch.randn(2, 2, generator=g, dtype=F64) for c in range(6)]
    gains = torch.rand(6, generator=g, dtype=F64)
    split, removed, estimate = _best_move(X, weight, distances, gains, halves,
                                          SquaredEuclidean)
    to_halves = _to_halves(X, distances, list(range(6)), dict(enumerate(halves)),
                           SquaredEuclidean)
    best = min((_estimate(distances, to_halves[c], weight, c, a), c, a)
               for c in gains.argsort(descending=True)[:3].tolist()
               for a in range(6) if a != c)
    assert (split, removed) == best[1:]
    assert estimate == pytest.approx(best[0], rel=1e-12)
