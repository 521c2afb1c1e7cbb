"""The thread policy of the package, and the sizes its speed was tuned with, in one place.

The math never sets a thread count: it says how much work a pass over the data is (a
:class:`Work`) or hands over a list of independent jobs, and this module decides.

- :func:`pass_threads`: torch's intra-op threads for one pass: one thread below the size
  in :data:`SERIAL_BELOW` on the CPU, else torch's setting (on a GPU, always torch's).
  Entered by the Lloyd loop (and a ``partial_fit`` step and a dask block, through the
  geometry's :meth:`~skxclust._geometry.Geometry.pass_work`), by k-means++ and by inference.
- :func:`map_jobs`: independent jobs (the row chunks of a warp pass, the two-cluster fits
  that rank split–merge moves, the restart groups of a small Lloyd loop), each on one torch
  thread, up to ``torch.get_num_threads()`` at a time in Python threads (torch releases
  the GIL inside its ops).

Neither changes a result: a job computes the same bits on any thread, and the ops whose
intra-op threads the policy sets give the same bits with one thread or several (the
project promises results independent of the thread count; ``benchmarks/fingerprint.py``
checks every fit path with one and two threads). Only the sizes at the end of this module
take part in the arithmetic (block sizes fix the order of floating-point sums, the
screening size decides where float32 products screen the labels): changing one of them can
change results.

:func:`torch_threads` is the mechanism: :func:`pass_threads` and :func:`map_jobs` use it,
and so does ``_lloyd.weighted_mean`` (one thread for a sum whose bits must not depend on
the thread count).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import torch

__all__ = ["EXPLAIN_BLOCK_VALUES", "ROW_SUM_BLOCK_VALUES", "SCREEN_MIN_MACS",
           "SEEDING_BLOCK_ENTRIES", "SERIAL_BELOW", "SIGNAL_CHUNK_SCALE", "SUM_BLOCK_VALUES",
           "Work", "block_rows", "intra_op_threads", "map_jobs", "pass_threads",
           "torch_threads"]

# -- when one thread is faster ----------------------------------------------------------
# Measured on the project's shared 2-core machine. Below these sizes torch's per-op
# parallel regions cost more than they save, and on a shared or virtualised CPU every
# region can wait milliseconds for a descheduled thread (scikit-learn likewise holds BLAS
# to one thread inside its Lloyd loop). A pass that is "serial" runs on one torch thread.
SERIAL_BELOW = {
    # Multiply-adds of one inference pass (predict, transform, score, explain) of X against
    # the centroids, under a millisecond of work on one core. sklearn's digits (1797 x 64,
    # K=10: ~1e6): one thread as fast as two on an idle machine, 10-50x faster on a busy
    # one. MNIST-5k (5000 x 784: ~4e7 with K=10) keeps torch's threads: two are faster there
    # on an idle machine, although several times slower on a busy one.
    "inference": 2**22,
    # Multiply-adds of one Lloyd pass over the data (all restarts together) or of one
    # k-means++ step (all candidates of a group of restarts). A Lloyd iteration is ~30 small
    # ops around its one or two products, so the bar is higher than for inference: digits
    # with 10 restarts (~1.2e7 per pass) still fitted faster on one thread (median fit
    # 0.083 s against 0.110 s with two on an idle machine). A serial Lloyd loop with
    # restarts still uses a second core: its restarts run in two groups (see _lloyd.py;
    # digits, 10 restarts: 0.88-0.93x scikit-learn's fit time against 1.0-1.3x in one).
    "fit": 2**26,
    # (row, centroid, pixel) terms of one chunk of a warp pass (ST K-means): below this,
    # each of the ~100 small ops of a warp-fit step costs more in thread barriers than a
    # second thread gains. Above it the chunks run concurrently, one torch thread each (a
    # second intra-op thread speeds one chunk up 1.3x, two chunks at a time run 1.9x faster).
    "warp": 2**17,
}


class Work(NamedTuple):
    """How much one pass over the data computes, in the unit of its ``kind`` (a key of
    :data:`SERIAL_BELOW`), and where."""

    kind: str
    size: int
    device: torch.device


def intra_op_threads(work: Work | None) -> int | None:
    """1 when ``work`` is a CPU pass too small for torch's threads to pay off, else None
    (keep torch's setting; also for ``work=None``)."""
    if work is not None and work.device.type == "cpu" and work.size < SERIAL_BELOW[work.kind]:
        return 1
    return None


def pass_threads(work: Work | None):
    """Context manager: run one pass of size ``work`` with :func:`intra_op_threads`."""
    return torch_threads(intra_op_threads(work))


def map_jobs(fn: Callable, jobs: Sequence, device: torch.device, *, work: Work | None = None,
             setup: Callable[[], object] | None = None, max_workers: int | None = None,
             name: str = "skxclust", track: Callable | None = None) -> list:
    """``[fn(job) for job in jobs]``, each job on one torch thread (on the CPU).

    The pass runs with the intra-op threads of ``work`` (None: the caller's), ``setup``
    first; the jobs run in ``min(torch.get_num_threads(), len(jobs), max_workers)`` Python
    threads on the CPU (one when ``work`` is too small for threads), one after the other on
    a GPU. Each job is computed single-threaded whatever the number of workers, so the
    results do not depend on it. ``track(items)`` wraps the sequence the results are
    collected over (e.g. a progress bar): the jobs themselves, or their futures.
    """
    cpu = device.type == "cpu"
    track = (lambda items: items) if track is None else track

    def run(job):
        with torch_threads(1 if cpu else None):
            return fn(job)

    with pass_threads(work):
        if setup is not None:
            setup()
        workers = min(torch.get_num_threads(), len(jobs)) if cpu else 1
        if max_workers is not None:
            workers = min(workers, max_workers)
        if workers <= 1:
            return [run(job) for job in track(jobs)]
        with ThreadPoolExecutor(workers, thread_name_prefix=name) as pool:
            futures = [pool.submit(run, job) for job in jobs]
            return [future.result() for future in track(futures)]


# -- sizes that take part in the arithmetic (changing one can change results) -------------
# EuclideanGeometry.partial_sums scatter-adds blocks of about this many values (2 MiB of
# float64, cache-sized) into every restart's sums before moving on, so X is read from
# memory once for all restarts.
SUM_BLOCK_VALUES = 2**18
# ExplainableKMeans.explain without a feature extractor: blocks of about this many values
# (4 MiB of float64), so the few (rows, D) temporaries of a block stay in cache (MNIST-5k on
# 2 cores: 42 ms with 668-row blocks, 61 ms with 167, 49 ms with 1337).
EXPLAIN_BLOCK_VALUES = 2**19
# The fit statistics' column sums of the rows (reference_): float64 sums of blocks of about
# this many values, so that float32 rows are never copied to float64 whole (60,000 MNIST
# rows: a 360 MB temporary); ST K-means' 512 statistics rows of MNIST are one block.
ROW_SUM_BLOCK_VALUES = 2**19
# k-means++ seeds restarts in groups that keep the (group * trials, n) distance block near
# this many entries.
SEEDING_BLOCK_ENTRIES = 2**24
# The float32 screening of EuclideanGeometry(screen=True) runs from this many multiply-adds
# per pass: below, the float32 products save less than the screening's extra passes cost
# (digits with 10 restarts, 1.2e7, stays unscreened).
SCREEN_MIN_MACS = 2**24
# ST K-means aligns chunks of 1-D signals this many times the rows of a chunk of images
# (WarpGeometry.map_chunks): a signal's pair fit moves sqrt(n_landmarks) knots along one
# axis (8 parameters by default against an image's 2 * n_landmarks = 32), so a chunk's time
# is the fixed cost of its Levenberg-Marquardt steps' small ops, not their arithmetic.
# Trace (100 rows of 275 samples, 4 clusters, 4 knots, one thread): 0.80-0.92 s per fit
# with 1, 0.64-0.66 s with 8; OSULeaf (200 x 427, 6 clusters) 5 % faster; held-out ACC
# over 5 seeds unchanged on ArrowHead, GunPoint and Trace, OSULeaf 0.483 -> 0.484.
SIGNAL_CHUNK_SCALE = 8


def block_rows(values: int, n_features: int, limit: int) -> int:
    """Rows of ``n_features`` in a block of about ``values`` values: at least 1, at most
    ``limit``."""
    return max(1, min(limit, values // max(1, n_features)))


# -- the mechanism ---------------------------------------------------------------------------
_threads_lock = threading.Lock()
_threads_state = {"depth": 0, "saved": 0}  # entries in all threads; setting before the first
_thread_depth = threading.local()  # entries in the calling thread


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

    torch initialises a thread's setting on the thread's first use of torch, from the value
    set last by any thread; so the outermost entry of each thread asks for its setting
    (which initialises it) before setting ``n``, or a later first use would replace ``n``.
    """
    if n is None:
        yield
        return
    depth = getattr(_thread_depth, "value", 0)
    with _threads_lock:
        if depth == 0:  # (when no thread is inside, neither is this one)
            current = torch.get_num_threads()  # initialises this thread's setting
            if _threads_state["depth"] == 0:
                _threads_state["saved"] = current
            torch.set_num_threads(n)
        _threads_state["depth"] += 1
    _thread_depth.value = depth + 1
    try:
        yield
    finally:
        _thread_depth.value = depth
        with _threads_lock:
            _threads_state["depth"] -= 1
            if depth == 0:
                torch.set_num_threads(_threads_state["saved"])
