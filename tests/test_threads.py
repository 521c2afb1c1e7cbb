"""Thread holding around the small CPU k-means loops never leaks out of them."""

import threading

import numpy as np
import pytest
import torch

from skxclust import ExplainableKMeans
from skxclust._threads import _SERIAL_MACS, serial_threads, torch_threads


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_small_cpu_problems_run_serial_large_ones_keep_torch_setting():
    assert serial_threads(torch.zeros(100, 10), 8) == 1
    assert serial_threads(torch.zeros(1, _SERIAL_MACS), 1) is None


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
