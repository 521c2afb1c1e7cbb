"""The shared k-means machinery: batched restarts and float32 screening change no result."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from skxclust._euclidean import EuclideanGeometry
from skxclust._geometry import Assignment
from skxclust._lloyd import best_index, best_restart, lloyd
from skxclust._seeding import kmeans_plusplus, kmeans_plusplus_restarts
from skxclust._threads import intra_op_threads


def _generators(seeds):
    return [torch.Generator().manual_seed(s) for s in seeds]


@pytest.fixture(scope="module")
def digits_t():
    X = load_digits().data[:500]
    return torch.from_numpy(X - X.mean(axis=0))


@pytest.fixture(scope="module")
def blobs_t():
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=4.0, size=(5, 12))
    X = np.concatenate([c + rng.normal(size=(60, 12)) for c in centres])
    return torch.from_numpy(X)


@pytest.mark.parametrize("n_clusters", [2, 5, 9])
def test_batched_kmeans_plusplus_equals_separate_seedings(blobs_t, n_clusters):
    sw = torch.ones(blobs_t.shape[0], dtype=blobs_t.dtype)
    seeds = [3, 14, 15, 92]
    batched = kmeans_plusplus_restarts(blobs_t, n_clusters, sw, _generators(seeds))
    separate = torch.stack([kmeans_plusplus(blobs_t, n_clusters, sw, g)
                            for g in _generators(seeds)])
    torch.testing.assert_close(batched, separate, rtol=0, atol=0)


def test_shared_generator_is_consumed_restart_after_restart(blobs_t):
    sw = torch.ones(blobs_t.shape[0], dtype=blobs_t.dtype)
    gen = torch.Generator().manual_seed(7)
    batched = kmeans_plusplus_restarts(blobs_t, 4, sw, [gen] * 3)
    gen = torch.Generator().manual_seed(7)
    separate = torch.stack([kmeans_plusplus(blobs_t, 4, sw, gen) for _ in range(3)])
    torch.testing.assert_close(batched, separate, rtol=0, atol=0)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("batch_size", [4096, 37])
def test_batched_restarts_match_one_run_at_a_time(digits_t, weighted, batch_size):
    n = digits_t.shape[0]
    sw = (torch.from_numpy(np.random.default_rng(1).uniform(0.5, 2.0, n)) if weighted
          else torch.ones(n, dtype=digits_t.dtype))
    inits = kmeans_plusplus_restarts(digits_t, 6, sw, _generators(range(5)))
    geometry = EuclideanGeometry(batch_size)
    runs = lloyd(digits_t, inits, geometry, sw, 100, 1e-6)
    labels, inertia, centers, n_iter = runs
    for r in range(inits.shape[0]):
        lab, ine, cen, it, *_ = best_restart(lloyd(digits_t, inits[r][None],
                                               EuclideanGeometry(batch_size), sw, 100, 1e-6))
        assert torch.equal(labels[r], lab)
        assert int(n_iter[r]) == it
        torch.testing.assert_close(centers[r], cen, rtol=1e-12, atol=1e-12)
        assert float(inertia[r]) == pytest.approx(ine, rel=1e-12)
    assert best_restart(runs).inertia == pytest.approx(float(inertia.min()))


@pytest.mark.parametrize("n_restarts", [2, 5])
def test_serial_restart_groups_give_the_same_fit_on_one_thread_two_threads_and_verbose(
        digits_t, n_restarts, capsys):
    # digits-sized restarts run as two groups: on two threads in parallel, else in turn
    sw = torch.ones(digits_t.shape[0], dtype=digits_t.dtype)
    inits = kmeans_plusplus_restarts(digits_t, 8, sw, _generators(range(n_restarts)))
    assert intra_op_threads(EuclideanGeometry().pass_work(digits_t, inits)) == 1
    saved = torch.get_num_threads()
    runs = []
    try:
        for threads, verbose in [(2, 0), (1, 0), (2, 1)]:
            torch.set_num_threads(threads)
            runs.append(lloyd(digits_t, inits, EuclideanGeometry(), sw, 100, 1e-6, verbose))
    finally:
        torch.set_num_threads(saved)
    assert torch.get_num_threads() == saved
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert torch.equal(a, b)
    assert "Converged" in capsys.readouterr().out


@pytest.mark.parametrize("restarts", [1, 4])
def test_float32_screening_gives_the_float64_labels(digits_t, restarts):
    # Integer-valued digits make exact ties between centroids common: the screening must
    # hand every close call back to float64.
    sw = torch.ones(digits_t.shape[0], dtype=digits_t.dtype)
    centers = kmeans_plusplus_restarts(digits_t, 10, sw, _generators(range(restarts)))
    exact = EuclideanGeometry(64).assign(digits_t, centers)
    screening = EuclideanGeometry(64, screen=True)
    screening.screen_min_macs = 0
    screened = screening.assign(digits_t, centers)
    assert torch.equal(screened.labels, exact.labels)
    torch.testing.assert_close(screened.distances, exact.distances, rtol=1e-4, atol=1e-3)
    refined = screening.refine(digits_t, centers, screened)
    assert torch.equal(refined.labels, exact.labels)
    assert torch.equal(refined.distances, exact.distances)


def test_screened_lloyd_reports_the_exact_inertia(blobs_t):
    sw = torch.ones(blobs_t.shape[0], dtype=blobs_t.dtype)
    init = blobs_t[[0, 70, 130, 190, 250]].clone()
    plain = best_restart(lloyd(blobs_t, init[None], EuclideanGeometry(), sw, 50, 0.0))
    geometry = EuclideanGeometry(screen=True)
    geometry.screen_min_macs = 0
    screened = best_restart(lloyd(blobs_t, init[None], geometry, sw, 50, 0.0))
    assert torch.equal(plain[0], screened[0])
    assert screened[1] == pytest.approx(plain[1], rel=1e-13)


def test_partial_sums_of_blocks_add_up_to_the_update(digits_t):
    sw = torch.from_numpy(np.random.default_rng(2).uniform(0.1, 3.0, digits_t.shape[0]))
    geometry = EuclideanGeometry()
    centers = digits_t[:4].clone()
    a = geometry.assign(digits_t, centers)
    new, weight = geometry.update(digits_t, centers, a, sw)
    sums = torch.zeros_like(centers)
    total = torch.zeros(4, dtype=digits_t.dtype)
    for sl in (slice(0, 150), slice(150, 420), slice(420, None)):
        s, w = geometry.partial_sums(digits_t[sl], centers,
                                     Assignment(a.labels[sl], a.distances[sl]), sw[sl])
        sums += s
        total += w
    torch.testing.assert_close(total, weight)
    torch.testing.assert_close(geometry.centers_from_sums(sums, total, centers), new)


@pytest.mark.parametrize("inertia, expected", [
    ([5.0, 4.0, 4.0 * (1 + 1e-13), 6.0], 1),  # a rounding-level tie: the first one
    ([5.0, 4.0 * (1 + 1e-13), 4.0, 6.0], 1),  # ... whichever of the two is a few ulps lower
    ([5.0, 4.0, 3.9, 6.0], 2),  # a really lower inertia wins
    ([-2.0, -2.0 * (1 - 1e-13)], 0),
])
def test_best_restart_is_the_first_of_restarts_whose_inertia_ties_with_the_lowest(
        inertia, expected):
    assert best_index(torch.tensor(inertia, dtype=torch.float64)) == expected


def test_lloyd_takes_and_returns_the_restart_axis(blobs_t):
    # one return type: a single run is a restart axis of length 1
    sw = torch.ones(blobs_t.shape[0], dtype=blobs_t.dtype)
    init = blobs_t[[0, 70, 130]].clone()
    labels, inertia, centers, n_iter = lloyd(blobs_t, init[None], EuclideanGeometry(), sw,
                                             50, 0.0)
    assert labels.shape == (1, blobs_t.shape[0]) and inertia.shape == (1,)
    assert centers.shape == (1, 3, blobs_t.shape[1]) and n_iter.shape == (1,)
    with pytest.raises(ValueError, match=r"\(R, K, D\)"):
        lloyd(blobs_t, init, EuclideanGeometry(), sw, 50, 0.0)


def test_a_centroid_without_weight_keeps_its_value():
    # the update's sums / weight where a centroid has no weight (e.g. a streaming chunk
    # whose rows near it all weigh 0): its value stays, it does not collapse to 0
    centers = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    sums = torch.tensor([[4.0, 6.0], [0.0, 0.0]], dtype=torch.float64)
    weight = torch.tensor([2.0, 0.0], dtype=torch.float64)
    out = EuclideanGeometry.centers_from_sums(sums, weight, centers)
    torch.testing.assert_close(out, torch.tensor([[2.0, 3.0], [3.0, 4.0]],
                                                 dtype=torch.float64))


@pytest.mark.parametrize("screen", [False, True])
def test_squared_distances_are_never_negative_for_rows_on_their_centroid(screen):
    # ||mu||^2 - 2 x.mu + ||x||^2 rounds below 0 for x == mu far from the origin
    g = torch.Generator().manual_seed(0)
    centers = 1e4 + torch.randn(8, 30, generator=g, dtype=torch.float64)
    X = torch.cat([centers, centers + 1e-3 * torch.randn(8, 30, generator=g,
                                                         dtype=torch.float64)]).repeat(50, 1)
    geometry = EuclideanGeometry(screen=screen)
    geometry.screen_min_macs = 0  # screen however small the pass
    assignment = geometry.assign(X, centers)
    assert bool((assignment.distances >= 0).all())
    assert bool((geometry.pairwise(X, centers) >= 0).all())
