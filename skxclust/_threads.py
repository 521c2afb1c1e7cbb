"""Intra-op thread control for the small, many-pass loops of k-means on the CPU."""

from __future__ import annotations

import contextlib
import threading

import torch

__all__ = ["LLOYD_SERIAL_MACS", "serial_threads", "torch_threads"]

# Below this many multiply-adds per pass over the data (under a millisecond of work on one
# core), torch's per-op parallel regions cost more than they save in the many small ops of
# a Lloyd iteration or a k-means++ step, and on a shared or virtualised CPU every region
# can wait milliseconds for a descheduled thread. Measured on 2 cores with sklearn's digits
# (1797 x 64, K=10: ~1e6 per pass): one thread is as fast as two on an idle machine and
# 10-50x faster on a busy one. Larger passes (MNIST-5k, 5000 x 784: ~1.6e7 per k-means++
# step, ~4e7 per Lloyd pass with K=10) keep torch's threads: there two threads are faster
# on an idle machine, although several times slower on a busy one. scikit-learn likewise
# holds BLAS to one thread inside its Lloyd loop.
_SERIAL_MACS = 2**22
_threads_lock = threading.Lock()
_threads_state = {"depth": 0, "saved": 0}  # entries in all threads; setting before the first
_thread_depth = threading.local()  # entries in the calling thread


# A Lloyd iteration is ~30 small ops around its one or two products: with R restarts
# sharing the passes (digits, 10 restarts: ~1.2e7 multiply-adds per pass) one thread was
# still faster (median fit 0.083 s vs 0.110 s with two threads on an idle 2-core machine).
LLOYD_SERIAL_MACS = 2**26


def serial_threads(X: torch.Tensor, n_columns: int, limit: int = _SERIAL_MACS) -> int | None:
    """1 when a CPU pass of X against ``n_columns`` vectors (below ``limit`` multiply-adds)
    is too small for threads to pay off, else None (keep torch's setting)."""
    if X.device.type == "cpu" and X.shape[0] * X.shape[1] * n_columns < limit:
        return 1
    return None


@contextlib.contextmanager
def torch_threads(n: int | None):
    """Run the body with ``n`` torch intra-op threads (None: unchanged).

    With torch's OpenMP backend, ``torch.set_num_threads`` changes the calling thread's
    OpenMP setting and the default of threads that start using torch later, not that of
    other running threads. So each thread sets ``n`` on its own outermost entry and puts
    the setting back on its own outermost exit; the value put back is the one saved by the
    first entry of all threads (while none is inside), so that concurrent uses (e.g.
    ``GridSearchCV`` with joblib's threading backend) leave every thread, and the default
    for new threads, as they found them.
    """
    if n is None:
        yield
        return
    depth = getattr(_thread_depth, "value", 0)
    with _threads_lock:
        if _threads_state["depth"] == 0:
            _threads_state["saved"] = torch.get_num_threads()
        _threads_state["depth"] += 1
        if depth == 0:
            torch.set_num_threads(n)
    _thread_depth.value = depth + 1
    try:
        yield
    finally:
        _thread_depth.value = depth
        with _threads_lock:
            _threads_state["depth"] -= 1
            if depth == 0:
                torch.set_num_threads(_threads_state["saved"])
