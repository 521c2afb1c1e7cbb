"""Thread holding around the small CPU k-means loops never leaks out of them."""

import threading

import numpy as np
import pytest
import torch

from skxclust import ExplainableKMeans
from skxclust._threads import (
    SERIAL_BELOW,
    Work,
    block_rows,
    intra_op_threads,
    map_jobs,
    torch_threads,
)


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


CPU = torch.device("cpu")


@pytest.mark.parametrize("kind", sorted(SERIAL_BELOW))
def test_small_cpu_passes_run_serial_large_ones_and_gpu_ones_keep_torch_setting(kind):
    assert intra_op_threads(Work(kind, SERIAL_BELOW[kind] - 1, CPU)) == 1
    assert intra_op_threads(Work(kind, SERIAL_BELOW[kind], CPU)) is None
    assert intra_op_threads(Work(kind, 0, torch.device("meta"))) is None
    assert intra_op_threads(None) is None


def _jobs_seen(together=1, **kwargs):
    """map_jobs over 6 jobs: (results, Python threads used, torch threads inside a job,
    torch threads during setup); the first ``together`` jobs wait until all of them run."""
    seen, setup = [], []
    barrier = threading.Barrier(together, timeout=30)

    def job(i):
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        if i < together:
            barrier.wait()
        return i * i

    out = map_jobs(job, list(range(6)), CPU,
                   setup=lambda: setup.append(torch.get_num_threads()), **kwargs)
    return out, {name for name, _ in seen}, {n for _, n in seen}, setup


def test_map_jobs_runs_single_threaded_jobs_on_as_many_threads_as_torch_has(two_threads):
    out, names, inside, setup = _jobs_seen(2, work=Work("warp", SERIAL_BELOW["warp"], CPU))
    assert out == [i * i for i in range(6)]  # in order
    assert len(names) == 2 and threading.current_thread().name not in names
    assert inside == {1} and setup == [2]
    # too small a pass for threads: one after the other, in the calling thread
    out, names, inside, setup = _jobs_seen(work=Work("warp", 1, CPU))
    assert out == [i * i for i in range(6)]
    assert names == {threading.current_thread().name} and inside == {1} and setup == [1]
    _, names, _, _ = _jobs_seen(max_workers=1)
    assert names == {threading.current_thread().name}
    assert torch.get_num_threads() == 2


def test_map_jobs_on_a_gpu_runs_the_jobs_one_after_the_other_in_the_calling_thread(
        two_threads):
    # (the jobs compute nothing on the device: no GPU is needed to check the schedule)
    names = []
    out = map_jobs(lambda i: names.append(threading.current_thread().name) or i * i,
                   [0, 1, 2], torch.device("cuda"))
    assert out == [0, 1, 4] and set(names) == {threading.current_thread().name}


def test_max_workers_caps_the_workers_but_never_adds_any():
    with torch_threads(1):  # one torch thread: one worker, whatever max_workers says
        _, names, _, _ = _jobs_seen(max_workers=3)
    assert names == {threading.current_thread().name}


@pytest.mark.parametrize("threads", [1, 2])
def test_map_jobs_collects_the_results_through_track(threads):
    # track (e.g. a progress bar) sees every job, serial or on a pool
    tracked = []

    def track(items):
        items = list(items)
        tracked.append(len(items))
        return items

    with torch_threads(threads):
        assert map_jobs(lambda i: i + 1, [0, 1, 2], CPU, track=track) == [1, 2, 3]
    assert tracked == [3]


@pytest.mark.parametrize("values, n_features, limit, rows", [
    (10, 100, 50, 1), (10**6, 10, 50, 50), (1000, 10, 500, 100), (1000, 0, 500, 500)])
def test_block_rows_is_at_least_one_and_at_most_the_limit(values, n_features, limit, rows):
    assert block_rows(values, n_features, limit) == rows


def test_torch_threads_sets_then_restores(two_threads):
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


def test_nested_uses_restore_the_outermost_setting_once(two_threads):
    with torch_threads(1):
        with torch_threads(1):
            pass
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


def test_torch_threads_restores_after_an_exception(two_threads):
    with pytest.raises(RuntimeError), torch_threads(1):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == 2


def test_concurrent_fits_leave_torch_thread_count_unchanged(two_threads):
    X = np.random.default_rng(0).random((200, 5))
    errors = []

    def fit():
        try:
            ExplainableKMeans(n_clusters=3, n_init=3, random_state=0, device="cpu").fit(X)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    workers = [threading.Thread(target=fit) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("last_to_leave", ["main", "worker"])
def test_overlapping_uses_in_two_threads_restore_both_threads(two_threads, last_to_leave):
    # torch.set_num_threads only changes the calling thread (OpenMP): whichever thread
    # leaves last must not leave the other one, or new threads, on one thread.
    entered, leave = threading.Event(), threading.Event()
    seen = {}

    def worker():
        with torch_threads(1):
            seen["inside"] = torch.get_num_threads()
            entered.set()
            leave.wait()
        seen["after"] = torch.get_num_threads()

    thread = threading.Thread(target=worker)
    with torch_threads(1):
        thread.start()
        entered.wait()
        if last_to_leave == "main":
            leave.set()
            thread.join()
    leave.set()
    thread.join()
    fresh = []
    probe = threading.Thread(target=lambda: fresh.append(torch.get_num_threads()))
    probe.start()
    probe.join()
    assert seen == {"inside": 1, "after": 2}
    assert torch.get_num_threads() == 2
    assert fresh == [2]


def test_a_thread_that_first_uses_torch_inside_keeps_its_setting(two_threads):
    # torch initialises a thread's setting on its first use, from the value any thread set
    # last: a worker that entered while another thread was inside, and first used torch
    # after that one had left (putting 2 back), ran its single-threaded job on 2 threads
    entered, leave = threading.Event(), threading.Event()
    seen = []

    def worker():
        with torch_threads(1):
            entered.set()
            leave.wait()
            seen.append(torch.get_num_threads())

    with torch_threads(1):
        thread = threading.Thread(target=worker)
        thread.start()
        entered.wait()
    leave.set()
    thread.join()
    assert seen == [1]
    assert torch.get_num_threads() == 2


def _split_gains_of_digits(monkeypatch, n_threads):
    """``_split_gains`` on 3 digit classes of 300 rows (above the ``_SPLIT_ROWS`` subset), and
    the (Python thread, torch threads) each two-cluster fit ran in."""
    from sklearn.datasets import load_digits

    from skxclust import SpatialTransformerKMeans, _lloyd, _split_merge
    from skxclust._merge_init import euclidean_kmeans

    X, y = load_digits(return_X_y=True)
    keep = np.concatenate([np.flatnonzero(y == c)[:150] for c in range(6)])
    X = torch.as_tensor(X[keep] / 16.0)
    labels = torch.as_tensor(y[keep] // 2)  # 3 clusters of 300 rows, two classes each
    # unequal weights: a subset's share of its cluster's weight is not its share of rows
    weight = torch.linspace(0.5, 2.0, X.shape[0], dtype=X.dtype)
    geometry = SpatialTransformerKMeans(3, n_steps=3, affine_steps=2, n_landmarks=4,
                                        batch_size=16)._make_geometry(64)
    seen, fit = [], _lloyd.lloyd

    def spy(*args, **kwargs):
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        return fit(*args, **kwargs)

    monkeypatch.setattr(_split_merge, "lloyd", spy)
    gains_of = _split_merge._split_gains
    generator = torch.Generator().manual_seed(0)
    with torch_threads(n_threads):
        gains, halves = gains_of(
            X, weight, labels, torch.full_like(weight, 10.0), geometry, generator,
            lambda Xc, k, w, g: euclidean_kmeans(Xc, k, w, g, n_runs=3))
    return gains, halves, seen, int(torch.randint(2**31, (1,), generator=generator))


def _split_gains_one_after_the_other(monkeypatch):
    """The reference: each cluster's subset, seeds and fit drawn and run in turn."""
    from skxclust import _lloyd, _split_merge

    def sequential(X, weight, labels, nearest, geometry, generator, seed_centers):
        gains = torch.full((3,), -torch.inf, dtype=torch.float64)
        halves = [None] * 3
        for c in range(3):
            members = torch.nonzero(labels == c).flatten()
            total = float(weight[members].to(torch.float64).sum())
            rows = _split_merge._SPLIT_ROWS
            pick = torch.randperm(members.numel(), generator=generator)[:rows]
            members = members[pick.sort().values]
            share = total / float(weight[members].to(torch.float64).sum())
            seeds, _ = seed_centers(X[members], 2, weight[members], generator)
            with torch_threads(1):
                _, inertia, centers, *_ = _lloyd.best_restart(_lloyd.lloyd(
                    X[members], seeds[None], geometry, weight[members], max_iter=2, tol=0.0))
            before = float((nearest[members].to(torch.float64) * weight[members]).sum())
            gains[c], halves[c] = share * (before - float(inertia)), centers
        return gains, halves

    monkeypatch.setattr(_split_merge, "_split_gains", sequential)


def test_split_gains_fit_one_cluster_per_core_and_do_not_depend_on_the_threads(monkeypatch):
    one = _split_gains_of_digits(monkeypatch, 1)
    two = _split_gains_of_digits(monkeypatch, 2)
    monkeypatch.undo()
    _split_gains_one_after_the_other(monkeypatch)
    reference = _split_gains_of_digits(monkeypatch, 2)
    # one torch thread: every fit in the calling thread; two: the fits spread over two
    # Python threads, each fit single-threaded
    assert {name for name, _ in one[2]} == {threading.current_thread().name}
    assert len({name for name, _ in two[2]}) == 2
    assert all(n == 1 for _, n in one[2] + two[2])
    # the subsets, seeds and fits of the one-after-the-other reference, whatever the
    # threads, and the generator left alike
    for got in (one, two):
        assert torch.equal(got[0], reference[0]) and got[3] == reference[3]
        for a, b in zip(got[1], reference[1]):
            assert torch.equal(a, b)
